// The Swift client's connection to a broker: one socket, one reader thread that decodes
// frames with NotifBusProtocol's BrokerFrameDecoder and routes them (replies to waiting calls,
// events to observers, calls to method handlers), and blocking writes under a lock. Every
// wait is bounded by a deadline that its reply takes out (NotifBusConnection+Deadlines); a
// lost connection fails every pending call at once. User data is never parsed into a tree
// on the reader thread.
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
    public private(set) var clientID = ""
    /// The broker's `server` string.
    public private(set) var server = ""
    /// The broker's `--max-frame`: the largest frame it accepts.
    public private(set) var maxFrame = Limits.defaultMaxFrame
    /// Default bound for each request's reply.
    public let requestTimeout: Duration

    /// The present socket; replaced when the client reconnects (-1 while it has none).
    var fd: Int32
    /// Counts the sockets this connection has had; frames of an older one never go out on a newer one.
    var generation = 0
    /// Reconnection state: the application's registrations in order, and the policy.
    let resumption: Resumption
    let lock = Lock()
    let writeLock = Lock()
    var nextRequestID: Int64 = 1
    var pending: [Int64: PendingRequest] = [:]
    /// The one timer of every pending request's deadline, and the deadline it is armed for.
    var deadlineTimer: DispatchSourceTimer? = nil
    var armedDeadline: DispatchTime? = nil
    /// How often the timer was armed; tests check that replies cost it nothing.
    var timerArmings = 0
    var observerHandlers: [String: ObserverHandler] = [:]
    var observerEvictionHandlers: [String: @Sendable (Eviction) -> Void] = [:]
    var callHandlers: [String: MethodChannel.Handler] = [:]
    /// (channel, method) to this connection's handler id for it.
    var channelRegistrations: [String: String] = [:]
    var monitorHandler: (@Sendable (SeenFrame) -> Void)? = nil
    var closedReason: String? = nil
    var evictionHandler: (@Sendable (Eviction) -> Void)? = nil
    var errorFrameHandler: (@Sendable (BrokerError) -> Void)? = nil
    /// The last error frame (`"id": null`), kept to explain a refusal before `hello`.
    var lastErrorFrame: BrokerError? = nil
    /// Tasks waiting in `waitForClose()`, resumed with the reason once the reader ends.
    var closeWaiters: [CheckedContinuation<String, Never>] = []
    var readerFinished = false
    let readerDone = DispatchSemaphore(value: 0)

    /// Called for every eviction of this connection's observers and handlers.
    public var onEvicted: (@Sendable (Eviction) -> Void)? {
        get { lock.withLock { evictionHandler } }
        set { lock.withLock { evictionHandler = newValue } }
    }

    /// Called for error frames (`"id": null`), such as a `bad_request` for an invalid answer.
    public var onErrorFrame: (@Sendable (BrokerError) -> Void)? {
        get { lock.withLock { errorFrameHandler } }
        set { lock.withLock { errorFrameHandler = newValue } }
    }

    init(fd: Int32, requestTimeout: Duration, resumption: Resumption = Resumption(path: "", name: nil, policy: .never)) {
        self.fd = fd
        self.requestTimeout = requestTimeout
        self.resumption = resumption
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
        let connection = NotifBusConnection(
            fd: fd, requestTimeout: requestTimeout,
            resumption: Resumption(path: path, name: name, policy: .never))
        connection.startReader()
        do {
            _ = try await connection.greet()
        } catch {
            connection.close()
            if case .connectionLost = error, let refusal = connection.lock.withLock({ connection.lastErrorFrame }) {
                throw .broker(refusal)
            }
            throw error
        }
        connection.lock.withLock {
            connection.resumption.policy = reconnect
            connection.resumption.resendKeyed = resendKeyed
        }
        return connection
    }

    /// Sends `hello` with the connection's name and records the broker's answer.
    func greet(generation: Int? = nil) async throws(NotifBusError) -> JSONValue {
        var fields: [String: JSONValue] = ["protocol": .integer(protocolVersion)]
        if let name = resumption.name { fields["name"] = .string(name) }
        let result = JSONValue(
            validated: try await exchange(Op.hello, fields, bound: requestTimeout, onReply: nil, generation: generation).result)
        lock.withLock {
            clientID = result["client"]?.stringValue ?? ""
            server = result["server"]?.stringValue ?? ""
            if let m = result["maxFrame"]?.intValue { maxFrame = Int(m) }
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
        let (first, socket) = lock.withLock { () -> (Bool, Int32) in
            if closedReason == nil { closedReason = "closed by this client"; return (true, fd) }
            return (false, fd)
        }
        if first && socket >= 0 { shutdown(socket, Int32(SHUT_RDWR)) }
        if first { finishStates() }
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
            let reason = lock.withLock { () -> String? in
                if readerFinished { return closedReason ?? "closed" }
                closeWaiters.append(continuation)
                return nil
            }
            if let reason { continuation.resume(returning: reason) }
        }
    }

    /// The end of the connection for good: ends the state sequences, wakes every
    /// ``waitForClose()`` and releases ``close()``'s wait for the socket.
    func finishReading(reason: String) {
        finishStates()
        let waiters = lock.withLock { () -> [CheckedContinuation<String, Never>] in
            readerFinished = true
            stopDeadlines()
            defer { closeWaiters.removeAll() }
            return closeWaiters
        }
        for waiter in waiters { waiter.resume(returning: reason) }
        readerDone.signal()
    }

    /// Whether the connection still works (false while reconnecting).
    public var isOpen: Bool { lock.withLock { closedReason == nil && !resumption.reconnecting } }

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
        let resend =
            keyed
            && lock.withLock { () -> Bool in
                if resumption.resendKeyed { resumption.keyedInFlight += 1 }
                return resumption.resendKeyed
            }
        defer { if resend { lock.withLock { resumption.keyedInFlight -= 1 } } }
        while true {
            let waited = try await waitWhileReconnecting(op, bound: bound, waitedBefore: clock.now - begin)
            let sentOn = resend ? lock.withLock { generation } : 0
            do {
                return try await exchange(op, fields, raw: raw, bound: bound - waited, onReply: onReply, generation: nil)
            } catch .connectionLost(NotifBusConnection.notSent) where lock.withLock({ resumption.reconnecting }) {
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
        let id = lock.withLock { () -> Int64 in
            defer { nextRequestID += 1 }
            return nextRequestID
        }
        var message = fields
        message["op"] = .string(op)
        message["id"] = .integer(id)
        let frame = NotifBusConnection.frame(.object(message), splicing: raw)
        if let refusal = oversize(frame, op) { throw refusal }
        let result: Result<Answer, NotifBusError> = await withCheckedContinuation { continuation in
            let (registered, on) = lock.withLock { () -> (String?, Int) in
                if let reason = closedReason { return (reason, generation) }
                if let wanted, wanted != generation { return ("the connection was replaced", generation) }
                if fd < 0 { return (NotifBusConnection.notSent, generation) }
                registerPending(
                    id, deadline: NotifBusConnection.deadline(after: bound),
                    timeoutMessage: "no reply to '\(op)' within \(bound.readable)"
                ) { result in
                    if case .success(let value) = result, let onReply { onReply(JSONValue(validated: value.result)) }
                    continuation.resume(returning: result)
                }
                return (nil, generation)
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
        let entry = lock.withLock { pending.removeValue(forKey: id) }
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
        let limit = lock.withLock { maxFrame }
        guard frame.count - 4 > limit else { return nil }
        return .invalidArgument(
            "\(op) frame of \(frame.count - 4) bytes exceeds the broker's maxFrame \(limit); it was not sent")
    }

    /// Writes a whole frame; nil on success. With `generation`, only on that socket.
    func send(_ frame: [UInt8], generation wanted: Int? = nil) -> NotifBusError? {
        writeLock.lock()
        defer { writeLock.unlock() }
        let (fd, current) = lock.withLock { (self.fd, self.generation) }
        if let wanted, wanted != current { return .connectionLost("the connection was replaced") }
        if fd < 0 { return .connectionLost("the connection to the broker was lost") }
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
        let (socket, current) = lock.withLock { (fd, generation) }
        if !DetachedThread.start({ [self] in readLoop(fd: socket, generation: current) }) {
            // Without a reader nothing can be answered: fail like a lost connection.
            lock.withLock { closedReason = "cannot start the reader thread" }
            shutdown(fd, Int32(SHUT_RDWR))
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
        let stale = lock.withLock { readerGeneration != generation }
        if stale {
            // A socket given up on while reconnecting: a newer one carries everything now.
            Glibc.close(fd)
            return
        }
        let (callbacks, finalReason, next) = lock.withLock { () -> ([PendingRequest], String, Resumption.Next) in
            let next = resumption.decide(closed: closedReason != nil, live: Set(observerHandlers.keys).union(callHandlers.keys))
            if next == .finish && closedReason == nil { closedReason = reason }
            if next != .finish && self.fd == fd { self.fd = -1 }
            let all = Array(pending.values)
            pending.removeAll()
            observerHandlers.removeAll()
            observerEvictionHandlers.removeAll()
            callHandlers.removeAll()
            channelRegistrations.removeAll()
            return (all, closedReason ?? reason, next)
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
                let handler = lock.withLock { () -> (@Sendable (BrokerError) -> Void)? in
                    lastErrorFrame = error
                    return errorFrameHandler
                }
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
            let (general, specific) = lock.withLock { () -> ((@Sendable (Eviction) -> Void)?, (@Sendable (Eviction) -> Void)?) in
                switch eviction {
                case .observer(let o, _):
                    observerHandlers[o] = nil
                    return (evictionHandler, observerEvictionHandlers.removeValue(forKey: o))
                case .handler(let h, _):
                    callHandlers[h] = nil
                    return (evictionHandler, nil)
                }
            }
            specific?(eviction)
            general?(eviction)
        case .seen(let seen):
            guard let handler = lock.withLock({ monitorHandler }) else { return }
            handler(SeenFrame(direction: seen.direction.rawValue, client: seen.client, rawFrame: seen.frame))
        }
    }
}

extension BrokerError {
    /// The error of a reply, its `details` as a tree.
    init(_ failure: BrokerFrame.Failure) {
        self.init(code: failure.code, message: failure.message, details: failure.details.map { JSONValue(validated: $0) })
    }
}
