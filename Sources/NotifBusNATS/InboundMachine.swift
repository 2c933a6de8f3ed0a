// The NATS bridge's exactly-once logic as a pure state machine: fetched stream messages in;
// broker requests keyed by their Nats-Msg-Id, results, dead letters, acks and keep-alives out.
// It reads no clock, opens no socket and starts no thread: the time comes with every input,
// and notifbus-bridge carries the actions out. It never acks a message before its outcome is
// published, never sends a message without its key, and never re-encodes a body.
import NotifBusProtocol

/// Applies inbound stream messages to the broker exactly once, on the broker's idempotency
/// keys (`once`, Protocol/NATS.md §4). The broker remembers each key with its first outcome,
/// so whatever was lost (a reply, the connection, the bridge itself) is sent again with the
/// same key and answered with that first outcome; the bridge keeps nothing on disk.
///
/// One message, from fetch to ack:
///
///     fetched ──classify──► dead letter ──────────────────────────────┐
///        │                                                           │
///        └──► queued ──send──► at the broker ──result──► published ──┼──► finished (acked)
///               ▲                 │                                  │
///               ├── lost ─────────┤ (connection gone: sent again     │
///               │                 │  with the same key after the     │
///               └── backoff ◄─────┤  reconnect)                      │
///                  (storage_failed, queue_full, shutting_down,       │
///                   overloaded: nothing was recorded)                │
///                                 └──final refusal / too large──────►┘
///
/// Messages are fetched in batches ("units"); a unit is published and acked as a whole, in
/// fetch order, once each of its messages has an outcome. Up to `Settings.units` units are
/// applied at once and `Settings.finishing` more are being published. A stream sequence whose
/// unit finished in this run is remembered for a while, so that its redelivery (an ack lost
/// in a NATS outage) is acked without going to the broker again.
public struct InboundMachine {
    public struct Settings: Sendable {
        public var device: String
        /// Which subjects the device's posts and puts come on.
        public var layout: NATSLayout = .perDevice
        /// The inbound stream, for the dead letters' `Nats-Msg-Id`.
        public var stream: String
        /// Requests at the broker at once, in two groups of half this, each one write.
        public var inflight: Int
        /// The consumer's AckWait: messages held get a keep-alive every third of it.
        public var ackWaitMs: Int64
        /// Fetched batches applied at once: one at the broker, the next one ready behind it.
        public var units = 2
        /// Batches whose results and acks are being published at once.
        public var finishing = 2
        /// Pause after a refusal that may change, doubled while refusals go on.
        public var backoffMinMs: Int64 = 50
        public var backoffMaxMs: Int64 = 5_000
        /// Stream sequences finished in this run that are remembered (a lost ack's
        /// redelivery comes at least AckWait later): at most this many...
        public var rememberedCapacity = 200_000
        /// ...and for at most this long after they finished (plus twice AckWait).
        public var rememberedMarginMs: Int64 = 60_000

        public init(device: String, stream: String, inflight: Int, ackWaitMs: Int64) {
            self.device = device
            self.stream = stream
            self.inflight = inflight
            self.ackWaitMs = ackWaitMs
        }
    }

    /// One message as the consumer delivered it.
    public struct Message: Sendable {
        public let sequence: UInt64
        public let subject: String
        public let msgID: String?
        public let body: [UInt8]
        /// The shell's handle for acking it and keeping it alive.
        public let handle: Int

        public init(sequence: UInt64, subject: String, msgID: String?, body: [UInt8], handle: Int) {
            self.sequence = sequence
            self.subject = subject
            self.msgID = msgID
            self.body = body
            self.handle = handle
        }
    }

    /// The broker's answer to one request.
    public enum Answer: Sendable, Equatable {
        /// The reply's `result`, as the broker wrote it (a repeat's is the first one's).
        case result([UInt8])
        /// An error reply; `details` as the broker wrote them, when there were any.
        case refused(code: String, message: String, details: [UInt8]?)
        /// No answer: the connection closed or the reply did not come in time.
        case lost
    }

