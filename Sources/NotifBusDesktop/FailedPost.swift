// The rule for a `didReceive` whose post failed: post it again, or log it and let it go.
// Every click is posted with a `once` key of its own (PROTOCOL.md §13, decision 43), so
// sending it again can never hand it out twice to a broker that still holds the key: such a
// broker answers with the first outcome instead of running the chain again. Pure: it reads
// the client's error and nothing else.
import NotifBusClient
import NotifBusProtocol

/// What the bridge does with a `didReceive` whose post did not succeed.
public enum FailedPost: Equatable, Sendable {
    /// The broker did not run it (`shutting_down`), the post never left the bridge, or its
    /// answer was lost (the connection, a timeout): it is posted again with the same key,
    /// first, once the broker is back.
    case postAgain
    /// The broker could not take it now (`queue_full`, `storage_failed`): it is posted again
    /// with the same key after a pause that grows with each try.
    case retryLater
    /// The broker answered with another error (such as `invalid_action`): it will not take
    /// this response at all, so it is logged and not posted again.
    case refused
    /// The broker had started its chain when it stopped (`interrupted`): the observers
    /// before the cut saw it, and it never runs again; logged, not posted again.
    case interrupted

    /// The rule for the error a post threw.
    public init(_ error: NotifBusError) {
        switch error {
        case .broker(let e) where e.code == ErrorCode.shuttingDown.rawValue: self = .postAgain
        case .broker(let e) where e.code == ErrorCode.interrupted.rawValue: self = .interrupted
        case .broker(let e) where e.code == ErrorCode.queueFull.rawValue || e.code == ErrorCode.storageFailed.rawValue:
            self = .retryLater
        case .broker, .invalidArgument: self = .refused
        case .connectFailed, .connectionLost, .timedOut, .protocolViolation: self = .postAgain
        }
    }
}
