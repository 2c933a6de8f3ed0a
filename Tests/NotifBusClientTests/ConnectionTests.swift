// NotifBusConnection against a scripted peer on a socket pair, no broker: a reply takes its
// request's deadline out, a frame that is not protocol v1 closes the connection with a clear
// error, user data of any depth reaches observers and handlers and goes back unchanged, and
// the reconnect delays follow their schedule.
import Dispatch
import Foundation
import Glibc
import NotifBusProtocol
import TestSupport
import Testing

@testable import NotifBusClient

/// Runs blocking work on a thread of its own: test bodies run on the cooperative pool, whose
/// few threads the client's own tasks need. The result is handed over under a lock, which
/// ThreadSanitizer sees as the hand-over it is (a continuation resumed from a thread the
/// concurrency runtime did not make is not, and values built there look raced).
func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    let handOver = HandOver<T>()
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let started = DetachedThread.start {
            handOver.put(body())
            continuation.resume()
        }
        precondition(started, "cannot start a thread")
    }
    return handOver.take()
}

/// One value passed from a thread to a task under a lock.
final class HandOver<T>: @unchecked Sendable {
    private let lock = Lock()
    private var value: T? = nil

    func put(_ v: T) { lock.withLock { value = v } }
    func take() -> T { lock.withLock { value! } }
}

/// The broker's end of a socket pair: reads the client's frames and writes frames to it,
/// every read bounded, each call on a thread of its own.
final class ScriptedBroker: @unchecked Sendable {
    let fd: Int32
    private var decoder = FrameDecoder()
    /// Bounds every wait of these tests. Only a hang reaches it: all suites share one process,
    /// whose cooperative threads the blocking integration tests may hold for a long while,
    /// and the client's tasks need them.
    static let bound = Duration.seconds(120)

    /// A connection whose socket is the other end of this peer's.
    static func pair(requestTimeout: Duration = ScriptedBroker.bound) throws -> (NotifBusConnection, ScriptedBroker) {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw TestError("socketpair: \(errno)") }
        let connection = NotifBusConnection(fd: fds[0], requestTimeout: requestTimeout)
        connection.startReader()
        return (connection, ScriptedBroker(fd: fds[1]))
    }

    init(fd: Int32) { self.fd = fd }
    deinit { close(fd) }

    /// The client's next frame, or nil at the bound or at its end of the stream.
    func read(timeout: Duration = ScriptedBroker.bound) async -> JSONValue? {
        await offPool { self.readBlocking(timeout: timeout) }
    }

    private func readBlocking(timeout: Duration) -> JSONValue? {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let body = try? decoder.next() { return try? JSONValue(parsingAnyDepth: body) }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return nil }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(left.components.seconds * 1000 + 1)) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n <= 0 { return nil }
            decoder.append(buffer[0..<n])
        }
    }

    /// Whether the client closed its end within the bound (frames before that are skipped).
    func seesClose(timeout: Duration = ScriptedBroker.bound) async -> Bool {
        await offPool { self.seesCloseBlocking(timeout: timeout) }
    }

    private func seesCloseBlocking(timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 65536)
        while ContinuousClock.now < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 100) > 0 else { continue }
            if buffer.withUnsafeMutableBytes({ Glibc.read(fd, $0.baseAddress!, $0.count) }) <= 0 { return true }
        }
        return false
    }

    func write(_ body: [UInt8]) async {
        await offPool { self.writeBlocking(body) }
    }

    func write(_ text: String) async { await write(Array(text.utf8)) }

    private func writeBlocking(_ body: [UInt8]) {
        let frame = FrameHeader.encode(length: body.count) + body
        var offset = 0
        while offset < frame.count {
            let n = frame.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return }
            offset += n
        }
    }

    /// Answers the next request with `result` (JSON text); returns the request.
    @discardableResult
    func answer(_ result: String) async -> JSONValue? {
        guard let request = await read(), let id = request["id"] else { return nil }
        await write("{\"op\":\"reply\",\"id\":\(id),\"result\":\(result)}")
        return request
    }
}

struct TestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Values collected across threads.
final class Collected<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [T] = []
    func add(_ item: T) { lock.withLock { items.append(item) } }
    var all: [T] { lock.withLock { items } }
}