    /// A request for the broker: its op and its other members after `"id"`, encoded. The
    /// shell writes `{"op":"<op>","id":<id>` + `members` + `}`.
    public struct Request: Sendable, Equatable {
        public let op: String
        public let members: [UInt8]

        /// The frame's body at its longest: with an id of 16 digits, the most an id below
        /// 2^53 (protocol-v1 §2) takes.
        public var maxFrameBytes: Int { #"{"op":"","id":}"#.utf8.count + op.utf8.count + 16 + members.count }
    }

    public enum Input {
        /// A batch the consumer delivered, in its order.
        case fetched([Message])
        /// A connection to the broker, whose `hello` said `maxFrame`.
        case brokerConnected(maxFrame: Int)
        /// The answers of the group `send` named, in its order.
        case answers(group: Int64, [Answer])
        /// The results and dead letters of a unit are in JetStream and its messages acked.
        case finished(unit: Int64)
        /// Only time passed.
        case tick
    }

    public enum Action {
        /// Fetch the next batch (at most one fetch asked for at a time).
        case fetch
        /// Write these requests to the broker in one write, in this order.
        case send(group: Int64, [Request])
        /// Publish these (waiting for JetStream's acks), then ack these handles, then say `.finished`.
        case finish(unit: Int64, publish: [OutboundMessage], ack: [Int])
        /// Tell JetStream these messages are still being worked on.
        case keepAlive([Int])
        /// The broker connection is gone: close it, connect again, then say `.brokerConnected`.
        case reconnect
        case log(String)
    }

    /// Broker codes that may change when the same request is sent again later: nothing was
    /// recorded, so the key makes sending it again safe.
    public static let retriedCodes: Set<String> = [
        ErrorCode.storageFailed.rawValue, ErrorCode.queueFull.rawValue, ErrorCode.shuttingDown.rawValue,
        ErrorCode.overloaded.rawValue,
    ]
    /// The broker's answer to a keyed post whose chain was cut when the broker stopped.
    public static let interrupted = "interrupted"

    private enum Outcome {
        case publish(OutboundMessage)
        /// Nothing to publish: a put that took effect, or a redelivery of one finished before.
        case quiet
    }

    private struct Entry {
        let message: Message
        let action: InboundAction?
        let request: Request?
        var outcome: Outcome?
        /// Refusals that may change, so far: the pause before it goes again doubles with each.
        var refusals = 0
    }

    private struct Unit {
        let id: Int64
        var entries: [Entry]
        var open: Int
        var finishing = false
    }

    /// A message of a unit.
    private struct Ref: Comparable {
        let unit: Int64
        let index: Int
        static func < (a: Ref, b: Ref) -> Bool { a.unit != b.unit ? a.unit < b.unit : a.index < b.index }
    }

    public let settings: Settings
    private let subjects: NATSSubjects
    private var units: [Unit] = []
    private var nextUnit: Int64 = 1
    /// Messages waiting to go to the broker, in stream order.
    private var queue: [Ref] = []
    private var groups: [Int64: (generation: Int, refs: [Ref])] = [:]
    private var nextGroup: Int64 = 1
    private var atBroker = 0
    private var connected = false
    private var generation = 0
    private var maxFrame = 0
    private var fetching = false
    private var pausedUntil: Int64 = 0
    private var nextKeepAlive: Int64? = nil
    /// Sequences finished in this run, with when, oldest first (from `rememberedStart`).
    private var remembered: [UInt64: Int64] = [:]
    private var rememberedOrder: [(sequence: UInt64, at: Int64)] = []
    private var rememberedStart = 0

    public init(settings: Settings) {
        self.settings = settings
        subjects = NATSSubjects(device: settings.device, layout: settings.layout)
    }

    /// When the machine wants a `.tick` at the latest (a keep-alive, the end of a pause), if ever.
    public var deadline: Int64? {
        var soonest = nextKeepAlive
        if connected && !queue.isEmpty && pausedUntil > 0 { soonest = min(soonest ?? pausedUntil, pausedUntil) }
        return soonest
    }

    /// Whether nothing is held: no unit being applied or published.
    public var isIdle: Bool { units.isEmpty }

