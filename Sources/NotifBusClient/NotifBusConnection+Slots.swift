// Retained slots on the Swift client: take-once mailboxes that outlive connections.
import NotifBusProtocol

/// What a `put` did.
public struct PutResult: Sendable, Equatable {
    /// The slot held a value before.
    public let replaced: Bool
    /// A waiting `take` received the value directly; the slot stays empty.
    public let delivered: Bool
    /// The result of an earlier `put` with the same `once` key: this one changed nothing.
    public let isRepeat: Bool

    /// A result as the broker reports it.
    public init(replaced: Bool, delivered: Bool, isRepeat: Bool = false) {
        self.replaced = replaced
        self.delivered = delivered
        self.isRepeat = isRepeat
    }
}

extension NotifBusConnection {
    /// Stores `value` in `slot` (`.null` empties it). With a `once` key (§3.8), a `put`
    /// sent again with the same key and value changes nothing and answers as the first.
    @discardableResult
    public func put(_ slot: String, _ value: JSONValue, once: String? = nil) async throws(NotifBusError) -> PutResult {
        var fields: [String: JSONValue] = ["slot": .string(slot), "value": value]
        if let once { fields["once"] = .string(once) }
        let answer = try await answeredRequest(Op.put, fields, timeout: nil, onReply: nil)
        let result = JSONValue(validated: answer.result)
        return PutResult(
            replaced: result["replaced"]?.boolValue ?? false, delivered: result["delivered"]?.boolValue ?? false,
            isRepeat: answer.isRepeat)
    }

    /// Takes the slot's value, leaving it empty; nil when empty. With `wait`, an empty slot
    /// is waited on (oldest taker first) for at most that long. With a `once` key (§3.8), a
    /// `take` sent again with the same key returns the value the first took, and takes nothing.
    public func take(_ slot: String, wait: Duration? = nil, once: String? = nil) async throws(NotifBusError) -> JSONValue? {
        var fields: [String: JSONValue] = ["slot": .string(slot)]
        if let once { fields["once"] = .string(once) }
        var timeout = requestTimeout
        if let wait {
            let ms = wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000
            guard (0...Limits.maxTakeWaitMs).contains(ms) else {
                throw .invalidArgument("wait must be at most \(Duration.milliseconds(Limits.maxTakeWaitMs)) (10 minutes), not \(wait)")
            }
            fields["wait"] = .integer(ms)
            timeout = requestTimeout + wait
        }
        withState { $0.takeStarted() }
        defer { withState { $0.takeEnded() } }
        let result = try await request(Op.take, fields, timeout: timeout)
        return result.isNull ? nil : result
    }

    /// The slot's value, left in place; nil when empty.
    public func peek(_ slot: String) async throws(NotifBusError) -> JSONValue? {
        let result = try await request(Op.peek, ["slot": .string(slot)])
        return result.isNull ? nil : result
    }
}
