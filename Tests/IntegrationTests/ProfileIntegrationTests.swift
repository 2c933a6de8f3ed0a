// The notification profile (§3.6) end to end against the built broker: payload checks,
// category sets, action checks, willPresent completions, launch retention, persistence,
// the typed Swift client and the `categories`, `notify` and `click` subcommands.
import Foundation
import Glibc
import NotifBusClient
import NotifBusProtocol
import Testing

/// Foundation has a `Notification` too; this file names the client's.
private typealias BusNotification = NotifBusClient.Notification

private let defaultAction = "com.apple.UNNotificationDefaultActionIdentifier"
private let dismissAction = "com.apple.UNNotificationDismissActionIdentifier"

/// The spec's categories and the example's, raw: foreground, destructive, text input,
/// custom dismiss, a background action, and a category without actions.
private let sampleCategories = #"""
    [{"identifier":"INVITE","options":[],"actions":[
        {"identifier":"ACCEPT","title":"Accept","options":["foreground"]},
        {"identifier":"DECLINE","title":"Decline","options":["destructive"]}]},
     {"identifier":"MESSAGE","options":["customDismissAction","hiddenPreviewsShowTitle"],"actions":[
        {"identifier":"REPLY","title":"Reply","options":[],"textInput":{"buttonTitle":"Send","placeholder":"Message"}}]},
     {"identifier":"REMINDER","actions":[
        {"identifier":"SNOOZE","title":"Snooze"},
        {"identifier":"OPEN","title":"Open","options":["foreground"]}]},
     {"identifier":"PLAIN","actions":[]}]
    """#

/// The same set as Swift values.
private let typedCategories: [NotificationCategory] = [
    NotificationCategory(
        identifier: "INVITE",
        actions: [
            NotificationAction(identifier: "ACCEPT", title: "Accept", options: [.foreground]),
            NotificationAction(identifier: "DECLINE", title: "Decline", options: [.destructive]),
        ]),
    NotificationCategory(
        identifier: "MESSAGE",
        actions: [
            TextInputNotificationAction(identifier: "REPLY", title: "Reply", textInputButtonTitle: "Send", textInputPlaceholder: "Message")
        ], options: [.customDismissAction, .hiddenPreviewsShowTitle]),
    NotificationCategory(
        identifier: "REMINDER",
        actions: [
            NotificationAction(identifier: "SNOOZE", title: "Snooze"),
            NotificationAction(identifier: "OPEN", title: "Open", options: [.foreground]),
        ]),
    NotificationCategory(identifier: "PLAIN", actions: []),
]

/// A greeted raw connection that numbers its requests. Used from one task at a time.
private final class RawSession: @unchecked Sendable {
    let client: RawClient
    private var nextID = 1

    init(_ broker: BrokerUnderTest) throws {
        client = try RawClient(broker.socket)
        try client.hello()
    }

    /// Sends `{"op":OP,"id":N,FIELDS}` and returns the reply. The bound only ends a hang: under
    /// ThreadSanitizer, with every suite running at once on 2 cores, the in-process observer
    /// that answers a post's event has been seen to take longer than 20 s to get a thread.
    func request(_ op: String, _ fields: String = "") -> JSONValue? {
        nextID += 1
        return client.request(#"{"op":"\#(op)","id":\#(nextID)\#(fields.isEmpty ? "" : "," + fields)}"#, timeout: .seconds(120))
    }

    func post(_ name: String, _ payload: String?) -> JSONValue? {
        request("post", #""name":"\#(name)""# + (payload.map { #","payload":\#($0)"# } ?? ""))
    }

    /// `post` on a thread of its own: a blocking read on the cooperative pool could starve
    /// the in-process observer that has to answer the event (2 cores: 2 pool threads).
    /// The reply is handed over under a lock, which ThreadSanitizer sees as the hand-over it is.
    func postOffPool(_ name: String, _ payload: String?) async -> JSONValue? {
        let lock = NSLock()
        nonisolated(unsafe) var reply: JSONValue? = nil
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                let r = self.post(name, payload)
                lock.withLock { reply = r }
                continuation.resume()
            }
        }
        return lock.withLock { reply }
    }

    func setCategories(_ json: String) -> JSONValue? { request("setCategories", #""categories":\#(json)"#) }

    var categories: JSONValue? { request("getCategories")?["result"]?["categories"] }

    func counter(_ name: String) -> Int64? { request("status")?["result"]?["counters"]?[name]?.intValue }
}

/// A notification as raw JSON.
private func notificationJSON(_ category: String? = nil, id: String = "n-1") -> String {
    #"{"identifier":"\#(id)","content":{\#(category.map { #""categoryIdentifier":"\#($0)""# } ?? "")}}"#
}

/// A didReceive payload as raw JSON; `userText` is a JSON literal (`"\"hi\""`, `"null"`).
private func clickJSON(_ action: String, _ category: String?, userText: String? = nil) -> String {
    #"{"actionIdentifier":"\#(action)"\#(userText.map { #","userText":\#($0)"# } ?? ""),"notification":\#(notificationJSON(category))}"#
}

/// Sends one request on a fresh greeted connection and returns the reply's exact bytes.
private func rawReply(_ socket: String, _ request: String) throws -> [UInt8] {
    let c = try RawClient(socket)
    try c.hello()
    c.send(request)
    var decoder = FrameDecoder()
    let deadline = ContinuousClock.now + .seconds(5)
    while ContinuousClock.now < deadline {
        if let body = try decoder.next() { return body }
        var pfd = pollfd(fd: c.fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 100) >= 0 else { break }
        if pfd.revents == 0 { continue }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = buffer.withUnsafeMutableBytes { Glibc.read(c.fd, $0.baseAddress!, $0.count) }
        guard n > 0 else { break }
        decoder.append(buffer[0..<n])
    }
    throw TestFailure("no reply to \(request)")
}

/// The path of the decoding error `body` throws, or nil when it throws none.
private func decodingErrorPath(_ body: () throws -> Void) -> String? {
    do {
        try body()
        return nil
    } catch let error as NotificationDecodingError {
        return error.path
    } catch {
        return "unexpected \(error)"
    }
}

/// Polls `condition` until it holds; false after `timeout`.
private func eventually(_ timeout: Duration = .seconds(20), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return try await condition()
}

/// A value shared between a test and the observers it starts.
private final class Shared<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) { stored = value }

    var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }

    func update(_ change: (inout Value) -> Void) { lock.withLock { change(&stored) } }
}

/// Holds an observer until the test opens it.
private final class Gate: @unchecked Sendable {
    private let open = Shared(false)

    func release() { open.value = true }

    func wait() async {
        _ = await eventually(.seconds(20)) { open.value }
    }
}

@Suite(.timeLimit(.minutes(5))) struct ProfileIntegrationTests {
    // MARK: Payloads

    @Test(.ownThread) func profilePayloadsAreCheckedBeforeQueueing() throws {
        let broker = try BrokerUnderTest()
        let s = try RawSession(broker)
        let observer = try RawClient(broker.socket)
        try observer.hello()
        let subscribed = observer.request(#"{"op":"subscribe","id":1,"events":["willPresent","didReceive","openSettings"]}"#)
        let observerID = try #require(subscribed?["result"]?["observer"]?.stringValue)
        let n = notificationJSON()
        func content(_ members: String) -> String { #"{"notification":{"identifier":"n","content":{\#(members)}}}"# }
        let refused: [(String, String?)] = [
            ("willPresent", nil), ("willPresent", "null"), ("willPresent", "[]"), ("willPresent", #""n""#), ("willPresent", "{}"),
            ("willPresent", #"{"notification":null}"#), ("willPresent", #"{"notification":[]}"#),
            ("willPresent", #"{"notification":{"content":{}}}"#),
            ("willPresent", #"{"notification":{"identifier":null,"content":{}}}"#),
            ("willPresent", #"{"notification":{"identifier":7,"content":{}}}"#),
            ("willPresent", #"{"notification":{"identifier":"n"}}"#),
            ("willPresent", #"{"notification":{"identifier":"n","content":null}}"#),
            ("willPresent", #"{"notification":{"identifier":"n","content":"hi"}}"#),
            ("willPresent", #"{"notification":{"identifier":"n","source":"push","content":{}}}"#),
            ("willPresent", #"{"notification":{"identifier":"n","source":1,"content":{}}}"#),
            ("willPresent", content(#""title":1"#)), ("willPresent", content(#""subtitle":true"#)),
            ("willPresent", content(#""body":{}"#)), ("willPresent", content(#""categoryIdentifier":5"#)),
            ("willPresent", content(#""threadIdentifier":[]"#)), ("willPresent", content(#""sound":1"#)),
            ("willPresent", content(#""userInfo":[]"#)), ("willPresent", content(#""userInfo":"x""#)),
            ("willPresent", content(#""badge":3.0"#)), ("willPresent", content(#""badge":1e1"#)),
            ("willPresent", content(#""badge":"3""#)), ("willPresent", content(#""badge":true"#)),
            ("didReceive", nil), ("didReceive", "null"), ("didReceive", "{}"),
            ("didReceive", #"{"notification":\#(n)}"#),
            ("didReceive", #"{"actionIdentifier":null,"notification":\#(n)}"#),
            ("didReceive", #"{"actionIdentifier":1,"notification":\#(n)}"#),
            ("didReceive", #"{"actionIdentifier":"\#(defaultAction)"}"#),
            ("didReceive", #"{"actionIdentifier":"\#(defaultAction)","notification":null}"#),
            ("didReceive", #"{"actionIdentifier":"\#(defaultAction)","userText":5,"notification":\#(n)}"#),
            ("didReceive", #"{"actionIdentifier":"\#(defaultAction)","notification":{"identifier":"n","content":{"badge":1.5}}}"#),
            // The payload is checked before the action: a bad payload with an unknown action is invalid_payload.
            ("didReceive", #"{"actionIdentifier":"NOPE","notification":{"identifier":"n"}}"#),
            ("openSettings", "[]"), ("openSettings", "5"), ("openSettings", #"{"notification":5}"#),
            ("openSettings", #"{"notification":{"identifier":"n"}}"#),
            ("openSettings", #"{"notification":{"identifier":"n","content":{"title":2}}}"#),
        ]
        for (name, payload) in refused {
            let reply = s.post(name, payload)
            #expect(errorCode(reply) == "invalid_payload", "\(name) \(payload ?? "(absent)"): \(String(describing: reply))")
            #expect(reply?["error"]?["message"]?.stringValue?.isEmpty == false)
        }
        #expect(s.counter("posted") == 0)
        #expect(observer.read(timeout: .milliseconds(300)) == nil, "a refused post reached an observer")
        #expect(observer.request(#"{"op":"unsubscribe","id":2,"observer":"\#(observerID)"}"#)?["result"] != nil)

        let accepted: [(String, String?)] = [
            (
                "willPresent",
                #"{"notification":{"identifier":"n","source":"local","content":{"title":"t","subtitle":null,"body":"b","categoryIdentifier":null,"threadIdentifier":"th","userInfo":{"any":[1,{"x":null}]},"badge":-2,"sound":"ping","extra":{"ok":true}},"extra":1},"also":"user data"}"#
            ),
            ("willPresent", #"{"notification":{"identifier":"","source":null,"content":{"userInfo":null,"badge":null}}}"#),
            ("openSettings", nil), ("openSettings", "null"), ("openSettings", "{}"), ("openSettings", #"{"notification":null}"#),
            ("openSettings", #"{"notification":\#(n)}"#),
            ("didReceive", #"{"actionIdentifier":"\#(defaultAction)","userText":null,"notification":\#(n)}"#),
            // Names that are not the profile's carry any payload.
            ("willpresent", "5"), ("mail.arrived", "[1,2]"),
        ]
        for (name, payload) in accepted {
            let reply = s.post(name, payload)
            #expect(reply?["result"]?["outcome"] == "unhandled", "\(name) \(payload ?? "(absent)"): \(String(describing: reply))")
        }
        #expect(s.counter("posted") == Int64(accepted.count))
    }

    // MARK: Categories

    @Test(.ownThread) func categorySetIsReplacedWholeOrNotAtAll() throws {
        let broker = try BrokerUnderTest()
        let s = try RawSession(broker)
        #expect(s.request("getCategories")?["result"] == ["categories": []], "a fresh broker has the empty set")
        #expect(s.setCategories(sampleCategories)?["result"] == ["count": 4])
        let inForce = s.categories
        #expect(inForce == (try JSONValue(parsing: sampleCategories)))

        let long = String(repeating: "x", count: 257)
        func action(_ members: String) -> String { #"[{"identifier":"A","actions":[{\#(members)}]}]"# }
        let refused = [
            "{}", "5", #""INVITE""#, "[5]", "[[]]", "[null]",
            #"[{"actions":[]}]"#, #"[{"identifier":"","actions":[]}]"#, #"[{"identifier":"\#(long)","actions":[]}]"#,
            #"[{"identifier":5,"actions":[]}]"#, #"[{"identifier":null,"actions":[]}]"#,
            #"[{"identifier":"A"}]"#, #"[{"identifier":"A","actions":null}]"#, #"[{"identifier":"A","actions":{}}]"#,
            #"[{"identifier":"A","actions":[],"options":["bogus"]}]"#,
            #"[{"identifier":"A","actions":[],"options":["foreground"]}]"#,
            #"[{"identifier":"A","actions":[],"options":"customDismissAction"}]"#,
            #"[{"identifier":"A","actions":[],"options":[1]}]"#,
            #"[{"identifier":"A","actions":[],"intentIdentifiers":"x"}]"#,
            #"[{"identifier":"A","actions":[],"intentIdentifiers":[""]}]"#,
            #"[{"identifier":"A","actions":[],"intentIdentifiers":[5]}]"#,
            #"[{"identifier":"A","actions":[],"intentIdentifiers":["\#(long)"]}]"#,
            #"[{"identifier":"A","actions":[],"extra":1}]"#, #"[{"identifier":"A","actions":[],"extra":null}]"#,
            #"[{"identifier":"A","actions":[5]}]"#,
            action(#""title":"x""#), action(#""identifier":"","title":"x""#), action(#""identifier":"\#(long)","title":"x""#),
            action(#""identifier":"X""#), action(#""identifier":"X","title":null"#), action(#""identifier":"X","title":5"#),
            action(#""identifier":"X","title":"x","options":["background"]"#),
            action(#""identifier":"X","title":"x","options":["customDismissAction"]"#),
            action(#""identifier":"X","title":"x","options":"foreground""#),
            action(#""identifier":"X","title":"x","destructive":true"#),
            action(#""identifier":"X","title":"x","textInput":{}"#),
            action(#""identifier":"X","title":"x","textInput":"Send""#),
            action(#""identifier":"X","title":"x","textInput":{"buttonTitle":5}"#),
            action(#""identifier":"X","title":"x","textInput":{"buttonTitle":null}"#),
            action(#""identifier":"X","title":"x","textInput":{"buttonTitle":"Send","placeholder":5}"#),
            action(#""identifier":"X","title":"x","textInput":{"buttonTitle":"Send","maxLength":5}"#),
            #"[{"identifier":"A","actions":[]},{"identifier":"A","actions":[]}]"#,
            #"[{"identifier":"A","actions":[{"identifier":"X","title":"x"},{"identifier":"X","title":"y"}]}]"#,
            // A good category before a bad one: nothing of the set is applied.
            #"[{"identifier":"NEW","actions":[]},{"identifier":"B","actions":[],"options":["nope"]}]"#,
        ]
        for json in refused {
            let reply = s.setCategories(json)
            #expect(errorCode(reply) == "bad_request", "\(json): \(String(describing: reply))")
            #expect(s.categories == inForce, "\(json) changed the set in force")
        }
        #expect(errorCode(s.request("setCategories")) == "bad_request")
        #expect(errorCode(s.request("setCategories", #""categories":null"#)) == "bad_request")
        #expect(errorCode(s.request("setCategories", #""categories":[],"extra":1"#)) == "bad_request")
        #expect(s.categories == inForce)
        // The old set still judges clicks.
        #expect(s.post("didReceive", clickJSON("ACCEPT", "INVITE"))?["result"]?["outcome"] == "unhandled")
        #expect(errorCode(s.post("didReceive", clickJSON("X", "A"))) == "invalid_action")

        let accepted: [(String, Int64)] = [
            // Action identifiers are unique per category, not across categories.
            (#"[{"identifier":"A","actions":[{"identifier":"X","title":"x"}]},{"identifier":"B","actions":[{"identifier":"X","title":"y"}]}]"#, 2),
            // Repeating an option is accepted: options are a set.
            (
                #"[{"identifier":"A","options":["allowInCarPlay","allowInCarPlay"],"actions":[{"identifier":"X","title":"x","options":["foreground","foreground","authenticationRequired"]}]}]"#,
                1
            ),
            // Optional members may be null; titles may be empty.
            (
                #"[{"identifier":"A","options":null,"intentIdentifiers":null,"actions":[{"identifier":"X","title":"","options":null,"textInput":null},{"identifier":"Y","title":"y","textInput":{"buttonTitle":"","placeholder":null}}]}]"#,
                1
            ),
            (
                #"[{"identifier":"\#(String(repeating: "c", count: 256))","intentIdentifiers":["INStartCallIntent","INSendMessageIntent"],"options":["hiddenPreviewsShowSubtitle"],"actions":[]}]"#,
                1
            ),
            ("[]", 0),
        ]
        for (json, count) in accepted {
            #expect(s.setCategories(json)?["result"] == ["count": .integer(count)], "\(json)")
            #expect(s.categories == (try JSONValue(parsing: json)))
        }
        // The empty set refuses every category action, but not the default action.
        #expect(errorCode(s.post("didReceive", clickJSON("ACCEPT", "INVITE"))) == "invalid_action")
        #expect(s.post("didReceive", clickJSON(defaultAction, "INVITE"))?["result"]?["outcome"] == "unhandled")
    }

    @Test(.ownThread) func getCategoriesReturnsTheAcceptedArrayByteForByte() throws {
        let broker = try BrokerUnderTest()
        let odd =
            "[ {\"actions\" : [ {\"title\":\"Accept\", \"identifier\":\"ACCEPT\",\"options\":[\"foreground\",\"foreground\"]} ],\n  \"identifier\":\"INVITE\", \"options\":null, \"intentIdentifiers\":[] } ]"
        let set = try rawReply(broker.socket, #"{"op":"setCategories","id":1,"categories":\#(odd)}"#)
        #expect(String(decoding: set, as: UTF8.self) == #"{"op":"reply","id":1,"result":{"count":1}}"#)
        let got = try rawReply(broker.socket, #"{"op":"getCategories","id":2}"#)
        #expect(String(decoding: got, as: UTF8.self) == #"{"op":"reply","id":2,"result":{"categories":\#(odd)}}"#)
    }

    // MARK: Actions

    @Test func didReceiveActionsFollowTheCategoriesInForce() async throws {
        let broker = try BrokerUnderTest()
        let s = try RawSession(broker)
        #expect(s.setCategories(sampleCategories)?["result"] == ["count": 4])
        let observer = try await NotifBusConnection.connect(socket: broker.socket, name: "observer")
        defer { observer.close() }
        let seen = Shared<[String]>([])
        try await observer.addDidReceiveObserver { response in
            seen.update { $0.append(response.actionIdentifier) }
            return .pass
        }
        let cases: [(action: String, category: String?, userText: String?, ok: Bool)] = [
            (defaultAction, nil, nil, true), (defaultAction, "NOPE", nil, true), (defaultAction, "INVITE", nil, true),
            (defaultAction, nil, "null", true), (defaultAction, "INVITE", #""t""#, false), (defaultAction, nil, #""""#, false),
            (dismissAction, "MESSAGE", nil, true), (dismissAction, "MESSAGE", #""t""#, false), (dismissAction, "INVITE", nil, false),
            (dismissAction, "PLAIN", nil, false), (dismissAction, nil, nil, false), (dismissAction, "NOPE", nil, false),
            ("ACCEPT", "INVITE", nil, true), ("DECLINE", "INVITE", nil, true), ("ACCEPT", "INVITE", #""t""#, false),
            ("ACCEPT", "MESSAGE", nil, false), ("ACCEPT", nil, nil, false), ("ACCEPT", "NOPE", nil, false),
            ("accept", "INVITE", nil, false), ("", "INVITE", nil, false),
            ("REPLY", "MESSAGE", #""Sounds good""#, true), ("REPLY", "MESSAGE", #""""#, true),
            ("REPLY", "MESSAGE", nil, false), ("REPLY", "MESSAGE", "null", false), ("REPLY", "INVITE", #""t""#, false),
            ("SNOOZE", "REMINDER", nil, true), ("OPEN", "REMINDER", nil, true), ("SNOOZE", "REMINDER", #""t""#, false),
        ]
        for c in cases {
            let reply = await s.postOffPool("didReceive", clickJSON(c.action, c.category, userText: c.userText))
            let label = "\(c.action) on \(c.category ?? "no category") with userText \(c.userText ?? "absent")"
            if c.ok {
                #expect(reply?["result"]?["outcome"] == "unhandled", "\(label): \(String(describing: reply))")
            } else {
                #expect(errorCode(reply) == "invalid_action", "\(label): \(String(describing: reply))")
            }
        }
        let accepted = cases.filter { $0.ok }.map { $0.action }
        #expect(s.counter("posted") == Int64(accepted.count))
        #expect(seen.value == accepted, "only accepted clicks reach the observer")
        // A notification without a category still takes the default action from the typed client.
        let typed = NotificationResponse(notification: BusNotification(identifier: "n"))
        #expect(try await observer.post(didReceive: typed).outcome == .unhandled)
        do {
            _ = try await observer.post(didReceive: NotificationResponse(actionIdentifier: "ACCEPT", notification: BusNotification(identifier: "n")))
            Issue.record("an action without a category was accepted")
        } catch {
            #expect(error.code == "invalid_action")
        }
    }

    @Test func clicksAreJudgedByTheCategoriesInForceWhenPosted() async throws {
        let broker = try BrokerUnderTest()
        let bus = try await NotifBusConnection.connect(socket: broker.socket, name: "poster")
        let blocker = try await NotifBusConnection.connect(socket: broker.socket, name: "blocker")
        defer { bus.close(); blocker.close() }
        try await bus.setNotificationCategories(typedCategories)
        let gate = Gate()
        try await blocker.addObserver(events: ["hold"]) { _ in
            await gate.wait()
            return .next
        }
        func click(_ action: String, _ category: String, text: String? = nil) -> NotificationResponse {
            NotificationResponse(
                actionIdentifier: action,
                notification: BusNotification(
                    identifier: action,
                    content: NotificationContent(categoryIdentifier: category)), userText: text)
        }
        async let held = bus.post("hold")
        #expect(try await eventually { try await bus.status().currentEvent != nil })
        let acceptClick = click("ACCEPT", "INVITE"), snoozeClick = click("SNOOZE", "REMINDER")
        let replyClick = click("REPLY", "MESSAGE", text: "hi")
        async let accept = bus.post(didReceive: acceptClick)
        async let snooze = bus.post(didReceive: snoozeClick)
        async let reply = bus.post(didReceive: replyClick)
        #expect(try await eventually { try await bus.status().pending == 3 })
        // The new set flips which actions launch the app and drops MESSAGE.
        try await bus.setNotificationCategories([
            NotificationCategory(identifier: "INVITE", actions: [NotificationAction(identifier: "ACCEPT", title: "Accept")]),
            NotificationCategory(
                identifier: "REMINDER", actions: [NotificationAction(identifier: "SNOOZE", title: "Snooze", options: [.foreground])]),
        ])
        do {
            _ = try await bus.post(didReceive: click("REPLY", "MESSAGE", text: "hi"))
            Issue.record("a click the new set forbids was accepted")
        } catch {
            #expect(error.code == "invalid_action", "refused at once, while the queue is busy")
        }
        gate.release()
        #expect(try await held.outcome == .unhandled)
        let a = try await accept, s = try await snooze, r = try await reply
        #expect(a.isRetainedForLaunch, "ACCEPT was foreground when posted")
        #expect(!s.isRetainedForLaunch && s.retained == nil, "SNOOZE was background when posted")
        #expect(r.outcome == .unhandled && !r.isRetainedForLaunch, "a queued click is not judged again")
        #expect(try await !bus.post(didReceive: click("ACCEPT", "INVITE")).isRetainedForLaunch)
        #expect(try await bus.post(didReceive: click("SNOOZE", "REMINDER")).isRetainedForLaunch)
    }

    // MARK: willPresent completions

    @Test(.ownThread) func willPresentCompletionsMustBePresentationOptions() throws {
        let broker = try BrokerUnderTest()
        let poster = try RawSession(broker)
        let first = try RawClient(broker.socket), second = try RawClient(broker.socket)
        try first.hello()
        try second.hello()
        let events = #""events":["willPresent","didReceive"]"#
        let o1 = first.request(#"{"op":"subscribe","id":1,\#(events),"priority":1}"#)?["result"]?["observer"]
        let o2 = second.request(#"{"op":"subscribe","id":1,\#(events),"priority":2}"#)?["result"]?["observer"]
        let post = #""name":"willPresent","payload":{"notification":{"identifier":"n","content":{}}}"#
        let invalid = [
            "", #","value":null"#, #","value":"banner""#, #","value":["banner","banner"]"#, #","value":["popup"]"#,
            #","value":["Banner"]"#, #","value":[1]"#, #","value":{}"#, #","value":[["banner"]]"#, #","value":true"#,
        ]
        for (i, value) in invalid.enumerated() {
            poster.client.send(#"{"op":"post","id":\#(100 + i),\#(post)}"#)
            guard let event = first.read()?["event"]?.intValue else { Issue.record("no event for \(value)"); continue }
            first.send(#"{"op":"complete","event":\#(event)\#(value)}"#)
            let error = first.read()
            #expect(errorCode(error) == "bad_request" && error?["id"] == .null, "\(value): \(String(describing: error))")
            guard let again = second.read()?["event"]?.intValue else { Issue.record("the chain stopped at \(value)"); continue }
            second.send(#"{"op":"complete","event":\#(again),"value":["banner"]}"#)
            let result = poster.client.read()?["result"]
            #expect(result?["outcome"] == "completed" && result?["by"] == o2 && result?["value"] == ["banner"], "\(value)")
            #expect(result?["trace"] == .array([["observer": o1 ?? .null, "reply": "invalid"], ["observer": o2 ?? .null, "reply": "complete"]]))
        }
        for (i, value) in [#"[]"#, #"["badge","sound","list","banner","alert"]"#, #"["alert"]"#].enumerated() {
            poster.client.send(#"{"op":"post","id":\#(200 + i),\#(post)}"#)
            guard let event = first.read()?["event"]?.intValue else { Issue.record("no event for \(value)"); continue }
            first.send(#"{"op":"complete","event":\#(event),"value":\#(value)}"#)
            let result = poster.client.read()?["result"]
            let expected = try JSONValue(parsing: value)
            #expect(result?["by"] == o1 && result?["value"] == expected, "\(value)")
        }
        #expect(second.read(timeout: .milliseconds(200)) == nil, "a valid completion ends the chain")
        #expect(poster.counter("invalid") == Int64(invalid.count))
        // Only willPresent completions are checked: any value completes a didReceive.
        poster.client.send(#"{"op":"post","id":300,"name":"didReceive","payload":\#(clickJSON(defaultAction, nil))}"#)
        guard let event = first.read()?["event"]?.intValue else { Issue.record("no didReceive event"); return }
        first.send(#"{"op":"complete","event":\#(event),"value":"popup"}"#)
        let result = poster.client.read()?["result"]
        #expect(result?["outcome"] == "completed" && result?["value"] == "popup" && result?["retained"] == .null)
    }

    // MARK: Launch retention

    @Test func launchRetentionKeepsTheNewestLaunchingClick() async throws {
        let broker = try BrokerUnderTest()
        let app = try await NotifBusConnection.connect(socket: broker.socket, name: "app")
        let other = try await NotifBusConnection.connect(socket: broker.socket, name: "other")
        defer { app.close(); other.close() }
        try await app.setNotificationCategories(typedCategories)
        func click(_ action: String, _ category: String?, id: String, text: String? = nil) -> NotificationResponse {
            NotificationResponse(
                actionIdentifier: action,
                notification: BusNotification(
                    identifier: id, source: .remote,
                    content: NotificationContent(title: "t-\(id)", categoryIdentifier: category, userInfo: ["id": .string(id)])),
                userText: text)
        }
        let accept = click("ACCEPT", "INVITE", id: "inv-1")
        let first = try await app.post(didReceive: accept)
        #expect(first.outcome == .unhandled && first.retained == "launch" && first.isRetainedForLaunch)
        #expect(try await app.peek("launch") == accept.jsonValue, "the whole payload is retained")
        // Unhandled clicks that do not launch the app leave the slot alone.
        for background in [
            click("DECLINE", "INVITE", id: "inv-2"), click(dismissAction, "MESSAGE", id: "msg-1"),
            click("REPLY", "MESSAGE", id: "msg-2", text: "hi"), click("SNOOZE", "REMINDER", id: "rem-1"),
        ] {
            let result = try await app.post(didReceive: background)
            #expect(result.outcome == .unhandled && result.retained == nil, "\(background.actionIdentifier)")
        }
        #expect(try await app.peek("launch") == accept.jsonValue)
        // A newer launching click overwrites: the default action, then a foreground action.
        let tap = NotificationResponse(
            notification: BusNotification(identifier: "msg-3", content: NotificationContent(categoryIdentifier: "MESSAGE")))
        #expect(try await app.post(didReceive: tap).isRetainedForLaunch)
        #expect(try await app.peek("launch") == tap.jsonValue)
        let open = click("OPEN", "REMINDER", id: "rem-2")
        #expect(try await app.post(didReceive: open).isRetainedForLaunch)
        #expect(try await app.launchNotificationResponse() == open, "taken once")
        #expect(try await app.launchNotificationResponse() == nil)

        // Handled or stopped clicks are never retained; passed-on ones are.
        let mode = Shared(DelegateReply.handled)
        try await other.addDidReceiveObserver { _ in mode.value }
        for (reply, outcome, retained) in [
            (DelegateReply.handled, PostOutcome.completed, false), (.stop, .stopped, false), (.pass, .unhandled, true),
        ] {
            mode.value = reply
            let result = try await app.post(didReceive: accept)
            #expect(result.outcome == outcome && result.isRetainedForLaunch == retained, "\(reply)")
            #expect(try await app.peek("launch") == (retained ? accept.jsonValue : nil), "\(reply)")
        }
        #expect(try await app.take("launch") == accept.jsonValue)

        // Retention counts as a put: a waiting take gets the payload and the slot stays empty.
        async let waiting = other.launchNotificationResponse(wait: .seconds(10))
        try await Task.sleep(for: .milliseconds(200))
        let tap2 = click(defaultAction, nil, id: "late")
        #expect(try await app.post(didReceive: tap2).retained == "launch")
        #expect(try await waiting == tap2)
        #expect(try await app.peek("launch") == nil)
    }

    /// The app's one call at start (`receiveNotificationResponses`): the launch click once,
    /// then didReceive under the app id as key, which the desktop bridge reads as "the app runs".
    @Test func anAppTakesItsLaunchResponseThenObservesUnderItsID() async throws {
        let broker = try BrokerUnderTest()
        let poster = try await NotifBusConnection.connect(socket: broker.socket, name: "bridge")
        let app = try await NotifBusConnection.connect(socket: broker.socket, name: "app")
        defer { poster.close(); app.close() }
        try await poster.setNotificationCategories(typedCategories)
        let tap = NotificationResponse(notification: BusNotification(identifier: "m1"))
        #expect(try await poster.post(didReceive: tap).isRetainedForLaunch)
        let seen = Shared([String]())
        let start = try await app.receiveNotificationResponses(appID: "org.example.Mail", activatedFor: "m1") { response in
            seen.value.append(response.notification.identifier)
            return .handled
        }
        #expect(start.launchResponse == tap)
        let observers = try await poster.status().observers
        #expect(observers.map { $0["key"] } == ["org.example.Mail"] && observers.first?["events"] == ["didReceive"])
        let later = NotificationResponse(notification: BusNotification(identifier: "m2"))
        #expect(try await poster.post(didReceive: later).outcome == .completed)
        #expect(seen.value == ["m2"], "the launch click is not delivered again")
        #expect(try await app.receiveNotificationResponses(appID: "org.example.Mail") { _ in .handled }.launchResponse == nil)
    }

    // MARK: Persistence

    @Test func categoriesAndLaunchSurviveSIGKILL() async throws {
        let folder = TempFolder()
        let stateDir = folder.path + "/state"
        var broker: BrokerUnderTest? = try BrokerUnderTest(["--state-dir", stateDir], folder: folder)
        let socket = broker!.socket
        let set = try rawReply(socket, #"{"op":"setCategories","id":1,"categories":\#(sampleCategories)}"#)
        #expect(String(decoding: set, as: UTF8.self).contains(#""count":4"#))
        let before = try rawReply(socket, #"{"op":"getCategories","id":2}"#)
        let open = NotificationResponse(
            actionIdentifier: "OPEN",
            notification: BusNotification(
                identifier: "rem-1",
                content: NotificationContent(categoryIdentifier: "REMINDER")))
        do {
            let bus = try await NotifBusConnection.connect(socket: socket)
            defer { bus.close() }
            #expect(try await bus.post(didReceive: open).isRetainedForLaunch)
            // A refused set is not written either.
            do {
                try await bus.setNotificationCategories([
                    NotificationCategory(identifier: "A", actions: []),
                    NotificationCategory(identifier: "A", actions: []),
                ])
                Issue.record("duplicate identifiers were accepted")
            } catch {
                #expect(error.code == "bad_request")
            }
        }
        broker!.child.signal(SIGKILL)
        #expect(broker!.child.waitExit() != nil)
        broker = nil

        var restarted: BrokerUnderTest? = try BrokerUnderTest(["--state-dir", stateDir], folder: folder)
        #expect(try rawReply(socket, #"{"op":"getCategories","id":2}"#) == before, "restored byte for byte")
        do {
            let bus = try await NotifBusConnection.connect(socket: socket)
            defer { bus.close() }
            #expect(try await bus.notificationCategories() == typedCategories)
            #expect(try await bus.launchNotificationResponse() == open)
            // The restored set judges clicks.
            #expect(
                try await bus.post(
                    didReceive: NotificationResponse(
                        actionIdentifier: "REPLY",
                        notification: BusNotification(
                            identifier: "m", content: NotificationContent(categoryIdentifier: "MESSAGE")), userText: "ok")
                ).outcome == .unhandled)
            do {
                _ = try await bus.post(
                    didReceive: NotificationResponse(
                        actionIdentifier: "REPLY",
                        notification: BusNotification(
                            identifier: "m", content: NotificationContent(categoryIdentifier: "MESSAGE"))))
                Issue.record("REPLY without text was accepted after the restart")
            } catch {
                #expect(error.code == "invalid_action")
            }
            // The latest accepted set is the one restored next time.
            #expect(try await bus.setNotificationCategories([typedCategories[0]]) == 1)
        }
        restarted!.child.signal(SIGKILL)
        #expect(restarted!.child.waitExit() != nil)
        restarted = nil
        let third = try BrokerUnderTest(["--state-dir", stateDir], folder: folder)
        let bus = try await NotifBusConnection.connect(socket: third.socket)
        defer { bus.close() }
        #expect(try await bus.notificationCategories() == [typedCategories[0]])
        #expect(try await bus.launchNotificationResponse() == nil, "the launch payload was taken before the kill")
    }

    // MARK: The Swift types

    @Test func swiftTypesRoundTripThroughTheBroker() async throws {
        let broker = try BrokerUnderTest()
        let bus = try await NotifBusConnection.connect(socket: broker.socket)
        defer { bus.close() }
        let categories: [NotificationCategory] = [
            NotificationCategory(
                identifier: "INVITE",
                actions: [
                    NotificationAction(identifier: "ACCEPT", title: "Accept", options: [.foreground, .authenticationRequired]),
                    NotificationAction(identifier: "DECLINE", title: "Decline", options: [.destructive]),
                ], intentIdentifiers: ["INStartCallIntent"], options: [.allowInCarPlay]),
            NotificationCategory(
                identifier: "MESSAGE",
                actions: [
                    TextInputNotificationAction(
                        identifier: "REPLY", title: "Reply", options: [.authenticationRequired],
                        textInputButtonTitle: "Send", textInputPlaceholder: "Message"),
                    TextInputNotificationAction(identifier: "NOTE", title: "Note", textInputButtonTitle: "Save"),
                ], options: [.customDismissAction, .hiddenPreviewsShowTitle, .hiddenPreviewsShowSubtitle]),
            NotificationCategory(identifier: "EMPTY", actions: []),
        ]
        #expect(try await bus.setNotificationCategories(categories) == 3)
        let got = try await bus.notificationCategories()
        #expect(got == categories)
        let reply = try #require(got[1].action(withIdentifier: "REPLY") as? TextInputNotificationAction)
        #expect(reply.textInputButtonTitle == "Send" && reply.textInputPlaceholder == "Message" && reply.options == [.authenticationRequired])
        #expect((got[1].actions[1] as? TextInputNotificationAction)?.textInputPlaceholder == nil)
        #expect(got[0].actions[1] is NotificationAction && !(got[0].actions[1] is TextInputNotificationAction))
        #expect(got[0].action(withIdentifier: "ACCEPT")?.launchesApp == true && got[0].action(withIdentifier: "DECLINE")?.launchesApp == false)
        #expect(got[0].intentIdentifiers == ["INStartCallIntent"] && got[2].actions.isEmpty)
        #expect(try NotificationCategory.list(json: .array(categories.map(\.jsonValue))) == categories)
        #expect(categories[1].jsonValue["options"] == ["customDismissAction", "hiddenPreviewsShowTitle", "hiddenPreviewsShowSubtitle"])
        #expect(try await bus.setNotificationCategories([]) == 0)
        #expect(try await bus.notificationCategories().isEmpty)

        // The wire names agree with the protocol module's.
        #expect(Set(NotificationAction.Options([.foreground, .destructive, .authenticationRequired]).names) == CategorySet.actionOptions)
        #expect(
            Set(
                NotificationCategory.Options([
                    .customDismissAction, .allowInCarPlay, .hiddenPreviewsShowTitle,
                    .hiddenPreviewsShowSubtitle,
                ]).names) == CategorySet.categoryOptions)
        #expect(Set(PresentationOptions([.badge, .sound, .list, .banner, .alert]).names) == PresentationOptionNames.all)
        #expect(NotificationResponse.defaultActionIdentifier == defaultAction)
        #expect(NotificationResponse.dismissActionIdentifier == dismissAction)
        #expect(PresentationOptions([.banner, .sound]).jsonValue == ["sound", "banner"])
        #expect(try PresentationOptions(json: ["banner", "badge"]) == [.banner, .badge])
        #expect(try PresentationOptions(json: []) == [])

        // Notifications and responses, both ways; members §3.6 does not name are ignored.
        let full = BusNotification(
            identifier: "msg-1", source: .remote,
            content: NotificationContent(
                title: "Ana", subtitle: "Lunch", body: "Noon?", categoryIdentifier: "MESSAGE", threadIdentifier: "ana",
                userInfo: ["chatId": "ana", "n": [1, 2.5, .null]], badge: 3, sound: "ping"))
        #expect(try BusNotification(json: full.jsonValue) == full)
        let response = NotificationResponse(actionIdentifier: "REPLY", notification: full, userText: "On my way")
        #expect(try NotificationResponse(json: response.jsonValue) == response)
        #expect(response.jsonValue["userText"] == "On my way" && !response.isDefaultAction)
        #expect(NotificationResponse(notification: full).isDefaultAction)
        let sparse: JSONValue = ["identifier": "n", "source": .null, "content": ["title": .null, "extra": [1], "userInfo": .null], "extra": true]
        #expect(try BusNotification(json: sparse) == BusNotification(identifier: "n"))
        #expect(BusNotification(identifier: "n").jsonValue == ["identifier": "n", "content": [:]])

        // Bad input fails with the path to the problem.
        #expect(decodingErrorPath { _ = try PresentationOptions(json: ["banner", "banner"]) } == "options[1]")
        #expect(decodingErrorPath { _ = try PresentationOptions(json: ["popup"]) } == "options[0]")
        #expect(decodingErrorPath { _ = try PresentationOptions(json: "banner") } == "options")
        #expect(decodingErrorPath { _ = try PresentationOptions(names: ["list", "Banner"]) } == "options[1]")
        #expect(decodingErrorPath { _ = try NotificationAction.Options(names: ["background"]) } == "options[0]")
        let badOption: JSONValue = [["identifier": "A", "actions": [["identifier": "X", "title": "x", "options": ["bogus"]]]]]
        #expect(decodingErrorPath { _ = try NotificationCategory.list(json: badOption) } == "categories[0].actions[0].options[0]")
        #expect(
            decodingErrorPath { _ = try NotificationCategory.list(json: [["identifier": "A", "actions": [["identifier": "X"]]]]) }
                == "categories[0].actions[0].title")
        #expect(
            decodingErrorPath { _ = try NotificationCategory.list(json: [["identifier": "A", "actions": [], "extra": 1]]) }
                == "categories[0].extra")
        #expect(
            decodingErrorPath { _ = try NotificationCategory.list(json: [["identifier": "A", "actions": []], ["identifier": "A", "actions": []]]) }
                == "categories[1].identifier")
        #expect(decodingErrorPath { _ = try NotificationCategory.list(json: [["identifier": "", "actions": []]]) } == "categories[0].identifier")
        #expect(
            decodingErrorPath {
                _ = try NotificationCategory(json: ["identifier": "A", "actions": [["identifier": "X", "title": "x", "textInput": [:]]]])
            }
                == "category.actions[0].textInput.buttonTitle")
        #expect(decodingErrorPath { _ = try NotificationCategory.list(json: ["categories": []]) } == "categories")
        #expect(decodingErrorPath { _ = try BusNotification(json: ["identifier": "n", "content": ["badge": 1.5]]) } == "notification.content.badge")
        #expect(decodingErrorPath { _ = try BusNotification(json: ["identifier": "n", "source": "push", "content": [:]]) } == "notification.source")
        #expect(decodingErrorPath { _ = try BusNotification(json: ["content": [:]]) } == "notification.identifier")
        #expect(decodingErrorPath { _ = try BusNotification(json: ["identifier": "n"]) } == "notification.content")
        #expect(decodingErrorPath { _ = try NotificationResponse(json: ["notification": full.jsonValue]) } == "payload.actionIdentifier")
        #expect(
            decodingErrorPath { _ = try NotificationResponse(json: ["actionIdentifier": "A", "userText": 1, "notification": full.jsonValue]) }
                == "payload.userText")
    }

    // MARK: Typed observers

    @Test func typedObserversAnswerForTheDelegate() async throws {
        let broker = try BrokerUnderTest()
        let host = try await NotifBusConnection.connect(socket: broker.socket, name: "host")
        let plugin = try await NotifBusConnection.connect(socket: broker.socket, name: "plugin")
        let poster = try await NotifBusConnection.connect(socket: broker.socket, name: "poster")
        defer { host.close(); plugin.close(); poster.close() }
        try await poster.setNotificationCategories(typedCategories)
        let presented = Shared<[BusNotification]>([])
        let responses = Shared<[NotificationResponse]>([])
        let settings = Shared<[String]>([])

        // willPresent: the plugin presents messages and passes the rest to the host, which shows nothing.
        let p = try await plugin.addWillPresentObserver(priority: 1, key: "plugin-present") { notification in
            presented.update { $0.append(notification) }
            return notification.content.categoryIdentifier == "MESSAGE" ? [.banner, .sound] : nil
        }
        let h = try await host.addWillPresentObserver(priority: 2) { _ in [] }
        let message = BusNotification(
            identifier: "msg-1", source: .remote,
            content: NotificationContent(
                title: "Ana", subtitle: "Lunch", body: "Noon?", categoryIdentifier: "MESSAGE", threadIdentifier: "ana",
                userInfo: ["chatId": "ana", "n": [1, 2]], badge: 3, sound: "ping"))
        let shown = try await poster.post(willPresent: message)
        #expect(shown.outcome == .completed && shown.by == p.id && shown.presentationOptions == [.banner, .sound])
        #expect(shown.value == ["sound", "banner"])
        #expect(presented.value == [message], "the observer sees the notification that was posted")
        let news = BusNotification(identifier: "news-1", source: .local)
        let hidden = try await poster.post(willPresent: news)
        #expect(hidden.by == h.id && hidden.presentationOptions == [], "completed with no options: not presented")
        #expect(hidden.trace == [TraceEntry(observer: p.id, reply: "next"), TraceEntry(observer: h.id, reply: "complete")])
        try await host.removeObserver(h.id)
        let nobody = try await poster.post(willPresent: news)
        #expect(nobody.outcome == .unhandled && nobody.presentationOptions == nil)

        // didReceive: the plugin owns invitations; the host takes replies.
        let pr = try await plugin.addDidReceiveObserver(priority: 1) { response in
            switch response.actionIdentifier {
            case "ACCEPT": return .handledWith(["by": "plugin"])
            case "DECLINE": return .stop
            default: return .pass
            }
        }
        let hr = try await host.addDidReceiveObserver(priority: 2) { response in
            responses.update { $0.append(response) }
            return response.actionIdentifier == "REPLY" ? .handled : .pass
        }
        let invite = BusNotification(identifier: "inv-1", content: NotificationContent(title: "Lunch", categoryIdentifier: "INVITE"))
        let accepted = try await poster.post(didReceive: NotificationResponse(actionIdentifier: "ACCEPT", notification: invite))
        #expect(accepted.outcome == .completed && accepted.by == pr.id && accepted.value == ["by": "plugin"] && !accepted.isRetainedForLaunch)
        let declined = try await poster.post(didReceive: NotificationResponse(actionIdentifier: "DECLINE", notification: invite))
        #expect(declined.outcome == .stopped && declined.by == pr.id && declined.trace == [TraceEntry(observer: pr.id, reply: "stop")])
        let typed = NotificationResponse(actionIdentifier: "REPLY", notification: message, userText: "On my way")
        let replied = try await poster.post(didReceive: typed)
        #expect(replied.outcome == .completed && replied.by == hr.id && replied.value == .null)
        #expect(responses.value.last == typed, "the observer sees the response that was posted, typed text included")
        let dismissed = try await poster.post(didReceive: NotificationResponse(actionIdentifier: dismissAction, notification: message))
        #expect(dismissed.outcome == .unhandled && !dismissed.isRetainedForLaunch)
        #expect(responses.value.last?.isDismissAction == true)
        let tap = NotificationResponse(notification: message)
        let tapped = try await poster.post(didReceive: tap)
        #expect(tapped.outcome == .unhandled && tapped.isRetainedForLaunch)
        #expect(try await host.launchNotificationResponse() == tap)
        do {
            _ = try await poster.post(didReceive: NotificationResponse(actionIdentifier: "REPLY", notification: message))
            Issue.record("REPLY without text was accepted")
        } catch {
            #expect(error.code == "invalid_action")
        }
        #expect(responses.value.count == 3, "the refused click reached nobody")

        // openSettings: the host shows the settings when asked from the system, and passes otherwise.
        try await host.addOpenSettingsObserver { notification in
            settings.update { $0.append(notification?.identifier ?? "system") }
            return notification == nil ? .handled : .pass
        }
        #expect(try await poster.post(openSettings: nil).outcome == .completed)
        #expect(try await poster.post(openSettings: message).outcome == .unhandled)
        #expect(try await poster.post("openSettings").outcome == .completed, "an absent payload is no notification")
        #expect(settings.value == ["system", "msg-1", "system"])
    }

    // MARK: CLI

    /// Runs the CLI and waits for it. The bound only catches a hang: one run takes well under
    /// a second even sanitized (1000 ASan runs of a usage error, four at a time on a loaded
    /// machine: at most 0.73 s), but a whole sanitized test run on a busy machine is slower.
    func run(_ args: [String]) throws -> (Int32, String, String) {
        let c = try Child(Binaries.notifbus, args)
        guard let status = c.waitExit(.seconds(60)) else { throw TestFailure("notifbus \(args) hung") }
        return (status, c.stdout, c.stderr)
    }

    @Test(.ownThread) func profileSubcommandsHelpUsageAndUnreachableBroker() throws {
        for name in ["categories", "notify", "click"] {
            let (status, out, _) = try run([name, "--help"])
            #expect(status == 0 && out.hasPrefix("Usage: notifbus \(name)") && out.contains("--socket"), "\(name)")
        }
        let usageErrors = [
            ["categories"], ["categories", "frob"], ["categories", "set"], ["categories", "set", "a", "b"], ["categories", "get", "x"],
            ["categories", "get", "--bogus"], ["notify"], ["notify", "extra", "--id", "n"], ["notify", "--id", "n", "--source", "push"],
            ["notify", "--id", "n", "--user-info", "[1]"], ["notify", "--id", "n", "--user-info", "{bad"],
            ["notify", "--id", "n", "--badge", "lots"],
            ["notify", "--id", "n", "--timeout", "soon"], ["click"], ["click", "--id", "n", "--source", "sky"],
            ["click", "--id", "n", "--user-info", "5"], ["click", "--id", "n", "--badge", "1"],
        ]
        for args in usageErrors {
            let (status, _, err) = try run(args)
            #expect(status == 2, "\(args)")
            #expect(err.split(separator: "\n").count == 1, "\(args): \(err)")
        }
        let folder = TempFolder()
        for args in [["categories", "get"], ["notify", "--id", "n"], ["click", "--id", "n"]] {
            let (status, _, err) = try run(args + ["--socket", folder.path + "/none"])
            #expect(status == 1 && err.split(separator: "\n").count == 1 && err.contains("cannot connect"), "\(args): \(err)")
        }
        let (status, out, _) = try run(["--help"])
        #expect(status == 0 && out.contains("  notify ") && out.contains("  click "))
        #expect(out.contains("  categories "))
    }

    @Test(.ownThread) func categoriesSubcommandSetsAndGets() throws {
        let broker = try BrokerUnderTest()
        let file = broker.folder.path + "/categories.json"
        try sampleCategories.write(toFile: file, atomically: true, encoding: .utf8)
        var r = try broker.cli(["categories", "set", file])
        #expect(r.0 == 0 && r.1 == "{\"count\":4}\n", "\(r)")
        r = try broker.cli(["categories", "get"])
        let printed = try JSONValue(parsing: r.1.trimmingCharacters(in: .whitespacesAndNewlines))
        let sample = try JSONValue(parsing: sampleCategories)
        #expect(r.0 == 0 && printed == sample)
        let inForce = r.1
        // A refused set: exit 1, the code on one line, the set in force kept.
        let bad = broker.folder.path + "/bad.json"
        try #"[{"identifier":"A","actions":[],"options":["bogus"]}]"#.write(toFile: bad, atomically: true, encoding: .utf8)
        r = try broker.cli(["categories", "set", bad])
        #expect(r.0 == 1 && r.1.isEmpty && r.2.split(separator: "\n").count == 1 && r.2.hasPrefix("notifbus categories: bad_request: "), "\(r)")
        let notJSON = broker.folder.path + "/not.json"
        try "[{".write(toFile: notJSON, atomically: true, encoding: .utf8)
        for args in [["categories", "set", notJSON], ["categories", "set", broker.folder.path + "/missing.json"]] {
            r = try broker.cli(args)
            #expect(r.0 == 1 && r.2.split(separator: "\n").count == 1, "\(args): \(r)")
        }
        #expect(try broker.cli(["categories", "get"]).1 == inForce)
        // `-` reads stdin.
        let one = broker.folder.path + "/one.json"
        try #"[{"identifier":"ONLY","actions":[]}]"#.write(toFile: one, atomically: true, encoding: .utf8)
        let piped = try Child("/bin/sh", ["-c", "exec \"$0\" categories set - --socket \"$1\" < \"$2\"", Binaries.notifbus, broker.socket, one])
        #expect(piped.waitExit() == 0 && piped.stdout == "{\"count\":1}\n", "\(piped.stderr)")
        #expect(try broker.cli(["categories", "get"]).1 == "[{\"actions\":[],\"identifier\":\"ONLY\"}]\n")
    }

    @Test(.ownThread) func notifySubcommandShowsThePresentationDecision() throws {
        let broker = try BrokerUnderTest()
        var r = try broker.cli(["notify", "--id", "n-1", "--title", "T"])
        #expect(r.0 == 0 && r.1 == "willPresent n-1: not presented (unhandled: no observer decided)\n", "\(r)")

        var observer = try broker.spawn(["observe", "willPresent", "--count", "1", "--reply", "complete", "--value", #"["banner","sound"]"#])
        #expect(observer.waitFor { observer.stderr.contains("observer o") })
        r = try broker.cli([
            "notify", "--id", "n-2", "--title", "Hi", "--subtitle", "S", "--body", "B", "--category", "MESSAGE",
            "--thread", "t", "--badge", "4", "--sound", "ping", "--user-info", #"{"k":[1]}"#, "--source", "remote",
        ])
        #expect(r.0 == 0 && r.1.hasPrefix("willPresent n-2: present with banner, sound (completed by o1; trace o1 complete)"), "\(r)")
        #expect(observer.waitExit() == 0)
        let expected: JSONValue = [
            "notification": [
                "identifier": "n-2", "source": "remote",
                "content": [
                    "title": "Hi", "subtitle": "S", "body": "B", "categoryIdentifier": "MESSAGE", "threadIdentifier": "t", "badge": 4,
                    "sound": "ping", "userInfo": ["k": [1]],
                ],
            ]
        ]
        #expect((try? JSONValue(parsing: observer.stdoutLines.first ?? ""))?["payload"] == expected)

        observer = try broker.spawn(["observe", "willPresent", "--count", "2", "--reply", "complete", "--value", "[]"])
        #expect(observer.waitFor { observer.stderr.contains("observer o") })
        r = try broker.cli(["notify", "--id", "n-3"])
        #expect(r.1.hasPrefix("willPresent n-3: not presented (completed by o2 with no options"), "\(r)")
        r = try broker.cli(["notify", "--id", "n-4", "--json"])
        let raw = try JSONValue(parsing: r.1.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(raw["outcome"] == "completed" && raw["value"] == [] && raw["by"] == "o2" && raw["retained"] == .null)
        #expect(observer.waitExit() == 0)

        observer = try broker.spawn(["observe", "willPresent", "--count", "1", "--reply", "stop"])
        #expect(observer.waitFor { observer.stderr.contains("observer o") })
        r = try broker.cli(["notify", "--id", "n-5"])
        #expect(r.1.hasPrefix("willPresent n-5: not presented (stopped by o3"), "\(r)")
        #expect(observer.waitExit() == 0)
    }

    @Test(.ownThread) func clickSubcommandShowsTheOutcomeAndRefusals() throws {
        let broker = try BrokerUnderTest()
        let file = broker.folder.path + "/categories.json"
        try sampleCategories.write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try broker.cli(["categories", "set", file]).0 == 0)

        var r = try broker.cli(["click", "--id", "inv-1", "--category", "INVITE", "--action", "ACCEPT"])
        #expect(r.0 == 0 && r.1 == "didReceive ACCEPT on inv-1: unhandled; retained for launch in slot 'launch'\n", "\(r)")
        r = try broker.cli(["click", "--id", "inv-2", "--category", "INVITE", "--action", "DECLINE"])
        #expect(r.0 == 0 && r.1 == "didReceive DECLINE on inv-2: unhandled; not retained: the action does not launch the app\n", "\(r)")
        r = try broker.cli(["take", "launch"])
        #expect(
            (try? JSONValue(parsing: r.1.trimmingCharacters(in: .whitespacesAndNewlines))) == [
                "actionIdentifier": "ACCEPT", "notification": ["identifier": "inv-1", "content": ["categoryIdentifier": "INVITE"]],
            ])
        for args in [
            ["click", "--id", "n-1"], ["click", "--id", "n-1", "--action", "default"],
            ["click", "--id", "n-1", "--action", defaultAction],
        ] {
            r = try broker.cli(args)
            #expect(r.1 == "didReceive default on n-1: unhandled; retained for launch in slot 'launch'\n", "\(args): \(r)")
        }
        r = try broker.cli(["click", "--id", "j-1", "--json"])
        let raw = try JSONValue(parsing: r.1.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(raw["outcome"] == "unhandled" && raw["retained"] == "launch" && raw["trace"] == [])

        // What the observer receives: the typed text, user info, source.
        var observer = try broker.spawn(["observe", "didReceive", "--count", "1", "--reply", "complete", "--value", #"{"ok":true}"#])
        #expect(observer.waitFor { observer.stderr.contains("observer o") })
        r = try broker.cli([
            "click", "--id", "msg-1", "--category", "MESSAGE", "--action", "REPLY", "--text", "hi there",
            "--title", "Ana", "--body", "B", "--user-info", #"{"chatId":"ana"}"#, "--source", "remote",
        ])
        #expect(r.0 == 0 && r.1 == "didReceive REPLY on msg-1: handled by o1, value {\"ok\":true}; not retained; trace o1 complete\n", "\(r)")
        #expect(observer.waitExit() == 0)
        let expected: JSONValue = [
            "actionIdentifier": "REPLY", "userText": "hi there",
            "notification": [
                "identifier": "msg-1", "source": "remote",
                "content": [
                    "title": "Ana", "body": "B", "categoryIdentifier": "MESSAGE",
                    "userInfo": ["chatId": "ana"],
                ],
            ],
        ]
        #expect((try? JSONValue(parsing: observer.stdoutLines.first ?? ""))?["payload"] == expected)

        observer = try broker.spawn(["observe", "didReceive", "--count", "1", "--reply", "stop"])
        #expect(observer.waitFor { observer.stderr.contains("observer o") })
        r = try broker.cli(["click", "--id", "msg-2", "--category", "MESSAGE", "--action", "dismiss"])
        #expect(r.0 == 0 && r.1 == "didReceive dismiss on msg-2: stopped by o2; not retained; trace o2 stop\n", "\(r)")
        #expect(observer.waitExit() == 0)
        #expect((try? JSONValue(parsing: observer.stdoutLines.first ?? ""))?["payload"]?["actionIdentifier"] == .string(dismissAction))

        // Refused clicks: exit 1, the code on stderr, nothing queued.
        let posted = try JSONValue(parsing: try broker.cli(["status", "--json"]).1)["counters"]?["posted"]
        for args in [
            ["--category", "INVITE", "--action", "dismiss"], ["--category", "MESSAGE", "--action", "REPLY"],
            ["--action", "ACCEPT"], ["--category", "INVITE", "--text", "t"], ["--category", "INVITE", "--action", "REPLY", "--text", "t"],
        ] {
            r = try broker.cli(["click", "--id", "x"] + args)
            #expect(r.0 == 1 && r.1.isEmpty, "\(args): \(r)")
            #expect(r.2.hasPrefix("notifbus click: invalid_action: ") && r.2.split(separator: "\n").count == 1, "\(args): \(r)")
        }
        #expect(try JSONValue(parsing: try broker.cli(["status", "--json"]).1)["counters"]?["posted"] == posted)
        // invalid_payload reaches the CLI through `post`.
        r = try broker.cli(["post", "willPresent", "{}"])
        #expect(r.0 == 1 && r.2.hasPrefix("notifbus post: invalid_payload: "), "\(r)")
    }
}
