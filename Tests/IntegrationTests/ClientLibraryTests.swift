// The Swift client library against the real broker: observers and their chain, evictions,
// typed post results, removal, status, a lost connection failing pending calls, and user
// data nested 10,000 deep going through observers and handlers.
import Foundation
import Glibc
import NotifBusClient
import NotifBusProtocol
import TestSupport
import Testing

final class Recorder: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ s: String) { lock.withLock { items.append(s) } }
    var all: [String] { lock.withLock { items } }
}

@Suite(.timeLimit(.minutes(5))) struct ClientLibraryTests {
    /// A status larger than one page (24 observers of 64 names of 250 bytes, ~400 KB) is
    /// read page by page and returned whole.
    @Test func statusFollowsItsPages() async throws {
        let broker = try BrokerUnderTest()
        let a = try await NotifBusConnection.connect(socket: broker.socket, name: "pages")
        defer { a.close() }
        var ids: [String] = []
        for i in 0..<24 {
            let names = (0..<64).map { n in "\(i)-\(n)-" + String(repeating: "x", count: 240) }
            ids.append(try await a.addObserver(events: names) { _ in .next }.id)
        }
        let first = try await a.request(Op.status)
        #expect(first["next"]?.stringValue != nil)
        let status = try await a.status()
        #expect(status.observers.compactMap { $0["observer"]?.stringValue } == ids)
        #expect(status.raw["next"] == .null)
    }

    @Test func observersChainAndTypedResult() async throws {
        let broker = try BrokerUnderTest()
        let a = try await NotifBusConnection.connect(socket: broker.socket, name: "a")
        let b = try await NotifBusConnection.connect(socket: broker.socket, name: "b")
        defer { a.close(); b.close() }
        let seen = Recorder()
        let first = try await a.addObserver(events: ["willPresent"], priority: 5) { event in
            seen.add("a:\(event.name)")
            return .next
        }
        let second = try await b.addObserver(events: ["willPresent"], priority: 7, key: "presenter") { _ in
            try? await Task.sleep(for: .milliseconds(50))  // handlers may take their time
            seen.add("b")
            return .complete(["banner"])
        }
        let result = try await a.post("willPresent", payload: ["notification": ["identifier": "n", "content": [:]]])
        #expect(result.outcome == .completed)
        #expect(result.by == second.id)
        #expect(result.value == ["banner"])
        #expect(result.retained == nil)
        #expect(result.trace == [TraceEntry(observer: first.id, reply: "next"), TraceEntry(observer: second.id, reply: "complete")])
        #expect(seen.all == ["a:willPresent", "b"])
        let status = try await a.status()
        #expect(status.observers.count == 2 && status.counter("completed") == 1)
        #expect(try await b.removeObserverByUniqueKey("presenter") == [second.id])
        #expect(try await a.removeObserver(first.id) == [first.id])
        do {
            _ = try await a.removeObserver(first.id)
            Issue.record("removing twice succeeded")
        } catch {
            #expect(error.code == "not_found")
        }
        #expect(try await a.post("willPresent", payload: ["notification": ["identifier": "n", "content": [:]]]).outcome == .unhandled)
    }

    @Test func evictionReachesTheOwner() async throws {
        let broker = try BrokerUnderTest()
        let old = try await NotifBusConnection.connect(socket: broker.socket)
        let new = try await NotifBusConnection.connect(socket: broker.socket)
        defer { old.close(); new.close() }
        let evictions = Recorder()
        let first = try await old.addObserver(events: ["e"], key: "mail", onEvicted: { e in evictions.add("\(e)") }) { _ in .stop }
        let second = try await new.addObserver(events: ["e"], key: "mail") { _ in .stop }
        #expect(second.replaced == [first.id])
        let deadline = ContinuousClock.now + .seconds(5)
        while evictions.all.isEmpty && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(evictions.all == ["\(Eviction.observer(first.id, by: second.id))"])
        #expect(try await new.post("e").by == second.id)
    }

    @Test func lostConnectionFailsPendingCalls() async throws {
        let broker = try BrokerUnderTest()
        let observerSide = try await NotifBusConnection.connect(socket: broker.socket)
        let client = try await NotifBusConnection.connect(socket: broker.socket, reconnect: .never)
        defer { observerSide.close(); client.close() }
        try await observerSide.addObserver(events: ["e"]) { _ in
            try? await Task.sleep(for: .seconds(30))
            return .next
        }
        // Both would wait 30 s or more on their own (the observer sleeps, the slot stays empty,
        // and the client's request timeout is its default 60 s): failing at all is failing promptly.
        async let post = client.post("e")
        async let take = client.take("never", wait: .seconds(30))
        try await Task.sleep(for: .milliseconds(300))
        broker.child.signal(SIGKILL)
        do {
            _ = try await post
            Issue.record("post succeeded after the broker died")
        } catch let error as NotifBusError {
            guard case .connectionLost = error else { Issue.record("unexpected \(error)"); return }
        }
        do {
            _ = try await take
            Issue.record("take succeeded after the broker died")
        } catch let error as NotifBusError {
            guard case .connectionLost = error else { Issue.record("unexpected \(error)"); return }
        }
        do {
            _ = try await client.status()
            Issue.record("a closed connection still answered")
        } catch {
            guard case .connectionLost = error else { Issue.record("unexpected \(error)"); return }
        }
    }

    /// The broker forwards user data of any depth; the client takes it as it comes: a payload
    /// nested 10,000 arrays deep reaches an observer and comes back as its value, and the same
    /// as arguments comes back as a handler's result.
    @Test func deepUserDataGoesThroughObserversAndHandlers() async throws {
        let broker = try BrokerUnderTest()
        let poster = try await NotifBusConnection.connect(socket: broker.socket, name: "poster")
        let server = try await NotifBusConnection.connect(socket: broker.socket, name: "server")
        defer { poster.close(); server.close() }
        var deep = JSONValue.integer(7)
        for level in 0..<10_000 { deep = level % 2 == 0 ? .array([deep]) : .object(["k": deep]) }
        let expected = deep.encoded
        let received = Recorder()
        try await server.addObserver(events: ["deep"]) { event in
            received.add("\(event.rawPayload == expected) \(depth(of: event.payload))")
            return .complete(event.payload)
        }
        let result = try await poster.post("deep", payload: deep)
        #expect(result.outcome == .completed)
        #expect(result.value.encoded == expected)
        #expect(received.all == ["true 10000"])
        try await server.methodChannel("deep").setMethodCallHandler({ call in call.arguments }, method: "echo")
        let echoed = try await poster.methodChannel("deep").invokeMethod("echo", arguments: deep)
        #expect(echoed.encoded == expected)
        #expect(depth(of: echoed) == 10_000)
    }

    /// A frame above the broker's maxFrame is never sent: the request fails with
    /// `invalidArgument` naming both sizes, a request in flight meanwhile is answered, and
    /// the connection stays. A result or a complete value above it is replaced by an error
    /// return or `next` (PROTOCOL.md decision 44).
    @Test func framesAboveMaxFrameFailOnlyThemselves() async throws {
        let broker = try BrokerUnderTest(["--max-frame", "65536"])
        let a = try await NotifBusConnection.connect(socket: broker.socket, name: "a")
        let server = try await NotifBusConnection.connect(socket: broker.socket, name: "server")
        defer { a.close(); server.close() }
        #expect(a.maxFrame == 65536)
        let big = JSONValue.array(Array(repeating: .integer(1_000_000_000), count: 10_000))
        try await server.methodChannel("c").setMethodCallHandler(
            { call in
                if call.arguments == "big" { return big }
                try? await Task.sleep(for: .milliseconds(300))
                return "slow"
            })
        async let slow = a.methodChannel("c").invokeMethod("m", arguments: "wait")
        try await Task.sleep(for: .milliseconds(50))
        do {
            _ = try await a.post("e", payload: big)
            Issue.record("a post above maxFrame was sent")
        } catch {
            guard case .invalidArgument(let why) = error else { Issue.record("unexpected \(error)"); return }
            #expect(why.contains("exceeds the broker's maxFrame 65536"), "\(why)")
        }
        #expect(try await slow == "slow")
        _ = try await a.ping()
        do {
            _ = try await a.methodChannel("c").invokeMethod("m", arguments: "big")
            Issue.record("a result above maxFrame came back")
        } catch {
            guard case .platform(let e) = error else { Issue.record("unexpected \(error)"); return }
            #expect(e.code == MethodChannel.genericErrorCode && e.message.contains("maxFrame"), "\(e)")
        }
        try await server.addObserver(events: ["e"]) { _ in .complete(big) }
        let result = try await a.post("e", payload: 1)
        #expect(result.outcome == .unhandled)
        _ = try await server.ping()
    }

    /// `post(willPresent:userInfo:)` forwards userInfo as its bytes: a number keeps its text.
    @Test func willPresentCarriesUserInfoAsItsBytes() async throws {
        let broker = try BrokerUnderTest()
        let a = try await NotifBusConnection.connect(socket: broker.socket, name: "a")
        defer { a.close() }
        let received = Recorder()
        try await a.addObserver(events: ["willPresent"]) { event in
            received.add(String(decoding: event.rawPayload, as: UTF8.self))
            return .next
        }
        let userInfo = Array(#"{"n":[1e9, 1.50],"s":"x"}"#.utf8)
        let notification = Notification(identifier: "n1", content: NotificationContent(title: "t", userInfo: ["ignored": 1]))
        _ = try await a.post(willPresent: notification, userInfo: userInfo)
        #expect(received.all == [#"{"notification":{"identifier":"n1","content":{"title":"t","userInfo":{"n":[1e9, 1.50],"s":"x"}}}}"#])
        await #expect(throws: NotifBusError.invalidArgument("userInfo must be one JSON object")) {
            _ = try await a.post(willPresent: notification, userInfo: Array("[1]".utf8))
        }
    }

    /// `post(didReceive:userInfo:)` forwards the notification's userInfo as its bytes too.
    @Test func clicksCarryUserInfoAsItsBytes() async throws {
        let broker = try BrokerUnderTest()
        let a = try await NotifBusConnection.connect(socket: broker.socket, name: "a")
        defer { a.close() }
        let received = Recorder()
        try await a.addObserver(events: ["didReceive"]) { event in
            received.add(String(decoding: event.rawPayload, as: UTF8.self))
            return .complete(nil)
        }
        let userInfo = Array(#"{"n":[1e9, 1.50],"s":"x"}"#.utf8)
        let notification = Notification(identifier: "n1", content: NotificationContent(title: "t", userInfo: ["ignored": 1]))
        let response = NotificationResponse(actionIdentifier: NotificationResponse.defaultActionIdentifier, notification: notification)
        let result = try await a.post(didReceive: response, userInfo: userInfo, once: "k1")
        #expect(result.outcome == .completed)
        let payload = try #require(received.all.first)
        #expect(payload.contains(#""content":{"title":"t","userInfo":{"n":[1e9, 1.50],"s":"x"}}"#), "\(payload)")
        let parsed = try NotificationResponse(json: JSONValue(parsing: Array(payload.utf8)))
        #expect(parsed.actionIdentifier == response.actionIdentifier && parsed.notification.identifier == "n1")
        #expect(parsed.notification.content.userInfo["s"] == "x")
        await #expect(throws: NotifBusError.invalidArgument("userInfo must be one JSON object")) {
            _ = try await a.post(didReceive: response, userInfo: Array("[1]".utf8))
        }
    }

    @Test func methodChannelErrorsAreTyped() async throws {
        let broker = try BrokerUnderTest()
        let server = try await NotifBusConnection.connect(socket: broker.socket)
        let client = try await NotifBusConnection.connect(socket: broker.socket)
        defer { server.close(); client.close() }
        let channel = server.methodChannel("notification_interaction")
        try await channel.setMethodCallHandler(
            { call in
                throw PlatformError(code: "NO_EMAIL", message: "no email for \(call.arguments)", details: ["tried": 3])
            }, method: "current_email_id")
        try await channel.setMethodCallHandler({ _ in "whole" })
        let remote = client.methodChannel("notification_interaction")
        do {
            _ = try await remote.invokeMethod("current_email_id", arguments: "x")
            Issue.record("no error")
        } catch {
            #expect(error == .platform(PlatformError(code: "NO_EMAIL", message: "no email for \"x\"", details: ["tried": 3])))
        }
        #expect(try await remote.invokeMethod("other") == "whole")
        try await channel.setMethodCallHandler(nil)
        do {
            _ = try await remote.invokeMethod("other")
            Issue.record("no error")
        } catch {
            guard case .notImplemented = error else { Issue.record("unexpected \(error)"); return }
        }
        // Registering again replaces the connection's own handler.
        try await channel.setMethodCallHandler({ _ in "v1" }, method: "m")
        try await channel.setMethodCallHandler({ _ in "v2" }, method: "m")
        #expect(try await remote.invokeMethod("m") == "v2")
        #expect(try await server.status().handlers.count == 2)
    }

    @Test func slotsFromTheClient() async throws {
        let broker = try BrokerUnderTest()
        let app = try await NotifBusConnection.connect(socket: broker.socket)
        let host = try await NotifBusConnection.connect(socket: broker.socket)
        defer { app.close(); host.close() }
        async let early = app.take("launch", wait: .seconds(5))
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await host.put("launch", ["emailId": "e-9"]) == PutResult(replaced: false, delivered: true))
        #expect(try await early == ["emailId": "e-9"])
        let second = try await app.take("launch")
        #expect(second == nil, "\(String(describing: second))")
        try await host.put("launch", "again")
        #expect(try await app.peek("launch") == "again")
    }

    /// Keyed requests from the client: a repeat answers with the first outcome, marked,
    /// and changes nothing; another body under the key is `once_conflict`.
    @Test func keyedRequestsTellTheirRepeats() async throws {
        let broker = try BrokerUnderTest()
        let bus = try await NotifBusConnection.connect(socket: broker.socket)
        defer { bus.close() }
        let first = try await bus.put("s", 1, once: "p")
        try await bus.put("s", 2)
        let again = try await bus.put("s", 1, once: "p")
        #expect(!first.isRepeat && again.isRepeat && again == PutResult(replaced: false, delivered: false, isRepeat: true))
        #expect(try await bus.peek("s") == 2)
        #expect(try await bus.take("s", once: "t") == 2)
        try await bus.put("s", 3)
        #expect(try await bus.take("s", once: "t") == 2)
        #expect(try await bus.peek("s") == 3)
        let categories = [NotificationCategory(identifier: "C", actions: [])]
        #expect(try await bus.setNotificationCategories(categories, once: "c") == 1)
        #expect(try await bus.setNotificationCategories(categories, once: "c") == 1)
        let raw: [String: JSONValue] = ["categories": [["identifier": "D", "actions": []]], "once": "d"]
        #expect(try await bus.requestMarkingRepeat(Op.setCategories, raw).isRepeat == false)
        #expect(try await bus.requestMarkingRepeat(Op.setCategories, raw) == (["count": 1], true))
        let posted = try await bus.post("e", payload: ["n": 1], once: "e")
        let repeated = try await bus.post("e", payload: ["n": 1], once: "e")
        #expect(!posted.isRepeat && repeated.isRepeat && repeated.event == posted.event)
        let conflict = await #expect(throws: NotifBusError.self) { try await bus.put("s", 9, once: "p") }
        if case .broker(let e)? = conflict {
            #expect(e.code == ErrorCode.onceConflict.rawValue && e.details?["op"] == "put" && !e.isRepeat)
        } else {
            Issue.record("not once_conflict: \(String(describing: conflict))")
        }
    }
}
