// The rule for a `didReceive` whose post failed: post it again, or log it and let it go.
// A response exists only in the bridge, so it is dropped only when posting it again could
// hand it out twice. Pure: it reads the client's error and nothing else.
import NotifBusClient
import NotifBusProtocol

/// What the bridge does with a `didReceive` whose post did not succeed.
public enum FailedPost: Equatable, Sendable {
    /// Nothing handled it: the broker answered `shutting_down` (a graceful stop), or the
    /// post never left the bridge. It is posted again, first, once the broker is back.
    case postAgain
    /// The broker answered with another error (such as `invalid_action`): it will not take
    /// this response at all, so it is logged and not posted again.
    case refused
    /// It was sent and no answer came (the broker was killed, or did not answer in time):
    /// an observer may well have handled it, so it is logged and not posted again, as the
    /// clients never send a post again (PROTOCOL.md §13, decision 40).
    case outcomeUnknown

    /// The rule for the error a post threw.
    public init(_ error: NotifBusError) {
        switch error {
        case .broker(let e) where e.code == ErrorCode.shuttingDown.rawValue: self = .postAgain
        case .broker, .invalidArgument: self = .refused
        case .connectFailed: self = .postAgain
        case .connectionLost, .timedOut, .protocolViolation: self = .outcomeUnknown
        }
    }
}
