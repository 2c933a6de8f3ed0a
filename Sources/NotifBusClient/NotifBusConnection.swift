// The Swift client's connection to a broker: one socket, one reader thread that decodes
// frames with NotifBusProtocol's BrokerFrameDecoder and routes them (replies to waiting calls,
// events to observers, calls to method handlers), and blocking writes under a lock. Every
// wait is bounded by a deadline that its reply takes out (NotifBusConnection+Deadlines); a
// lost connection fails every pending call at once. User data is never parsed into a tree
// on the reader thread. Everything that changes is one ConnectionSession under one lock,
// read and changed through `withState`; this file and its extensions do the I/O it decides.
import Dispatch
import Glibc
import NotifBusProtocol

/// A connection to a notifbus broker.
///
///     let bus = try await NotifBusConnection.connect(name: "mail-app")
///     let observer = try await bus.addObserver(events: ["willPresent"], priority: 10) { event in
///         .complete(["banner", "sound"])
///     }
///     let result = try await bus.post("willPresent", payload: payload)
public final class NotifBusConnection: @unchecked Sendable {
    /// Answers one event delivered to an observer.
    public typealias ObserverHandler = @Sendable (ObserverEvent) async -> ObserverReply
    typealias Completion = (Result<Answer, NotifBusError>) -> Void

    /// A reply's `result` bytes, and whether the reply was marked `repeat`: the stored
    /// outcome of an earlier request with the same `once` key (§3.8).
    struct Answer {
        let result: RawJSON
        let isRepeat: Bool
    }

    /// A request waiting for its reply, and when it times out; whoever takes the entry out
    /// of `pending` (the reply, the deadline timer, a lost connection) finishes it.
    struct PendingRequest {
        let completion: Completion
        let deadline: DispatchTime
        /// The `timedOut` text it fails with at its deadline.
        let timeoutMessage: String
    }

    /// Sends block at most this long when the broker does not read.
    static let sendTimeoutSeconds = 10

    /// The broker's id for this connection (`"c7"`).
    public var clientID: String { withState { $0.clientID } }
    /// The broker's `server` string.
    public var server: String { withState { $0.server } }
    /// The broker's `--max-frame`: the largest frame it accepts.
    public var maxFrame: Int { withState { $0.maxFrame } }
    /// Default bound for each request's reply.
    public let requestTimeout: Duration
    /// The socket's path and the name sent in `hello`, used again to reconnect.
    let socketPath: String
    let name: String?

    /// Guards `state`. Taken after `writeLock` when both are, never the other way round.
    let lock = Lock()
    /// Everything about the connection that changes, read and changed only in `withState`.
    private var state: ConnectionSession
    /// Held for each whole frame written, so that frames never interleave.
    let writeLock = Lock()
    /// The one timer of every pending request's deadline: it carries out what `state`
    /// decides of the deadlines, and is made, armed and cancelled only inside `withState`
    /// (NotifBusConnection+Deadlines). Nil before the first request and after the end.
    var deadlineTimer: DispatchSourceTimer? = nil
    /// Signalled when the reader thread released the socket for good.
    let readerDone = DispatchSemaphore(value: 0)

    /// Called for every eviction of this connection's observers and handlers.
    public var onEvicted: (@Sendable (Eviction) -> Void)? {
        get { withState { $0.evictionHandler } }
        set { withState { $0.evictionHandler = newValue } }
    }

    /// Called for error frames (`"id": null`), such as a `bad_request` for an invalid answer.
    public var onErrorFrame: (@Sendable (BrokerError) -> Void)? {
        get { withState { $0.errorFrameHandler } }
        set { withState { $0.errorFrameHandler = newValue } }
    }

    init(fd: Int32, requestTimeout: Duration, socketPath: String = "", name: String? = nil) {
        state = ConnectionSession(socket: fd)
        self.requestTimeout = requestTimeout
        self.socketPath = socketPath
        self.name = name
    }

    /// Runs `body` on the state holding `lock` and returns what it returns: the one way to
    /// read or change the state. `body` must not block, nor call anything that takes `lock`.
    @discardableResult
    /// Tasks a change of course woke (`ConnectionSession.woken`) are resumed after the lock
    /// is released.
    func withState<T>(_ body: (inout ConnectionSession) -> T) -> T {
        let (result, woken) = lock.withLock { () -> (T, [CheckedContinuation<Void, Never>]) in
            let result = body(&state)
            return (result, state.woken.isEmpty ? [] : state.takeWoken())
        }
        for waiter in woken { waiter.resume() }
        return result
    }

