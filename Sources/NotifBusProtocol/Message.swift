// The typed messages a client sends to the broker, as the decoder produces them.
// User data stays as raw JSON bytes (`RawJSON`) so that the broker forwards it unchanged.

/// Validated JSON bytes of one value, kept exactly as the peer wrote them.
public typealias RawJSON = [UInt8]

/// A request: it carries an id and gets exactly one reply.
public enum Request: Sendable {
    case hello(protocolVersion: Int64, name: String?)
    case ping
    /// `resume` marks a registration a client makes again after reconnecting: it yields
    /// to a live holder of its key instead of evicting it (PROTOCOL.md §13).
    case subscribe(events: [String], priority: Int32, key: String?, resume: Bool)
    case unsubscribe(UnsubscribeTarget)
    /// `payload` nil means absent (delivered as null). `profile` is set for the three
    /// notification-profile event names, whose payload has been checked.
    case post(name: String, payload: RawJSON?, profile: ProfilePayload?)
    /// `resume` as for `subscribe`: a taken route is left to its holder.
    case handle(channel: String, method: String?, resume: Bool)
    case unhandle(handler: String)
    case invoke(channel: String, method: String, arguments: RawJSON?)
    /// `value` nil means the request's value was null: empty the slot.
    case put(slot: String, value: RawJSON?)
    case take(slot: String, waitMs: Int64?)
    case peek(slot: String)
    case setCategories(CategorySet)
    case getCategories
    case status
    case monitor
}

public enum UnsubscribeTarget: Sendable, Equatable {
    case observer(String)
    case key(String)
}

/// An observer's answer to an `event`.
public enum Answer: Sendable {
    case next(event: Int64)
    /// `value` nil means absent.
    case complete(event: Int64, value: RawJSON?)
    case stop(event: Int64)

    public var event: Int64 {
        switch self {
        case .next(let e), .complete(let e, _), .stop(let e): return e
        }
    }
}

/// A handler's `return` for a `call`.
public struct CallReturn: Sendable {
    public enum Body: Sendable {
        case result(RawJSON)
        /// The whole error object, validated, forwarded as written.
        case error(RawJSON)
    }

    public let call: Int64
    public let body: Body
}

/// One decoded frame.
public enum Inbound: Sendable {
    case request(id: RequestID, Request)
    case answer(Answer)
    case callReturn(CallReturn)
}

/// Why a frame that is valid JSON cannot be acted on.
public struct Rejection: Error, Sendable, Equatable {
    /// The request's id when it was usable; nil for answers and unusable ids.
    public let id: RequestID?
    public let code: ErrorCode
    public let message: String

    public init(id: RequestID?, code: ErrorCode, message: String) {
        self.id = id
        self.code = code
        self.message = message
    }
}

/// The outcome of decoding one frame body.
public enum DecodeResult: Sendable {
    /// Not UTF-8 JSON, or not an object.
    case badJSON(String)
    /// `op` is "hello"; needed before greeting, when anything else is refused.
    case decoded(Inbound, isHello: Bool)
    case rejected(Rejection, isHello: Bool)
}
