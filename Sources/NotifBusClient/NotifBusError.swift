// Errors the Swift client throws: the broker's error replies, a lost connection, timeouts
// and misuse of the API. Protocol errors from the broker keep their wire code.
import NotifBusProtocol

/// An error reply from the broker, or from a method-channel handler behind it.
public struct BrokerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The wire code, such as `not_found` or a handler's own code.
    public let code: String
    /// What went wrong, for a person.
    public let message: String
    /// `nil` when the error carried no `details`; `.null` when it carried `null`.
    public let details: JSONValue?
    /// The reply was marked `repeat`: this is the stored outcome of an earlier request with
    /// the same `once` key (`interrupted` always is).
    public var isRepeat = false

    /// An error to throw from a method handler, or one the broker sent.
    public init(code: String, message: String, details: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.details = details
    }

    /// `CODE: MESSAGE`, as the CLI prints it.
    public var description: String { "\(code): \(message)" }
}

/// Everything a client call can throw.
public enum NotifBusError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The broker (or a handler) answered with an error.
    case broker(BrokerError)
    /// The connection closed or failed; every pending call fails with this.
    case connectionLost(String)
    /// No reply came within the allotted time.
    case timedOut(String)
    /// The socket could not be reached.
    case connectFailed(String)
    /// The broker sent something this client cannot read.
    case protocolViolation(String)
    /// The call was not valid to make (for example a name too long).
    case invalidArgument(String)

    /// One line for a person: what failed and why.
    public var description: String {
        switch self {
        case .broker(let e): return e.description
        case .connectionLost(let why): return "connection lost: \(why)"
        case .timedOut(let what): return "timed out: \(what)"
        case .connectFailed(let why): return "cannot connect: \(why)"
        case .protocolViolation(let why): return "protocol violation: \(why)"
        case .invalidArgument(let why): return "invalid argument: \(why)"
        }
    }

    /// The wire code when the broker answered with an error.
    public var code: String? {
        if case .broker(let e) = self { return e.code }
        return nil
    }
}