    /// Takes one input at time `now` (milliseconds on a monotonic clock) and returns what to do.
    public mutating func handle(_ input: Input, now: Int64) -> [Action] {
        var actions: [Action] = []
        switch input {
        case .fetched(let messages):
            fetching = false
            if !messages.isEmpty { accept(messages, &actions) }
        case .brokerConnected(let frame):
            connected = true
            generation += 1
            maxFrame = frame
        case .answers(let group, let answers):
            settle(group, answers, now: now, &actions)
        case .finished(let unit):
            forget(unit, now: now)
        case .tick:
            break
        }
        pump(now: now, &actions)
        return actions
    }

    // MARK: Inputs

    private mutating func accept(_ messages: [Message], _ actions: inout [Action]) {
        let id = nextUnit
        nextUnit += 1
        var unit = Unit(id: id, entries: [], open: 0)
        for message in messages {
            if remembered[message.sequence] != nil {
                unit.entries.append(Entry(message: message, action: nil, request: nil, outcome: .quiet))
                continue
            }
            switch subjects.classify(subject: message.subject, msgID: message.msgID, body: message.body) {
            case .failure(let reason):
                unit.entries.append(Entry(message: message, action: nil, request: nil, outcome: .publish(deadLetter(message, reason))))
                actions.append(.log("dead-lettered \(message.subject) (stream seq \(message.sequence)): \(reason.code): \(reason.detail)"))
            case .success(let action):
                let request = InboundMachine.request(action, key: subjects.onceKey(message.msgID!))
                queue.append(Ref(unit: id, index: unit.entries.count))
                unit.entries.append(Entry(message: message, action: action, request: request, outcome: nil))
                unit.open += 1
            }
        }
        units.append(unit)
    }