    /// Connects, resolving the socket path as the protocol's §1 says, and sends `hello`.
    ///
    /// `requestTimeout` bounds the `hello` as it bounds every later request. A broker that
    /// refuses this client (`forbidden`, `too_many_clients`) sends an error frame and
    /// closes; that error is thrown as ``NotifBusError/broker(_:)``.
    ///
    /// `reconnect` says what happens when the connection is lost (a broker restart):
    /// by default the client connects again and makes its observers, handlers and
    /// monitor again when it holds any (PROTOCOL.md §13); `connectionStates()` tells.
    /// With `resendKeyed` (the default), requests in flight that carry a `once` key are
    /// sent again on the new connection, and the client reconnects while it has any; the
    /// broker answers them at most once (PROTOCOL.md §13, decisions 40 and 43).
    public static func connect(
        socket: String? = nil, name: String? = nil,
        requestTimeout: Duration = .seconds(60),
        reconnect: ReconnectPolicy = .whenHoldingRegistrations,
        resendKeyed: Bool = true
    ) async throws(NotifBusError) -> NotifBusConnection {
        let path = SocketPath.resolve(explicit: socket)
        let fd = try openSocket(path)
        let connection = NotifBusConnection(fd: fd, requestTimeout: requestTimeout, socketPath: path, name: name)
        connection.startReader()
        do {
            _ = try await connection.greet()
        } catch {
            connection.close()
            if case .connectionLost = error, let refusal = connection.withState({ $0.lastErrorFrame }) {
                throw .broker(refusal)
            }
            throw error
        }
        connection.withState { $0.configureReconnection(policy: reconnect, resendKeyed: resendKeyed) }
        return connection
    }

    /// Sends `hello` with the connection's name and records the broker's answer.
    func greet(generation: Int? = nil) async throws(NotifBusError) -> JSONValue {
        var fields: [String: JSONValue] = ["protocol": .integer(protocolVersion)]
        if let name { fields["name"] = .string(name) }
        let result = JSONValue(
            validated: try await exchange(Op.hello, fields, bound: requestTimeout, onReply: nil, generation: generation).result)
        withState {
            $0.greeted(
                client: result["client"]?.stringValue ?? "", server: result["server"]?.stringValue ?? "",
                maxFrame: result["maxFrame"]?.intValue.map { Int($0) })
        }
        return result
    }

