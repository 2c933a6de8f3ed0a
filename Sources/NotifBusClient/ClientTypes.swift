// Values the Swift client hands to and receives from its users: observer events and
// replies, post results, evictions, broker status.
import NotifBusProtocol

/// An event delivered to an observer: one hop of a chain.
public struct ObserverEvent: Sendable {
    /// The broker's event id.
    public let event: Int64
    /// The observer this hop is for (`"o4"`).
    public let observer: String
    public let name: String
    public let payload: JSONValue
}

/// What an observer answers: pass it on, handle it with a value, or end the chain.
public enum ObserverReply: Sendable, Equatable {
    case next
    case complete(JSONValue?)
    case stop
}

/// A registered observer.
public struct ObserverRegistration: Sendable, Equatable {
    /// The broker's id for it (`"o4"`).
    public let id: String
    /// Observers removed because they held the same unique key.
    public let replaced: [String]
}

/// Someone took over an observer's key or a handler's channel and method.
public enum Eviction: Sendable, Equatable {
    case observer(String, by: String)
    case handler(String, by: String)
}

/// How an event ended.
public enum PostOutcome: String, Sendable {
    case completed, stopped, unhandled
}

/// One hop of a finished event.
public struct TraceEntry: Sendable, Equatable {
    public let observer: String
    /// `next`, `complete`, `stop`, `gone`, `timeout`, `invalid`, or `skipped` (not sent the
    /// event: its connection's hops in this event had already taken a hop timeout).
    public let reply: String

    public init(observer: String, reply: String) {
        self.observer = observer
        self.reply = reply
    }
}

/// The result of `post`.
public struct PostResult: Sendable {
    public let event: Int64
    public let outcome: PostOutcome
    /// The observer that completed or stopped the event.
    public let by: String?
    /// The value of `complete`, else null.
    public let value: JSONValue
    /// `"launch"` when the payload was kept for an app that is not running.
    public let retained: String?
    public let trace: [TraceEntry]
    /// The reply as received.
    public let raw: JSONValue

    init(_ json: JSONValue) throws(NotifBusError) {
        guard let event = json["event"]?.intValue,
              let outcome = json["outcome"]?.stringValue.flatMap(PostOutcome.init(rawValue:)),
              let trace = json["trace"]?.arrayValue
        else { throw .protocolViolation("malformed post result: \(json)") }
        self.event = event
        self.outcome = outcome
        by = json["by"]?.stringValue
        value = json["value"] ?? .null
        retained = json["retained"]?.stringValue
        self.trace = trace.map { TraceEntry(observer: $0["observer"]?.stringValue ?? "", reply: $0["reply"]?.stringValue ?? "") }
        raw = json
    }
}

/// A frame the broker exchanged with another connection, seen by a monitor.
public struct SeenFrame: Sendable {
    /// `"in"` (read by the broker) or `"out"` (written by it).
    public let direction: String
    public let client: String
    public let frame: JSONValue
}