@Suite(.timeLimit(.minutes(10))) struct ConnectionTests {
    /// What the deadline timer is armed for, how often it was armed, and the deadlines pending.
    static func timerState(_ c: NotifBusConnection) -> (armed: DispatchTime?, armings: Int, pending: Int) {
        c.lock.withLock { (c.armedDeadline, c.timerArmings, c.pending.count) }
    }

    /// A reply takes its request's deadline out: nothing is left to fire for it, and a stream
    /// of requests and replies costs the timer nothing (it stays armed for the first deadline).
    @Test func aReplyTakesItsDeadlineOut() async throws {
        let (connection, broker) = try ScriptedBroker.pair()
        defer { connection.close() }
        async let ping = connection.request(Op.ping, timeout: ScriptedBroker.bound)
        let request = try #require(await broker.read())
        let first = Self.timerState(connection)
        #expect(first.armed != nil && first.armings == 1 && first.pending == 1)
        #expect(connection.lock.withLock { connection.pending[request["id"]!.intValue!]?.deadline } == first.armed)
        await broker.write("{\"op\":\"reply\",\"id\":\(request["id"]!),\"result\":{}}")
        #expect(try await ping == [:])
        #expect(Self.timerState(connection).pending == 0)

        // An error reply takes it out too, and later requests do not re-arm the timer.
        async let peek = connection.request(Op.peek, ["slot": "s"], timeout: ScriptedBroker.bound)
        let second = try #require(await broker.read())
        await broker.write("{\"op\":\"reply\",\"id\":\(second["id"]!),\"error\":{\"code\":\"not_found\",\"message\":\"m\"}}")
        let peeked: Result<JSONValue, NotifBusError>
        do { peeked = .success(try await peek) } catch { peeked = .failure(error as! NotifBusError) }
        #expect(peeked == .failure(.broker(BrokerError(code: "not_found", message: "m"))))

        // A pipeline's requests have the group's deadline, each taken out by its reply.
        let replies = connection.pipeline([(Op.ping, [:]), (Op.ping, [:])], timeout: ScriptedBroker.bound)
        await broker.answer("1")
        await broker.answer("2")
        #expect(await replies.wait().map { try? $0.get() } == [1, 2])
        let after = Self.timerState(connection)
        #expect(after.pending == 0 && after.armings == 1 && after.armed == first.armed)
    }

    /// A request whose reply does not come fails at its deadline; the timer is then armed
    /// for the next pending deadline, and a later reply still finds its request.
    @Test func aDeadlineWithoutReplyFailsItsRequest() async throws {
        let (connection, broker) = try ScriptedBroker.pair()
        defer { connection.close() }
        async let slow = connection.request(Op.status, timeout: ScriptedBroker.bound)
        let waiting = try #require(await broker.read())
        do {
            _ = try await connection.request(Op.ping, timeout: .milliseconds(50))
            Issue.record("a request without reply succeeded")
        } catch {
            guard case .timedOut(let why) = error else { Issue.record("unexpected \(error)"); return }
            #expect(why.contains("'ping'"))
        }
        #expect(await broker.read()?["op"] == "ping")
        let state = Self.timerState(connection)
        #expect(state.pending == 1 && state.armings == 3)  // the status, the earlier ping, the status again
        #expect(state.armed == connection.lock.withLock { connection.pending[waiting["id"]!.intValue!]?.deadline })
        await broker.write("{\"op\":\"reply\",\"id\":\(waiting["id"]!),\"result\":{\"ok\":true}}")
        #expect(try await slow == ["ok": true])
    }

    @Test func aLostConnectionTakesEveryDeadlineOut() async throws {
        let (connection, broker) = try ScriptedBroker.pair()
        defer { connection.close() }
        async let ping = connection.request(Op.ping, timeout: ScriptedBroker.bound)
        #expect(await broker.read()?["op"] == "ping")
        shutdown(broker.fd, Int32(SHUT_RDWR))
        let pinged: Result<JSONValue, NotifBusError>
        do { pinged = .success(try await ping) } catch { pinged = .failure(error as! NotifBusError) }
        #expect(pinged == .failure(.connectionLost("the broker closed the connection")))
        _ = await connection.waitForClose()
        let state = Self.timerState(connection)
        #expect(state.pending == 0 && state.armed == nil && connection.lock.withLock { connection.deadlineTimer == nil })
    }

    /// Frames that are not protocol v1 end the connection: pending requests fail naming the
    /// frame, and the client closes its socket.
    @Test(arguments: [
        (#"{"op":"reply","id":1,"result":1,"error":{"code":"c","message":"m"}}"#, "both 'result' and 'error'"),
        ("not json", "not JSON"),
        (#"{"op":"event","event":1,"observer":"o1","name":"n"}"#, "without 'payload'"),
        (#"{"op":"frobnicate"}"#, "unknown op 'frobnicate'"),
        ("", "length 0"),
    ])
    func malformedFramesCloseTheConnection(frame: String, reason: String) async throws {
        let (connection, broker) = try ScriptedBroker.pair()
        defer { connection.close() }
        async let ping = connection.request(Op.ping)
        #expect(await broker.read()?["op"] == "ping")
        await broker.write(frame)
        do {
            _ = try await ping
            Issue.record("the request succeeded")
        } catch let error as NotifBusError {
            guard case .connectionLost(let why) = error else { Issue.record("unexpected \(error)"); return }
            #expect(why.hasPrefix("the broker sent a") && why.contains(reason), "\(why)")
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(await connection.waitForClose().contains(reason))
        #expect(await broker.seesClose())
        #expect(connection.isClosed)
    }

    /// A 10,000-deep payload reaches an observer as a tree and comes back as its value; a
    /// 10,000-deep argument comes back as a handler's result; one as deep as a 1 MiB frame
    /// (what the broker forwards) reaches the observer as bytes, the connection stays up, and
    /// a result as deep comes back from `rawRequest` as bytes.
    @Test func deepUserDataReachesObserversAndHandlers() async throws {
        let (connection, broker) = try ScriptedBroker.pair()
        defer { connection.close() }
        let depths = Collected<Int>()
        let raws = Collected<Int>()
        async let observer = connection.addObserver(events: ["deep"]) { event in
            if event.rawPayload.count > 100_000 {
                raws.add(event.rawPayload.count)
                return .next
            }
            depths.add(depth(of: event.payload))
            return .complete(event.payload)
        }
        await broker.answer(#"{"observer":"o1","replaced":[]}"#)
        #expect(try await observer.id == "o1")
        async let handler: Void = connection.methodChannel("c").setMethodCallHandler({ call in call.arguments }, method: "echo")
        await broker.answer(#"{"handler":"h1","replaced":null}"#)
        try await handler

        for deep in [deepArray(10_000), deepObject(10_000)] {
            await broker.write(Array(#"{"op":"event","event":1,"observer":"o1","name":"deep","payload":"#.utf8) + deep + Array("}".utf8))
            let answer = try #require(await broker.read())
            #expect(answer["op"] == "complete" && answer["event"] == 1)
            #expect(answer["value"].map { $0.encoded } == deep)
            await broker.write(
                Array(#"{"op":"call","call":2,"handler":"h1","channel":"c","method":"echo","arguments":"#.utf8) + deep
                    + Array(#","from":"c2"}"#.utf8))
            let returned = try #require(await broker.read())
            #expect(returned["op"] == "return" && returned["call"] == 2)
            #expect(returned["result"].map { $0.encoded } == deep)
        }
        #expect(depths.all == [10_000, 10_000])

        let huge = deepArray(520_000)
        await broker.write(Array(#"{"op":"event","event":3,"observer":"o1","name":"deep","payload":"#.utf8) + huge + Array("}".utf8))
        #expect(try #require(await broker.read()) == ["op": "next", "event": 3])
        #expect(raws.all == [huge.count])
        async let ping = connection.request(Op.ping)
        await broker.answer("{}")
        #expect(try await ping == [:])

        // A result as deep comes back as its bytes.
        async let taken = connection.rawRequest(Op.take, ["slot": "deep"])
        let request = try #require(await broker.read())
        await broker.write(Array("{\"op\":\"reply\",\"id\":\(request["id"]!),\"result\":".utf8) + huge + Array("}".utf8))
        #expect(try await taken == huge)
    }

    /// The delays between reconnection attempts: at once, then 10 ms growing by half each
    /// time up to 1 s, each scaled by the jitter (75-100 %).
    @Test func reconnectDelaysFollowTheSchedule() {
        var delays = RetryDelays()
        var steady: [Duration] = []
        for _ in 0..<20 { steady.append(delays.next(jitter: 1)) }
        #expect(steady[0] == .zero)
        #expect(steady[1] == .milliseconds(10))
        for (a, b) in zip(steady.dropFirst(), steady.dropFirst(2)) {
            let grown = min(Duration.seconds(1), a * 1.5)
            #expect(b - grown < .microseconds(2) && grown - b < .microseconds(2), "\(a) then \(b)")
        }
        #expect(steady.last == .seconds(1) && steady.filter { $0 == .seconds(1) }.count > 5)

        var low = RetryDelays()
        let scaled = (0..<20).map { _ in low.next(jitter: 0.75) }
        for (s, full) in zip(scaled, steady) {
            let off = s - full * 0.75
            #expect(off < .microseconds(2) && off > .microseconds(-2), "\(s) against \(full)")
        }
        // Jitters drawn as the default draws them, from a seeded generator.
        var rng = SeededGenerator(seed: 0x7177)
        var random = RetryDelays()
        _ = random.next(jitter: Double.random(in: RetryDelays.jitter, using: &rng))
        for step in 0..<50 {
            let d = random.next(jitter: Double.random(in: RetryDelays.jitter, using: &rng))
            #expect(d >= .microseconds(7_500) && d <= .seconds(1), "seed 0x7177, step \(step): \(d)")
        }
    }
}
