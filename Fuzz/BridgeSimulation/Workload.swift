// The inbound messages of one simulated run, made from a seed, and what each must come to:
// applied once (a post or a put), or dead-lettered with a given reason. It knows the rules the
// bridge documents (Protocol/NATS.md §5) and writes them down again here, independently of
// the bridge's code, so that the checks compare two readings of the same rules.
import NotifBusNATS
import NotifBusProtocol
import TestSupport

extension SeededGenerator {
    /// A number in `0..<bound` (the same seed gives the same run).
    public mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(max(bound, 1))) }
}

/// What a stream message must come to.
public enum Expectation: Equatable, Sendable {
    /// Applied once: a post (its chain ran once, its result published) or a put.
    case applied
    /// Dead-lettered with this reason, never applied.
    case dead(String)
    /// One of the messages sharing a Nats-Msg-Id with different bodies: the first the broker
    /// saw is applied, the others are refused `once_conflict`.
    case conflicting
}

/// One message the servers publish to the inbound stream.
public struct StreamMessage: Sendable {
    public let subject: String
    public let msgID: String?
    public let body: [UInt8]
    public let expectation: Expectation
}

/// The run's settings and messages.
public struct Workload: Sendable {
    public static let device = "d1"
    public static let stream = "NOTIFBUS_d1"
    /// Events and slots the simulated broker refuses for good (see `BrokerModel`).
    public static let invalidEvent = "willPresent"
    public static let badSlot = "bad"

    public let messages: [StreamMessage]
    public let batch: Int
    public let inflight: Int
    public let ackWaitMs: Int64
    public let maxFrame: Int
    /// How many posts the broker queues before it answers `queue_full`.
    public let queueLimit: Int

    /// A workload from `seed`: 3 to 24 messages of every kind, batch 1 to 4, 1 to 6 at the broker.
    public init(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        batch = 1 + random.below(4)
        inflight = 1 + random.below(6)
        ackWaitMs = 1000
        maxFrame = 256 + random.below(64)
        queueLimit = 1 + random.below(4)
        let count = 3 + random.below(22)
        var messages: [StreamMessage] = []
        let subjects = NATSSubjects(device: Workload.device)
        for n in 0..<count {
            let id = "m\(n)"
            let kind = random.below(100)
            switch kind {
            case 0..<45:
                // Numbers written as only JSON may write them: the broker must see these bytes.
                let body =
                    random.below(3) == 0 ? Array(#"{"n":\#(n),"x":1e9,"y":-0.50}"#.utf8) : random.below(5) == 0 ? [] : Array(#"{"n":\#(n)}"#.utf8)
                messages.append(.init(subject: subjects.post + ".mail", msgID: id, body: body, expectation: .applied))
            case 45..<60:
                messages.append(.init(subject: subjects.put + ".slot\(n % 3)", msgID: id, body: Array("[\(n)]".utf8), expectation: .applied))
            case 60..<64:
                messages.append(.init(subject: subjects.post + ".mail", msgID: nil, body: Array("{}".utf8), expectation: .dead("no_msg_id")))
            case 64..<67:
                messages.append(.init(subject: "notifbus.d1.take.x", msgID: id, body: Array("{}".utf8), expectation: .dead("unknown_subject")))
            case 67..<70:
                messages.append(.init(subject: subjects.post + ".mail", msgID: id, body: Array("{oops".utf8), expectation: .dead("bad_json")))
            case 70..<72:
                let long = String(repeating: "k", count: subjects.maxMsgIDBytes + 1 + random.below(3))
                messages.append(.init(subject: subjects.post + ".mail", msgID: long, body: [], expectation: .dead("long_msg_id")))
            case 72..<80:
                // Around the broker's maxFrame: some fit, some do not, by the documented rule.
                let size = maxFrame - 120 + random.below(80)
                let body = Array(#"{"pad":""#.utf8) + [UInt8](repeating: UInt8(ascii: "p"), count: max(size, 0)) + Array(#""}"#.utf8)
                let subject = subjects.post + ".mail"
                let fits = Workload.frameBound(op: "post", name: "mail", key: subjects.onceKey(id), body: body) <= maxFrame
                messages.append(.init(subject: subject, msgID: id, body: body, expectation: fits ? .applied : .dead("too_large")))
            case 80..<84:
                messages.append(
                    .init(
                        subject: subjects.post + "." + Workload.invalidEvent, msgID: id, body: Array("[]".utf8),
                        expectation: .dead("invalid_payload")))
            case 84..<86:
                messages.append(
                    .init(subject: subjects.put + "." + Workload.badSlot, msgID: id, body: Array("1".utf8), expectation: .dead("bad_request")))
            default:
                // The same id again: the same message (a server's retry after the stream's
                // duplicate window), or another body under an id already used.
                let earlier = messages.indices.filter { messages[$0].msgID != nil && messages[$0].expectation == .applied }
                guard let pick = earlier.isEmpty ? nil : earlier[random.below(earlier.count)] else {
                    messages.append(.init(subject: subjects.post + ".mail", msgID: id, body: [], expectation: .applied))
                    continue
                }
                let original = messages[pick]
                if kind < 95 {
                    messages.append(original)
                } else {
                    messages[pick] = .init(subject: original.subject, msgID: original.msgID, body: original.body, expectation: .conflicting)
                    messages.append(
                        .init(subject: original.subject, msgID: original.msgID, body: Array("[\"other\"]".utf8), expectation: .conflicting))
                }
            }
        }
        // A conflicting pair whose ids are shared by plain copies: every copy is conflicting.
        let conflicted = Set(messages.filter { $0.expectation == .conflicting }.compactMap(\.msgID))
        self.messages = messages.map {
            guard let id = $0.msgID, conflicted.contains(id) else { return $0 }
            return .init(subject: $0.subject, msgID: id, body: $0.body, expectation: .conflicting)
        }
    }

    /// The documented size rule: `{"op":"<op>","id":<16 digits>` + the members + `}`, the
    /// members being the name or slot, the key and the body as it came.
    static func frameBound(op: String, name: String, key: String, body: [UInt8]) -> Int {
        let target = op == "post" ? #","name":"# : #","slot":"#
        var members = target.utf8.count + JSONValue.string(name).encoded.count + #","once":"#.utf8.count + JSONValue.string(key).encoded.count
        if !body.isEmpty { members += (op == "post" ? #","payload":"# : #","value":"#).utf8.count + body.count }
        return #"{"op":"","id":}"#.utf8.count + op.utf8.count + 16 + members
    }
}
