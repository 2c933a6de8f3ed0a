// Values the Swift client hands to and receives from its users: observer events and
// replies, post results, evictions, monitored frames. User data they carry is kept as the
// broker's bytes, of any depth, and becomes a JSONValue tree only when it is read.
import NotifBusProtocol

/// An event delivered to an observer: one hop of a chain.
public struct ObserverEvent: Sendable {
    /// The broker's event id.
    public let event: Int64
    /// The observer this hop is for (`"o4"`).
    public let observer: String
    /// The event's name, as posted (`"willPresent"`).
    public let name: String
    /// The poster's payload as the broker forwarded it, byte for byte, however deeply nested.
    public let rawPayload: RawJSON

    /// The poster's payload; `.null` when it sent none. Built from `rawPayload` on each read,
    /// at any depth (`JSONValue(parsingAnyDepth:)`); `rawPayload` is cheaper to pass on.
    public var payload: JSONValue { JSONValue(validated: rawPayload) }
}

/// What an observer answers: pass it on, handle it with a value, or end the chain.
public enum ObserverReply: Sendable, Equatable {
    /// Not this observer's: the next observer in the chain gets the event.
    case next
    /// Handled: the chain ends `completed`, with this value for the poster (`nil`: none).
    case complete(JSONValue?)
    /// End the chain unhandled: later observers do not see the event.
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
    /// This connection's observer (id) lost its unique key to the observer `by`.
    case observer(String, by: String)
    /// This connection's handler (id) was replaced by the handler `by`.
    case handler(String, by: String)
}

/// How an event ended.
public enum PostOutcome: String, Sendable {
    /// An observer answered `complete`.
    case completed
    /// An observer answered `stop`.
    case stopped
    /// Every observer passed it on, or there was none.
    case unhandled
}

/// One hop of a finished event.
public struct TraceEntry: Sendable, Equatable {
    /// The observer asked in this hop (`"o4"`).
    public let observer: String
    /// `next`, `complete`, `stop`, `gone`, `timeout`, `invalid`, or `skipped` (not sent the
    /// event: its connection's hops in this event had already taken a hop timeout).
    public let reply: String

    /// A hop as the broker reports it.
    public init(observer: String, reply: String) {
        self.observer = observer
        self.reply = reply
    }
}

/// The result of `post`.
public struct PostResult: Sendable {
    /// The broker's id for the event.
    public let event: Int64
    /// How the chain ended.
    public let outcome: PostOutcome
    /// The observer that completed or stopped the event.
    public let by: String?
    /// The value of `complete`, else null.
    public let value: JSONValue
    /// `"launch"` when the payload was kept for an app that is not running.
    public let retained: String?
    /// Every hop in chain order: who was asked and how it answered.
    public let trace: [TraceEntry]
    /// The result of an earlier post with the same `once` key, not of a new event.
    public let isRepeat: Bool
    /// The reply's `result` as received.
    public let raw: JSONValue

    init(_ json: JSONValue, isRepeat: Bool = false) throws(NotifBusError) {
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
        self.isRepeat = isRepeat
        raw = json
    }
}

/// A frame the broker exchanged with another connection, seen by a monitor.
public struct SeenFrame: Sendable {
    /// `"in"` (read by the broker) or `"out"` (written by it).
    public let direction: String
    /// The other connection (`"c7"`).
    public let client: String
    /// The frame itself, byte for byte as the broker mirrored it.
    public let rawFrame: RawJSON

    /// The frame itself, decoded (built from `rawFrame` on each read).
    public var frame: JSONValue { JSONValue(validated: rawFrame) }
}

extension JSONValue {
    /// The tree of bytes the frame decoder has validated already, so parsing cannot fail.
    init(validated bytes: RawJSON) {
        do {
            self = try JSONValue(parsingAnyDepth: bytes)
        } catch {
            preconditionFailure("bytes validated by BrokerFrameDecoder do not parse: \(error)")
        }
    }
}
