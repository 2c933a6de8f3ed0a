// JetStream as the bridge sees it, reduced to what exactly-once depends on: the inbound stream
// and its durable pull consumer (explicit acks, AckWait, redelivery of what was not acked,
// MaxAckPending, keep-alives) and the outbound stream's Nats-Msg-Id deduplication. Acks and
// keep-alives may be lost; a message may be redelivered while the bridge still holds it.
import NotifBusNATS

/// The inbound stream and its consumer.
struct ConsumerModel {
    let ackWaitMs: Int64
    let maxAckPending: Int
    /// Messages the servers published so far (stream sequence = index + 1).
    var available = 0
    /// The highest sequence delivered.
    var delivered: UInt64 = 0
    /// Sequences delivered and not acked, with when their AckWait started.
    var pending: [UInt64: Int64] = [:]
    var acked: Set<UInt64> = []
    /// Each delivery's handle, to the sequence it delivered.
    var handles: [Int: UInt64] = [:]
    private var nextHandle = 1

    init(ackWaitMs: Int64, maxAckPending: Int) {
        self.ackWaitMs = ackWaitMs
        self.maxAckPending = maxAckPending
    }

    /// Pending messages whose AckWait ran out, in sequence order.
    func due(_ now: Int64) -> [UInt64] { pending.filter { now - $0.value >= ackWaitMs }.keys.sorted() }

    /// When the next pending message comes due, if any.
    var nextDue: Int64? { pending.values.min().map { $0 + ackWaitMs } }

    func canDeliver(_ now: Int64) -> Bool {
        (Int(delivered) < available && pending.count < maxAckPending) || pending.values.contains { now - $0 >= ackWaitMs }
    }

    /// A pull of up to `batch`: redeliveries first, then new messages while MaxAckPending allows.
    mutating func fetch(_ batch: Int, now: Int64) -> [(handle: Int, sequence: UInt64)] {
        var out: [(Int, UInt64)] = []
        for sequence in due(now).prefix(batch) {
            pending[sequence] = now
            out.append((handle(sequence), sequence))
        }
        while out.count < batch && Int(delivered) < available && pending.count < maxAckPending {
            delivered += 1
            pending[delivered] = now
            out.append((handle(delivered), delivered))
        }
        return out
    }

    private mutating func handle(_ sequence: UInt64) -> Int {
        defer { nextHandle += 1 }
        handles[nextHandle] = sequence
        return nextHandle
    }

    /// An ack of any delivery of a sequence acks it (JetStream keys its pending list by sequence).
    mutating func ack(_ handle: Int) {
        guard let sequence = handles[handle] else { return }
        if pending.removeValue(forKey: sequence) != nil { acked.insert(sequence) }
    }

    /// `+WPI`: the AckWait of a pending message starts again.
    mutating func keepAlive(_ handle: Int, now: Int64) {
        guard let sequence = handles[handle], pending[sequence] != nil else { return }
        pending[sequence] = now
    }

    /// A restarted bridge has JetStream redeliver what its predecessor held at once (it sets a
    /// short AckWait on the consumer for a moment, Protocol/NATS.md §4): every pending message
    /// comes due now.
    mutating func expireAll() {
        for sequence in pending.keys { pending[sequence] = Int64.min / 2 }
    }

    /// One pending message comes due now, whatever its keep-alives said.
    mutating func expire(pick: Int) {
        let keys = pending.keys.sorted()
        guard !keys.isEmpty else { return }
        pending[keys[pick % keys.count]] = Int64.min / 2
    }
}

/// The outbound stream: what the bridge published, kept once per Nats-Msg-Id as JetStream's
/// duplicate window does (the window is longer than any simulated run).
struct OutboundModel {
    private(set) var stored: [String: OutboundMessage] = [:]
    private(set) var publishes = 0

    /// Stores `message` unless its id is there already. A second publish under one id must
    /// carry the same body: a result published twice is the same first outcome.
    mutating func publish(_ message: OutboundMessage) throws(SimulationFailure) {
        publishes += 1
        guard let id = message.msgID else { throw SimulationFailure("published \(message.subject) without a Nats-Msg-Id") }
        if let first = stored[id] {
            guard first.body == message.body else {
                throw SimulationFailure(
                    "two different bodies published as \(id): \(String(decoding: first.body, as: UTF8.self)) then \(String(decoding: message.body, as: UTF8.self))"
                )
            }
            return
        }
        stored[id] = message
    }
}
