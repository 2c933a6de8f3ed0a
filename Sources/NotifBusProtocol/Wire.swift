// Every wire name of protocol v1 — ops, error codes, limits — written once, here (the
// field names of frames live in their decoder and in the one encoder, OutboundFrame).
// Other modules refer to these; nothing derives a wire name from a Swift identifier.

/// The protocol version this implementation speaks.
public let protocolVersion: Int64 = 1

/// Error codes of §4. Handlers may return other codes; those travel as raw bytes.
public enum ErrorCode: String, Sendable, CaseIterable {
    case helloRequired = "hello_required"
    case unsupportedProtocol = "unsupported_protocol"
    case badJSON = "bad_json"
    case badRequest = "bad_request"
    case unknownOp = "unknown_op"
    case frameTooLarge = "frame_too_large"
    case forbidden = "forbidden"
    case tooManyClients = "too_many_clients"
    case notFound = "not_found"
    case queueFull = "queue_full"
    case notImplemented = "not_implemented"
    case handlerGone = "handler_gone"
    case timeout = "timeout"
    case invalidPayload = "invalid_payload"
    case invalidAction = "invalid_action"
    case shuttingDown = "shutting_down"
    /// A request's idempotency key (`once`) is held by a request of another op, target or
    /// body: nothing is applied (§3.8).
    case onceConflict = "once_conflict"
    /// A repeat of a keyed post whose chain was cut when the broker stopped (§3.8).
    case interrupted = "interrupted"
    /// Not in the contract's list: a write to `--state-dir` failed (disk full, I/O error),
    /// so the `put` or `setCategories` it would have acknowledged is refused.
    case storageFailed = "storage_failed"
    /// Not in the contract's list: the buffers across all connections passed
    /// `--max-buffered-bytes` and this connection held the most, so it is closed.
    case overloaded = "overloaded"
    /// Not in the contract's list: a `subscribe` or `handle` marked `resume` found its key
    /// or route held by a live registration, which it leaves alone (PROTOCOL.md §13).
    case superseded = "superseded"

    /// Whether the broker closes the connection after sending this error (§3). The one
    /// place this is decided: the core closes after exactly these codes.
    public var closesConnection: Bool {
        switch self {
        case .helloRequired, .unsupportedProtocol, .frameTooLarge, .forbidden, .tooManyClients, .overloaded: return true
        default: return false
        }
    }
}

/// The `op` values of protocol v1.
public enum Op {
    public static let hello = "hello"
    public static let ping = "ping"
    public static let subscribe = "subscribe"
    public static let unsubscribe = "unsubscribe"
    public static let post = "post"
    public static let handle = "handle"
    public static let unhandle = "unhandle"
    public static let invoke = "invoke"
    public static let put = "put"
    public static let take = "take"
    public static let peek = "peek"
    public static let setCategories = "setCategories"
    public static let getCategories = "getCategories"
    public static let status = "status"
    public static let monitor = "monitor"
    // Answers, from an observer or a handler, carrying no id.
    public static let next = "next"
    public static let complete = "complete"
    public static let stop = "stop"
    public static let `return` = "return"
    // Broker to client.
    public static let reply = "reply"
    public static let event = "event"
    public static let evicted = "evicted"
    public static let call = "call"
    public static let seen = "seen"
}

/// Limits fixed by the protocol, and the defaults of the broker's flags.
public enum Limits {
    /// Names (events, channels, methods, slots, keys, identifiers): 1 to 256 bytes.
    public static let maxNameBytes = 256
    /// String ids: 1 to 256 bytes.
    public static let maxStringIDBytes = 256
    /// Integer ids stay exact in a double: below 2^53.
    public static let maxIntegerID: Int64 = 1 << 53
    /// `subscribe` names 1 to 64 distinct events.
    public static let maxEventsPerSubscription = 64
    /// Observers one connection may hold.
    public static let maxObserversPerConnection = 1024
    /// Handlers one connection may hold; mirrors the observer limit.
    public static let maxHandlersPerConnection = 1024
    /// `take` waits at most ten minutes.
    public static let maxTakeWaitMs: Int64 = 600_000
    /// Default `--max-frame`: 1 MiB.
    public static let defaultMaxFrame = 1_048_576
    /// Default `--max-queue`.
    public static let defaultMaxQueue = 10_000
    /// Default `--max-clients`.
    public static let defaultMaxClients = 1024
    /// Default `--hop-timeout` and `--call-timeout`: 30 s, in milliseconds.
    public static let defaultHopTimeoutMs: Int64 = 30_000
    public static let defaultCallTimeoutMs: Int64 = 30_000
    /// Default priority of an observer.
    public static let defaultPriority: Int32 = 100
    /// The 4-byte length prefix.
    public static let headerBytes = 4
    /// Default `--once-keys`: idempotency keys remembered at most.
    public static let defaultOnceKeys = 100_000
    /// Default `--once-age`: 24 hours, in milliseconds, of wall-clock time.
    public static let defaultOnceAgeMs: Int64 = 86_400_000
    /// Default `--once-bytes`: bytes of remembered keys and outcomes, 64 MiB.
    public static let defaultOnceBytes = 64 << 20
}

/// The id a client gave a request, echoed in its reply.
public enum RequestID: Sendable, Hashable {
    case integer(Int64)
    /// The id's JSON text between its quotes, escapes kept as written, so that the echo is
    /// byte for byte what the client sent.
    case string(String)
}

extension FrameBuilder {
    /// Writes an id, or `null`.
    public mutating func requestID(_ id: RequestID?) {
        guard let id else { return literal("null") }
        reserving(FrameRoom.of { $0.requestID(id) }) { $0.requestID(id) }
    }
}

extension FrameWriter {
    /// Writes an id.
    @inline(__always)
    mutating func requestID(_ id: RequestID) {
        switch id {
        case .integer(let i): int(i)
        case .string(let s):
            byte(UInt8(ascii: "\""))
            rawText(s)
            byte(UInt8(ascii: "\""))
        }
    }
}
