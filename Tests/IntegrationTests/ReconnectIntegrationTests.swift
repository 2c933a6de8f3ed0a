// The Swift client outliving the broker: a real broker is restarted on the same socket
// (SIGTERM and SIGKILL); observers, handlers and the monitor come back with keys and order,
// a pending request fails exactly once, and a resumed key yields to a newer holder.
import Foundation
import Glibc
import NotifBusClient
import NotifBusProtocol
import Testing

/// Collects connection states from `connectionStates()`.
final class StateLog: @unchecked Sendable {
    private let lock = NSLock()
    private var states: [ConnectionState] = []
    var all: [ConnectionState] { lock.withLock { states } }
    func add(_ s: ConnectionState) { lock.withLock { states.append(s) } }

    func follow(_ bus: NotifBusConnection) {
        let stream = bus.connectionStates()
        Task { for await s in stream { add(s) } }
    }

    var reconnected: (ids: [String: String], superseded: [String])? {
        for s in all { if case .reconnected(let ids, let superseded) = s { return (ids, superseded) } }
        return nil
    }
}

func eventually(_ what: String, _ condition: () -> Bool) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + .seconds(20)
    while !condition() {
        guard clock.now < deadline else { throw TestFailure("not within 20 s: \(what)") }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// Stops `broker` with `signal` and starts a new one on the same socket, with `flags`.
func restarted(_ broker: BrokerUnderTest, _ signal: Int32, _ flags: [String] = []) throws -> BrokerUnderTest {
    broker.child.signal(signal)
    _ = broker.child.waitExit(.seconds(5))
    return try BrokerUnderTest(flags, folder: broker.folder)
}

@Suite(.serialized, .timeLimit(.minutes(5))) struct ReconnectIntegrationTests {
    @Test(arguments: [SIGTERM, SIGKILL]) func registrationsComeBack(_ signal: Int32) async throws {
        let first = try BrokerUnderTest()
        let bus = try await NotifBusConnection.connect(socket: first.socket, name: "survivor", requestTimeout: .seconds(10))
        let states = StateLog()
        states.follow(bus)
        let a = try await bus.addObserver(events: ["e"], priority: 10, key: "sk") { _ in .next }
        let b = try await bus.addObserver(events: ["e", "f"], priority: 10) { _ in .next }
        let c = try await bus.addObserver(events: ["e"], priority: 30) { event in .complete(event.payload) }
        let channel = bus.methodChannel("sch")
        try await channel.setMethodCallHandler({ call in call.arguments }, method: "m")
        let seen = Recorder()
        let monitor = try await NotifBusConnection.connect(socket: first.socket, requestTimeout: .seconds(10))
        try await monitor.monitor { frame in seen.add(frame.frame["op"]?.stringValue ?? "") }

        // A waiting take is in flight at the loss: it fails exactly once, never re-sent.
        let outcomes = Recorder()
        let taker = Task {
            do {
                _ = try await bus.take("never", wait: .seconds(30))
                outcomes.add("result")
            } catch {
                if case NotifBusError.connectionLost = error {
                    outcomes.add("lost")
                } else {
                    outcomes.add((error as? NotifBusError)?.code ?? "\(error)")
                }
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        let broker = try restarted(first, signal)
        await taker.value
        #expect(outcomes.all == [signal == SIGTERM ? "shutting_down" : "lost"])
        try await eventually("reconnected") { states.reconnected != nil }
        let back = states.reconnected!
        #expect(Set(back.ids.keys).isSuperset(of: [a.id, b.id, c.id]) && back.ids.count == 4 && back.superseded.isEmpty)
        if case .disconnected = states.all.first {} else { Issue.record("first state \(states.all)") }

        let probe = try await NotifBusConnection.connect(socket: broker.socket, reconnect: .never)
        var status = try await probe.status()
        for _ in 0..<200 where status.clients.count < 3 {
            try await Task.sleep(for: .milliseconds(10))
            status = try await probe.status()
        }
        let mine = status.observers.filter { $0["client"]?.stringValue == bus.clientID }
        #expect(mine.map { $0["priority"]?.intValue ?? 0 } == [10, 10, 30])
        #expect(mine.map { $0["key"]?.stringValue } == ["sk", nil, nil])
        let result = try await probe.post("e", payload: "p")
        #expect(result.trace.map(\.observer) == [back.ids[a.id]!, back.ids[b.id]!, back.ids[c.id]!])
        #expect(result.value == "p")
        #expect(try await probe.methodChannel("sch").invokeMethod("m", arguments: [7]) == [7])
        try await eventually("monitor sees the post") { seen.all.contains("post") }
        #expect(bus.currentID(of: a.id) == back.ids[a.id])
        #expect(try await bus.removeObserver(b.id) == [b.id])
        probe.close()
        monitor.close()
        bus.close()
    }

    @Test func resumedKeyYieldsToANewerHolder() async throws {
        let first = try BrokerUnderTest()
        let bus = try await NotifBusConnection.connect(socket: first.socket, requestTimeout: .seconds(10))
        let states = StateLog()
        states.follow(bus)
        let evictions = Recorder()
        _ = try await bus.addObserver(
            events: ["e"], key: "k",
            onEvicted: { e in
                if case .observer(_, let by) = e { evictions.add(by) }
            }
        ) { _ in .next }
        let broker = try restarted(first, SIGKILL)
        let newcomer = try await NotifBusConnection.connect(socket: broker.socket, reconnect: .never)
        let mine = try await newcomer.addObserver(events: ["e"], key: "k") { _ in .stop }
        try await eventually("reconnected") { states.reconnected != nil }
        try await eventually("one eviction") { evictions.all.count == 1 }
        try await Task.sleep(for: .milliseconds(200))
        #expect(evictions.all == [mine.id])
        let status = try await newcomer.status()
        #expect(status.observers.map { $0["observer"]?.stringValue } == [mine.id])
        newcomer.close()
        bus.close()
    }

    /// Posts in flight when a broker with `--state-dir` is killed: the keyed ones are sent
    /// again on the new connection and each is answered exactly once (the one whose chain the
    /// crash cut hears `interrupted`, the queued one runs once); the unkeyed one fails.
    @Test func keyedPostsInFlightAreSentAgainAndAnsweredOnce() async throws {
        let folder = TempFolder()
        let flags = ["--state-dir", folder.path + "/state"]
        let first = try BrokerUnderTest(flags, folder: folder)
        let bus = try await NotifBusConnection.connect(socket: first.socket, requestTimeout: .seconds(20))
        let states = StateLog()
        states.follow(bus)
        let seen = Recorder()
        let released = Recorder()
        _ = try await bus.addObserver(events: ["e"]) { event in
            let text = event.payload.stringValue ?? ""
            seen.add(text)
            // Holds the first event until the test ends: the broker dies while it runs.
            while text == "held" && released.all.isEmpty { try? await Task.sleep(for: .milliseconds(10)) }
            return .complete(event.payload)
        }
        defer { released.add("done") }
        func outcome(_ payload: String, once: String?, on client: NotifBusConnection? = nil) -> Task<String, Never> {
            Task {
                do throws(NotifBusError) {
                    let r = try await (client ?? bus).post("e", payload: .string(payload), once: once)
                    return "\(r.value.stringValue ?? r.outcome.rawValue) repeat=\(r.isRepeat)"
                } catch {
                    switch error {
                    case .broker(let e): return "\(e.code) repeat=\(e.isRepeat)"
                    case .connectionLost: return "lost"
                    default: return "\(error)"
                    }
                }
            }
        }
        let held = outcome("held", once: "k-held")
        try await eventually("the held event runs") { seen.all == ["held"] }
        let queued = outcome("queued", once: "k-queued")
        let plain = outcome("plain", once: nil)
        // A client that holds nothing but a keyed post in flight reconnects for it.
        let poster = try await NotifBusConnection.connect(socket: first.socket, requestTimeout: .seconds(20))
        let solo = outcome("solo", once: "k-solo", on: poster)
        let probe = try await NotifBusConnection.connect(socket: first.socket, reconnect: .never)
        var waiting = try await probe.status().pending
        for _ in 0..<500 where waiting < 3 {
            try await Task.sleep(for: .milliseconds(10))
            waiting = try await probe.status().pending
        }
        #expect(waiting == 3)
        probe.close()

        let broker = try restarted(first, SIGKILL, flags)
        #expect(await held.value == "interrupted repeat=true")
        #expect(await queued.value == "queued repeat=false")
        #expect(await plain.value == "lost")
        // Run once on the new broker, before or after the observer is made again.
        #expect(["solo repeat=false", "unhandled repeat=false"].contains(await solo.value))
        #expect(seen.all.filter { $0 != "solo" } == ["held", "queued"])
        #expect(states.reconnected != nil)

        // Sent once more, each key answers with its first outcome and runs nothing.
        let again = try await bus.post("e", payload: "queued", once: "k-queued")
        #expect(again.isRepeat && again.value == "queued")
        let conflict = await #expect(throws: NotifBusError.self) { _ = try await bus.post("e", payload: "other", once: "k-queued") }
        if case .broker(let e)? = conflict {
            #expect(e.code == ErrorCode.onceConflict.rawValue && !e.isRepeat)
        } else {
            Issue.record("not once_conflict: \(String(describing: conflict))")
        }
        #expect(seen.all.filter { $0 != "solo" } == ["held", "queued"] && seen.all.filter { $0 == "solo" }.count <= 1)
        let checker = try await NotifBusConnection.connect(socket: broker.socket, reconnect: .never)
        #expect(try await checker.status().counter("posted") == 2)
        checker.close()
        poster.close()
        bus.close()
    }

    @Test func requestsWhileReconnectingWaitWithinTheirTimeout() async throws {
        let first = try BrokerUnderTest()
        let bus = try await NotifBusConnection.connect(socket: first.socket, requestTimeout: .seconds(10))
        let states = StateLog()
        states.follow(bus)
        _ = try await bus.addObserver(events: ["e"]) { _ in .next }
        first.child.signal(SIGKILL)
        _ = first.child.waitExit(.seconds(5))
        try await eventually("disconnected") { !states.all.isEmpty }
        #expect(!bus.isOpen)
        await #expect(throws: NotifBusError.self) { _ = try await bus.request(Op.ping, timeout: .milliseconds(300)) }
        let later = Task { try await bus.ping() }
        let broker = try BrokerUnderTest(folder: first.folder)
        _ = try await later.value
        _ = broker
        bus.close()
    }

    @Test func cliObserveHandleAndMonitorComeBackWithOneLineEach() async throws {
        let first = try BrokerUnderTest()
        let observe = try first.spawn(["observe", "e", "--key", "cli", "--priority", "7"])
        let handle = try first.spawn(["handle", "cch", "--result", "42"])
        let monitor = try first.spawn(["monitor"])
        try await eventually("registered") {
            observe.stderr.contains("observer") && handle.stderr.contains("handling") && monitor.stderr.contains("monitoring")
        }
        let broker = try restarted(first, SIGKILL)
        for child in [observe, handle, monitor] {
            try await eventually("reconnected line") { child.stderr.contains("notifbus: reconnected") }
        }
        let probe = try await NotifBusConnection.connect(socket: broker.socket, reconnect: .never)
        let status = try await probe.status()
        #expect(status.observers.map { $0["key"]?.stringValue } == ["cli"])
        #expect(status.observers.first?["priority"]?.intValue == 7)
        #expect(try await probe.methodChannel("cch").invokeMethod("m") == 42)
        for child in [observe, handle, monitor] {
            let lines = child.stderr.split(separator: "\n")
            #expect(lines.filter { $0.hasPrefix("notifbus: disconnected") }.count == 1, "\(child.stderr)")
            #expect(lines.filter { $0.hasPrefix("notifbus: reconnected") }.count == 1, "\(child.stderr)")
        }
        let stay = try broker.spawn(["observe", "x", "--no-reconnect"])
        try await eventually("registered") { stay.stderr.contains("observer") }
        broker.child.signal(SIGTERM)
        #expect(stay.waitExit(.seconds(10)) == 1)
        probe.close()
    }
}