    private mutating func settle(_ group: Int64, _ answers: [Answer], now: Int64, _ actions: inout [Action]) {
        guard let sent = groups.removeValue(forKey: group) else {
            preconditionFailure("answers for group \(group), which is not at the broker")
        }
        precondition(answers.count == sent.refs.count, "group \(group): \(answers.count) answers for \(sent.refs.count) requests")
        atBroker -= sent.refs.count
        var refused: [String] = []
        var pause: Int64 = 0
        for (ref, answer) in zip(sent.refs, answers) {
            guard let item = entry(ref), let action = item.action else { preconditionFailure("group \(group) holds a closed message") }
            let message = item.message
            switch answer {
            case .result(let result):
                if case .post(let event, _) = action {
                    close(ref, .publish(resultMessage(message, event: event, member: "result", value: result)))
                } else {
                    close(ref, .quiet)
                }
            case .refused(let code, let text, _) where InboundMachine.retriedCodes.contains(code):
                let refusals = countRefusal(ref)
                pause = max(pause, min(settings.backoffMaxMs, settings.backoffMinMs << min(refusals - 1, 20)))
                requeue(ref)
                if refused.count < 3 { refused.append("\(message.msgID!) (\(code): \(text))") }
            case .refused(let code, let text, let details):
                if code == InboundMachine.interrupted, case .post(let event, _) = action {
                    var error = Array(#"{"code":"#.utf8) + JSONValue.string(code).encoded
                    error += Array(#","message":"#.utf8) + JSONValue.string(text).encoded
                    if let details { error += Array(#","details":"#.utf8) + details }
                    close(ref, .publish(resultMessage(message, event: event, member: "error", value: error + Array("}".utf8))))
                } else {
                    let reason = DeadLetterReason(code: code, detail: text)
                    close(ref, .publish(deadLetter(message, reason)))
                    actions.append(
                        .log("dead-lettered message \(message.msgID!) (stream seq \(message.sequence)): the broker refused it: \(code): \(text)"))
                }
            case .lost:
                requeue(ref)
                if sent.generation == generation && connected {
                    connected = false
                    actions.append(.reconnect)
                }
            }
        }
        if !refused.isEmpty {
            pausedUntil = max(pausedUntil, now + pause)
            actions.append(.log("the broker refused \(refused.joined(separator: ", ")) for now; sending again in \(pause) ms"))
        }
    }

    private mutating func forget(_ unitID: Int64, now: Int64) {
        guard let position = units.firstIndex(where: { $0.id == unitID }), units[position].finishing else {
            preconditionFailure("unit \(unitID) finished without being handed over")
        }
        for entry in units[position].entries where remembered[entry.message.sequence] == nil {
            remembered[entry.message.sequence] = now
            rememberedOrder.append((entry.message.sequence, now))
        }
        units.remove(at: position)
        let horizon = now - 2 * settings.ackWaitMs - settings.rememberedMarginMs
        while rememberedStart < rememberedOrder.count
            && (rememberedOrder[rememberedStart].at < horizon || rememberedOrder.count - rememberedStart > settings.rememberedCapacity)
        {
            let old = rememberedOrder[rememberedStart]
            if remembered[old.sequence] == old.at { remembered[old.sequence] = nil }
            rememberedStart += 1
        }
        if rememberedStart > 4096 && rememberedStart * 2 > rememberedOrder.count {
            rememberedOrder.removeFirst(rememberedStart)
            rememberedStart = 0
        }
    }

    // MARK: Outputs

    /// Sends what may go, hands over the units that are done (in order), asks for the next
    /// batch when there is room, and keeps the messages held alive.
    private mutating func pump(now: Int64, _ actions: inout [Action]) {
        if pausedUntil > 0 && now >= pausedUntil { pausedUntil = 0 }
        send(&actions)
        for index in units.indices where !units[index].finishing {
            guard units[index].open == 0, units.filter(\.finishing).count < settings.finishing else { break }
            units[index].finishing = true
            var publish: [OutboundMessage] = []
            for entry in units[index].entries {
                if case .publish(let message) = entry.outcome! { publish.append(message) }
            }
            actions.append(.finish(unit: units[index].id, publish: publish, ack: units[index].entries.map(\.message.handle)))
        }
        if !fetching && units.filter({ !$0.finishing }).count < settings.units {
            fetching = true
            actions.append(.fetch)
        }
        // Units being published are left to the finisher: their messages are acked soon,
        // and a redelivery meanwhile is harmless (it is remembered, or a repeat).
        let held = units.filter { !$0.finishing }
        if held.isEmpty {
            nextKeepAlive = nil
        } else if let due = nextKeepAlive, now >= due {
            actions.append(.keepAlive(held.flatMap { $0.entries.map(\.message.handle) }))
            nextKeepAlive = now + max(settings.ackWaitMs / 3, 1)
        } else if nextKeepAlive == nil {
            nextKeepAlive = now + max(settings.ackWaitMs / 3, 1)
        }
    }

    /// Writes groups of up to half `inflight` while fewer than two groups are at the broker.
    /// A request whose frame would pass the broker's `maxFrame` is dead-lettered here: the
    /// broker would close the connection on it, and it would come back the same every time.
    private mutating func send(_ actions: inout [Action]) {
        guard connected && pausedUntil == 0 else { return }
        let groupSize = max(settings.inflight / 2, 1)
        while !queue.isEmpty && groups.count < 2 && atBroker < settings.inflight {
            var refs: [Ref] = []
            var requests: [Request] = []
            while !queue.isEmpty && refs.count < min(groupSize, settings.inflight - atBroker) {
                let ref = queue.removeFirst()
                let item = entry(ref)!
                let request = item.request!
                if request.maxFrameBytes > maxFrame {
                    let reason = DeadLetterReason(
                        code: DeadLetterReason.tooLarge,
                        detail: "its broker frame takes up to \(request.maxFrameBytes) bytes; the broker's maxFrame is \(maxFrame)")
                    close(ref, .publish(deadLetter(item.message, reason)))
                    actions.append(.log("dead-lettered message \(item.message.msgID!) (stream seq \(item.message.sequence)): \(reason.detail)"))
                    continue
                }
                refs.append(ref)
                requests.append(request)
            }
            guard !refs.isEmpty else { continue }
            let group = nextGroup
            nextGroup += 1
            groups[group] = (generation, refs)
            atBroker += refs.count
            actions.append(.send(group: group, requests))
        }
    }

    // MARK: Entries

    private func entry(_ ref: Ref) -> Entry? {
        units.first { $0.id == ref.unit }?.entries[ref.index]
    }

    private mutating func close(_ ref: Ref, _ outcome: Outcome) {
        let u = units.firstIndex { $0.id == ref.unit }!
        precondition(units[u].entries[ref.index].outcome == nil, "message \(ref) closed twice")
        units[u].entries[ref.index].outcome = outcome
        units[u].open -= 1
    }

    /// Counts a refusal of a message that may change; returns how many it has had.
    private mutating func countRefusal(_ ref: Ref) -> Int {
        let u = units.firstIndex { $0.id == ref.unit }!
        units[u].entries[ref.index].refusals += 1
        return units[u].entries[ref.index].refusals
    }

    /// Puts a message back in the queue at its place in stream order.
    private mutating func requeue(_ ref: Ref) {
        var low = 0, high = queue.count
        while low < high {
            let mid = (low + high) / 2
            if queue[mid] < ref { low = mid + 1 } else { high = mid }
        }
        queue.insert(ref, at: low)
    }

    // MARK: Encoding

    /// The request of `action` with key `key`: the body's bytes go in as they came.
    static func request(_ action: InboundAction, key: String) -> Request {
        switch action {
        case .post(let event, let payload):
            var members: [UInt8] = []
            members.reserveCapacity(event.utf8.count + key.utf8.count + (payload?.count ?? 0) + 40)
            append(&members, #","name":"#, JSONValue.string(event).encoded, #","once":"#, JSONValue.string(key).encoded)
            if let payload { append(&members, #","payload":"#, payload) }
            return Request(op: Op.post, members: members)
        case .put(let slot, let value):
            var members: [UInt8] = []
            members.reserveCapacity(slot.utf8.count + key.utf8.count + value.count + 40)
            append(&members, #","slot":"#, JSONValue.string(slot).encoded, #","once":"#, JSONValue.string(key).encoded)
            append(&members, #","value":"#, value)
            return Request(op: Op.put, members: members)
        }
    }

    /// Appends literal text and bytes, alternating, to `bytes` without temporary arrays.
    private static func append(_ bytes: inout [UInt8], _ text: StaticString, _ value: [UInt8]) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
        bytes.append(contentsOf: value)
    }

    private static func append(_ bytes: inout [UInt8], _ a: StaticString, _ x: [UInt8], _ b: StaticString, _ y: [UInt8]) {
        append(&bytes, a, x)
        append(&bytes, b, y)
    }

    /// `{"msgId":…,"event":…,"<member>":<value>}` with `value` as the broker wrote it.
    private func resultMessage(_ message: Message, event: String, member: String, value: [UInt8]) -> OutboundMessage {
        let id = message.msgID!
        var body: [UInt8] = []
        body.reserveCapacity(id.utf8.count + event.utf8.count + member.utf8.count + value.count + 32)
        InboundMachine.append(&body, #"{"msgId":"#, JSONValue.string(id).encoded, #","event":"#, JSONValue.string(event).encoded)
        body.append(contentsOf: #","#.utf8)
        body.append(contentsOf: JSONValue.string(member).encoded)
        body.append(UInt8(ascii: ":"))
        body.append(contentsOf: value)
        body.append(UInt8(ascii: "}"))
        return OutboundMessage(
            subject: subjects.result, body: body,
            headers: [(NATSLink.msgIDHeader, "result:" + id), (NATSSubjects.inboundIDHeader, id)])
    }

    private func deadLetter(_ message: Message, _ reason: DeadLetterReason) -> OutboundMessage {
        var headers: [(String, String)] = [
            (NATSLink.msgIDHeader, "dead:" + settings.stream + ":" + String(message.sequence)),
            (NATSSubjects.reasonHeader, reason.code),
            (NATSSubjects.detailHeader, String(reason.detail.prefix(512)).filter { $0 != "\r" && $0 != "\n" }),
            (NATSSubjects.subjectHeader, message.subject),
        ]
        if let id = message.msgID, !id.isEmpty { headers.append((NATSSubjects.inboundIDHeader, id)) }
        return OutboundMessage(subject: subjects.dead, body: message.body, headers: headers)
    }
}