    static func openSocket(_ path: String) throws(NotifBusError) -> Int32 {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= SocketPath.maxBytes else {
            throw .connectFailed("socket path must be 1 to \(SocketPath.maxBytes) bytes: \(path)")
        }
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .connectFailed("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else {
            let why = String(cString: strerror(errno))
            Glibc.close(fd)
            throw .connectFailed("\(path): \(describeNonSocket(path) ?? why)")
        }
        var tv = timeval(tv_sec: sendTimeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    /// Why `path` cannot be a broker's socket when it exists but is something else.
    static func describeNonSocket(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        switch st.st_mode & S_IFMT {
        case S_IFSOCK: return nil
        case S_IFDIR: return "is a folder, not a socket (give the socket's path inside it)"
        default: return "is not a socket"
        }
    }

    /// Closes the connection. Pending calls fail with `connectionLost`.
    public func close() {
        guard let socket = withState({ $0.closedByClient() }) else { return }
        if socket >= 0 { shutdown(socket, Int32(SHUT_RDWR)) }
        finishStates()
    }

    /// Waits (bounded) until the reader thread has released the socket.
    public func waitUntilClosed(timeout: Duration = .seconds(5)) -> Bool {
        let ms = Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        if readerDone.wait(timeout: .now() + .milliseconds(ms)) == .success {
            readerDone.signal()
            return true
        }
        return false
    }

    /// Suspends until the connection has closed (by ``close()``, by the broker or by a
    /// failure) and the socket is released; returns the reason. Returns at once when it
    /// already has. An observer process can `await` this instead of polling ``isOpen``.
    public func waitForClose() async -> String {
        await withCheckedContinuation { continuation in
            let reason = withState { $0.waitForClose(continuation) }
            if let reason { continuation.resume(returning: reason) }
        }
    }

    /// The end of the connection for good: ends the state sequences, wakes every
    /// ``waitForClose()`` and releases ``close()``'s wait for the socket.
    func finishReading(reason: String) {
        finishStates()
        let waiters = withState { state in
            stopDeadlineTimer()
            return state.ended()
        }
        for waiter in waiters { waiter.resume(returning: reason) }
        readerDone.signal()
    }

    /// Whether the connection still works (false while reconnecting).
    public var isOpen: Bool { withState { $0.isOpen } }

    // MARK: Requests

    /// Sends a request built from `fields` and returns its `result`, or throws its error.
    /// `onReply` runs on the reader thread before any later frame is handled, so that state
    /// a reply creates (an observer's handler) is in place before frames that depend on it.
    /// For a result that may be nested tens of thousands of levels deep, use `rawRequest`.
    public func request(
        _ op: String, _ fields: [String: JSONValue] = [:], timeout: Duration? = nil,
        onReply: (@Sendable (JSONValue) -> Void)? = nil
    ) async throws(NotifBusError) -> JSONValue {
        JSONValue(validated: try await rawRequest(op, fields, timeout: timeout, onReply: onReply))
    }

    /// As `request`, but returns the `result`'s bytes exactly as the broker sent them, of any
    /// depth, with no tree built.
    public func rawRequest(
        _ op: String, _ fields: [String: JSONValue] = [:], timeout: Duration? = nil,
        onReply: (@Sendable (JSONValue) -> Void)? = nil
    ) async throws(NotifBusError) -> RawJSON {
        try await answeredRequest(op, fields, timeout: timeout, onReply: onReply).result
    }

    /// As `request`, with the reply's `repeat` mark: true when the result (or, in a thrown
    /// ``BrokerError``, `isRepeat`) is the stored outcome of an earlier request with the
    /// same `once` key (§3.8).
    public func requestMarkingRepeat(
        _ op: String, _ fields: [String: JSONValue], timeout: Duration? = nil
    ) async throws(NotifBusError) -> (result: JSONValue, isRepeat: Bool) {
        let answer = try await answeredRequest(op, fields, timeout: timeout, onReply: nil)
        return (JSONValue(validated: answer.result), answer.isRepeat)
    }

    /// As `rawRequest`, with the reply's `repeat` mark. A request with a `once` key that
    /// fails because the connection was lost goes out again, with the same fields, once the
    /// connection is back (when `resendKeyed`; within its one `timeout`): the broker applies
    /// it at most once and answers a repeat with the first outcome.
    func answeredRequest(
        _ op: String, _ fields: [String: JSONValue], raw: [(key: String, value: RawJSON)] = [], timeout: Duration?,
        onReply: (@Sendable (JSONValue) -> Void)?
    ) async throws(NotifBusError) -> Answer {
        let bound = timeout ?? requestTimeout
        let clock = ContinuousClock()
        let begin = clock.now
        let keyed = (fields["once"] ?? .null) != .null
        let resend = keyed && withState { $0.keyedRequestStarted() }
        defer { if resend { withState { $0.keyedRequestEnded() } } }
        while true {
            let waited = try await waitWhileReconnecting(op, bound: bound, waitedBefore: clock.now - begin)
            let sentOn = resend ? withState { $0.generation } : 0
            do {
                return try await exchange(op, fields, raw: raw, bound: bound - waited, onReply: onReply, generation: nil)
            } catch .connectionLost(NotifBusConnection.notSent) where withState({ $0.isReconnecting }) {
                // Refused before it was written: the connection is being made again, so wait.
                continue
            } catch .connectionLost(let reason) where resend {
                guard await connectionReplaced(since: sentOn, within: bound - (clock.now - begin)) else {
                    throw .connectionLost(reason)
                }
            }
        }
    }

    /// Why a request was refused before anything of it was written, while the socket is gone.
    static let notSent = "the connection to the broker was lost"

    /// Sends one request on the present socket, or on socket `generation` only, and returns
    /// its result's bytes. `onReply` gets the result as a tree, on the reader thread.
    func exchange(
        _ op: String, _ fields: [String: JSONValue], raw: [(key: String, value: RawJSON)] = [], bound: Duration,
        onReply: (@Sendable (JSONValue) -> Void)?, generation wanted: Int?
    ) async throws(NotifBusError) -> Answer {
        let id = withState { $0.newRequestID() }
        var message = fields
        message["op"] = .string(op)
        message["id"] = .integer(id)
        let frame = NotifBusConnection.frame(.object(message), splicing: raw)
        if let refusal = oversize(frame, op) { throw refusal }
        let result: Result<Answer, NotifBusError> = await withCheckedContinuation { continuation in
            let request = PendingRequest(
                completion: { result in
                    if case .success(let value) = result, let onReply { onReply(JSONValue(validated: value.result)) }
                    continuation.resume(returning: result)
                }, deadline: NotifBusConnection.deadline(after: bound), timeoutMessage: "no reply to '\(op)' within \(bound.readable)")
            let (registered, on) = withState { state -> (String?, Int) in
                if let refusal = state.requestRefusal(on: wanted) { return (refusal, state.generation) }
                register(request, id: id, in: &state)
                return (nil, state.generation)
            }
            if let reason = registered {
                continuation.resume(returning: .failure(.connectionLost(reason)))
                return
            }
            if let error = send(frame, generation: on) {
                complete(id, .failure(error))
            }
        }
        return try result.get()
    }

    /// Finishes request `id` with `result`, once: a reply or a failure, unless its deadline
    /// came first. Taking it out of `pending` takes out its deadline, so nothing fires for it.
    func complete(_ id: Int64, _ result: Result<Answer, NotifBusError>) {
        let entry = withState { $0.takeRequest(id) }
        entry?.completion(result)
    }

    /// A length-prefixed frame of `message`, written without recursion (user data in it may be
    /// deep), with each member of `raw` appended as its bytes: user data forwarded as it came,
    /// never re-encoded (a number keeps its text).
    static func frame(_ message: JSONValue, splicing raw: [(key: String, value: RawJSON)] = []) -> [UInt8] {
        var body = message.messageEncoded
        if !raw.isEmpty, body.last == UInt8(ascii: "}") {
            body.removeLast()
            for (key, value) in raw {
                body.append(UInt8(ascii: ","))
                body += JSONValue.string(key).encoded
                body.append(UInt8(ascii: ":"))
                body += value
            }
            body.append(UInt8(ascii: "}"))
        }
        return FrameHeader.encode(length: body.count) + body
    }

    /// The error a frame above the broker's `maxFrame` fails with, before anything of it is
    /// sent: the broker would answer `frame_too_large` and close the connection, failing
    /// every other request on it (PROTOCOL.md decision 44). Nil when the frame fits.
    func oversize(_ frame: [UInt8], _ op: String) -> NotifBusError? {
        let limit = withState { $0.maxFrame }
        guard frame.count - 4 > limit else { return nil }
        return .invalidArgument(
            "\(op) frame of \(frame.count - 4) bytes exceeds the broker's maxFrame \(limit); it was not sent")
    }

    /// Writes a whole frame; nil on success. With `generation`, only on that socket.
    func send(_ frame: [UInt8], generation wanted: Int? = nil) -> NotifBusError? {
        writeLock.lock()
        defer { writeLock.unlock() }
        let fd: Int32
        switch withState({ $0.socket(for: wanted) }) {
        case .success(let socket): fd = socket
        case .failure(let error): return error
        }
        var offset = 0
        while offset < frame.count {
            let n = frame.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                offset += n
                continue
            }
            if n < 0 && errno == EINTR { continue }
            let why =
                n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
                ? "the broker did not read for \(NotifBusConnection.sendTimeoutSeconds) s"
                : String(cString: strerror(errno))
            shutdown(fd, Int32(SHUT_RDWR))
            return .connectionLost(why)
        }
        return nil
    }

    /// Sends a message that expects no reply (answers, returns), on socket `generation` only.
    /// One above the broker's `maxFrame` is not sent: `instead` is sent in its place.
    func sendMessage(generation: Int? = nil, _ message: JSONValue, instead: (String) -> JSONValue) {
        let frame = NotifBusConnection.frame(message)
        if let refusal = oversize(frame, message["op"]?.stringValue ?? "message") {
            _ = send(NotifBusConnection.frame(instead("\(refusal)")), generation: generation)
            return
        }
        _ = send(frame, generation: generation)
    }

    /// Sends a message that expects no reply and always fits `maxFrame` (`next`, `stop`, a
    /// bare error return), on socket `generation` only.
    func sendMessage(generation: Int? = nil, _ message: JSONValue) {
        _ = send(NotifBusConnection.frame(message), generation: generation)
    }

    // MARK: Reading

    func startReader() {
        let (socket, current) = withState { ($0.socket, $0.generation) }
        if !DetachedThread.start({ [self] in readLoop(fd: socket, generation: current) }) {
            // Without a reader nothing can be answered: fail like a lost connection.
            withState { $0.readerCouldNotStart() }
            shutdown(socket, Int32(SHUT_RDWR))
        }
    }

    func readLoop(fd: Int32, generation readerGeneration: Int) {
        var decoder = BrokerFrameDecoder()
        var buffer = [UInt8](repeating: 0, count: 65536)
        var reason = "the broker closed the connection"
        reading: while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                if n < 0 { reason = String(cString: strerror(errno)) }
                break
            }
            decoder.append(buffer[0..<n])
            while true {
                let frame: BrokerFrame?
                do { frame = try decoder.next() } catch {
                    // The stream cannot be trusted past a frame that is not protocol v1 (PROTOCOL.md §13).
                    reason = "the broker sent \(error)"
                    break reading
                }
                guard let frame else { break }
                dispatch(frame, generation: readerGeneration)
            }
        }
        guard let (callbacks, finalReason, next) = withState({ $0.readerEnded(socket: fd, generation: readerGeneration, reason: reason) })
        else {
            // A socket given up on while reconnecting: a newer one carries everything.
            Glibc.close(fd)
            return
        }
        for entry in callbacks { entry.completion(.failure(.connectionLost(finalReason))) }
        Glibc.close(fd)
        switch next {
        case .finish:
            finishReading(reason: finalReason)
        case .reconnect:
            publish(.disconnected(reason: finalReason))
            Task.detached { [self] in await reconnectLoop() }
        case .keepTrying:
            break
        }
    }

    func dispatch(_ frame: BrokerFrame, generation: Int = 0) {
        switch frame {
        case .reply(let reply):
            switch (reply.id, reply.outcome) {
            case (.integer(let id)?, .result(let result)):
                complete(id, .success(Answer(result: result, isRepeat: reply.isRepeat)))
            case (.integer(let id)?, .error(let failure)):
                var error = BrokerError(failure)
                error.isRepeat = reply.isRepeat
                complete(id, .failure(.broker(error)))
            case (nil, .error(let failure)):
                let error = BrokerError(failure)
                let handler = withState { $0.errorFrameArrived(error) }
                handler?(error)
            case (.string?, _), (nil, .result):
                break  // this client sends integer ids only, and the decoder gives a result an id
            }
        case .event(let event):
            deliverEvent(event, generation: generation)
        case .call(let call):
            deliverCall(call, generation: generation)
        case .evicted(let evicted):
            let eviction: Eviction
            switch evicted {
            case .observer(let o, let by): eviction = .observer(o, by: by)
            case .handler(let h, let by): eviction = .handler(h, by: by)
            }
            let (general, specific) = withState { $0.evicted(eviction) }
            specific?(eviction)
            general?(eviction)
        case .seen(let seen):
            guard let handler = withState({ $0.monitorHandler }) else { return }
            handler(SeenFrame(direction: seen.direction.rawValue, client: seen.client, rawFrame: seen.frame))
        }
    }
}

extension NotifBusConnection {
    // Views of `state` for white-box tests, which read them holding `lock`
    // (`lock.withLock { pending.count }`); the connection itself reads `state` in `withState`.

    /// The requests waiting for their replies.
    var pending: [Int64: PendingRequest] { state.pending }
    /// The deadline the timer is armed for.
    var armedDeadline: DispatchTime? { state.armedDeadline }
    /// How often the timer was armed.
    var timerArmings: Int { state.timerArmings }
}

extension BrokerError {
    /// The error of a reply, its `details` as a tree.
    init(_ failure: BrokerFrame.Failure) {
        self.init(code: failure.code, message: failure.message, details: failure.details.map { JSONValue(validated: $0) })
    }
}
