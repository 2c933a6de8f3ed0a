// The broker as the bridge sees it with `--state-dir`: requests read in order from one
// connection, posts queued and run one event at a time, puts applied at once, and idempotency
// keys as Protocol/ONCE semantics give them (a key held answers with its first outcome, a
// mismatch is `once_conflict`, refusals record nothing, a chain cut by a crash answers
// `interrupted`). It counts every effect, so that the checks can tell once from twice.
import NotifBusNATS
import NotifBusProtocol

/// One reply on its way to the bridge: which connection and request id it answers.
struct BrokerReply {
    let connection: Int
    let id: Int64
    let answer: InboundMachine.Answer
}

struct BrokerModel {
    enum KeyState {
        case queued, running
        case ended(InboundMachine.Answer)
    }

    struct KeyRecord {
        let op: String
        let target: String
        let body: [UInt8]?
        var state: KeyState
        /// Requests waiting for the post's end: the first and its repeats.
        var waiters: [(connection: Int, id: Int64)]
    }

    let maxFrame: Int
    let queueLimit: Int
    let messages: [StreamMessage]
    var up = true
    var diskFull = false
    /// The one connection (the bridge's), by number; nil when none is open.
    var connection: Int? = nil
    private var nextConnection = 1
    /// Frames written and not read yet, in order.
    var inbox: [(connection: Int, id: Int64, frame: [UInt8])] = []
    var keys: [String: KeyRecord] = [:]
    var queue: [String] = []
    var running: String? = nil
    var slots: [String: [UInt8]] = [:]
    /// Chains started and puts applied, by key.
    var effects: [String: Int] = [:]
    /// The body each key was applied with.
    var appliedBodies: [String: [UInt8]?] = [:]
    private var events: Int64 = 0
    var replies: [BrokerReply] = []

    init(maxFrame: Int, queueLimit: Int, messages: [StreamMessage]) {
        self.maxFrame = maxFrame
        self.queueLimit = queueLimit
        self.messages = messages
    }

    mutating func connect() -> Int {
        let number = nextConnection
        nextConnection += 1
        connection = number
        return number
    }

    /// The bridge closed its connection: what it had not read yet is gone; posts queued still
    /// run, their results dropped (protocol-v1 §3.3).
    mutating func disconnect() {
        guard let open = connection else { return }
        inbox.removeAll { $0.connection == open }
        connection = nil
    }

    var hasWork: Bool { up && (!inbox.isEmpty || running != nil || !queue.isEmpty) }

    /// Reads the next frame and answers or queues it.
    mutating func read() throws(SimulationFailure) {
        let (from, id, frame) = inbox.removeFirst()
        guard frame.count <= maxFrame else {
            throw SimulationFailure("the bridge sent a \(frame.count)-byte frame; the broker's maxFrame is \(maxFrame)")
        }
        let request = try parse(frame)
        try check(request)
        let fingerprint = (request.op, request.target, request.body)
        if var record = keys[request.key] {
            guard record.op == fingerprint.0, record.target == fingerprint.1, record.body == fingerprint.2 else {
                reply(from, id, .refused(code: "once_conflict", message: "key \(request.key) was used with other content", details: nil))
                return
            }
            if case .ended(let answer) = record.state {
                reply(from, id, answer)
            } else {
                record.waiters.append((from, id))
                keys[request.key] = record
            }
            return
        }
        if diskFull {
            reply(from, id, .refused(code: "storage_failed", message: "the state folder is full", details: nil))
            return
        }
        if request.op == Op.put {
            if request.target == Workload.badSlot {
                reply(from, id, .refused(code: "bad_request", message: "slot refused", details: nil))
                return
            }
            slots[request.target] = request.body
            effects[request.key, default: 0] += 1
            appliedBodies[request.key] = request.body
            let answer = InboundMachine.Answer.result(Array(#"{"replaced":false}"#.utf8))
            keys[request.key] = KeyRecord(op: request.op, target: request.target, body: request.body, state: .ended(answer), waiters: [])
            reply(from, id, answer)
            return
        }
        if request.target == Workload.invalidEvent {
            reply(from, id, .refused(code: "invalid_payload", message: "willPresent takes an object", details: Array(#"{"field":"payload"}"#.utf8)))
            return
        }
        guard queue.count < queueLimit else {
            reply(from, id, .refused(code: "queue_full", message: "the event queue is full", details: nil))
            return
        }
        keys[request.key] = KeyRecord(op: request.op, target: request.target, body: request.body, state: .queued, waiters: [(from, id)])
        queue.append(request.key)
    }

    /// The next queued post's chain starts: its first observer sees it.
    mutating func startEvent() {
        let key = queue.removeFirst()
        keys[key]!.state = .running
        effects[key, default: 0] += 1
        appliedBodies[key] = keys[key]!.body
        running = key
    }

    /// The running chain ends with a result that names this run of it, so that a result from
    /// another run could never pass for it.
    mutating func endEvent() {
        let key = running!
        running = nil
        events += 1
        let answer = InboundMachine.Answer.result(Array(#"{"event":\#(events),"outcome":"completed","by":"o1"}"#.utf8))
        var record = keys[key]!
        record.state = .ended(answer)
        for waiter in record.waiters { reply(waiter.connection, waiter.id, answer) }
        record.waiters = []
        keys[key] = record
    }

    /// SIGKILL: the connection and everything unread are gone; queued posts were never
    /// recorded; a running chain was cut, and its key answers `interrupted` from now on.
    mutating func crash() {
        disconnect()
        up = false
        for key in queue { keys[key] = nil }
        queue.removeAll()
        if let key = running {
            keys[key]!.state = .ended(BrokerModel.interrupted)
            keys[key]!.waiters = []
            running = nil
        }
        replies.removeAll()
    }

    /// SIGTERM, before the broker closes and stops (`crash()`): queued posts and the running
    /// one are answered `shutting_down`; the queued ones are not recorded, the running one's
    /// key is "running" on disk, so it answers `interrupted` after the restart.
    mutating func terminate() {
        let shutting = InboundMachine.Answer.refused(code: "shutting_down", message: "the broker is stopping", details: nil)
        for key in queue + (running.map { [$0] } ?? []) {
            for waiter in keys[key]!.waiters { reply(waiter.connection, waiter.id, shutting) }
        }
    }

    static let interrupted = InboundMachine.Answer.refused(
        code: "interrupted", message: "the event's chain was cut when the broker stopped", details: nil)

    private mutating func reply(_ connection: Int, _ id: Int64, _ answer: InboundMachine.Answer) {
        guard connection == self.connection else { return }
        replies.append(BrokerReply(connection: connection, id: id, answer: answer))
    }

    // MARK: Reading requests

    struct Request {
        let op: String
        let key: String
        let target: String
        let body: [UInt8]?
    }

    /// Reads a request frame by the wire's rules, keeping the payload's bytes as sent.
    private func parse(_ frame: [UInt8]) throws(SimulationFailure) -> Request {
        var op = "", key: String? = nil, target: String? = nil, body: [UInt8]? = nil
        let parsed: Bool = frame.withUnsafeBytes { buffer in
            var scanner = JSONScanner(buffer)
            guard let fields = try? scanner.scanObjectMembers() else { return false }
            for field in fields {
                let raw = Array(buffer[field.start..<field.end])
                let text = (try? JSONValue(parsing: raw))?.stringValue
                switch scanner.key(of: field) {
                case "op": op = text ?? ""
                case "once": key = text
                case "name", "slot": target = text
                case "payload", "value": body = raw
                case "id": break
                default: return false
                }
            }
            return true
        }
        guard parsed, let key, let target, op == Op.post || op == Op.put else {
            throw SimulationFailure("the bridge sent a request the broker cannot read: \(String(decoding: frame, as: UTF8.self))")
        }
        return Request(op: op, key: key, target: target, body: body)
    }

    /// Every request must be a stream message as it came: its key from its Nats-Msg-Id, its
    /// name from its subject, its body byte for byte.
    private func check(_ request: Request) throws(SimulationFailure) {
        let subjects = NATSSubjects(device: Workload.device)
        let prefix = (request.op == Op.post ? subjects.post : subjects.put) + "."
        let matches = messages.contains {
            $0.msgID.map(subjects.onceKey) == request.key && $0.subject == prefix + request.target
                && ($0.body.isEmpty ? nil : $0.body) == request.body
        }
        guard matches else {
            throw SimulationFailure(
                "request \(request.op) \(request.target) with key \(request.key) and body \(request.body.map { String(decoding: $0, as: UTF8.self) } ?? "none") is no stream message"
            )
        }
    }
}
