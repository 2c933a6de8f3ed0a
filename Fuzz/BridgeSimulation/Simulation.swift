// One simulated run of the NATS bridge's InboundMachine against models of JetStream and the
// broker, scheduled by a byte program: each byte picks the next step among those possible
// (a fetch, the broker reading a request or ending an event, the finisher publishing or
// acking, time passing) or a fault (the bridge or the broker killed, the broker's disk full,
// an ack lost, a redelivery). When the bytes run out, faults stop and the run is driven to the
// end; then every message must have taken effect exactly once with its real result
// published, or been dead-lettered with its reason. Every byte string is a valid program.
import NotifBusNATS
import NotifBusProtocol

/// A broken promise: what went wrong, and the last steps before it.
public struct SimulationFailure: Error, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
}

/// What a run did, for the explorer's figures.
public struct SimulationSummary: Sendable {
    public var steps = 0
    public var bridgeKills = 0
    public var brokerKills = 0
    public var brokerStops = 0
    public var lostAcks = 0
    public var requests = 0
    public var repeats = 0
    public var interrupted = 0
    public var deadLetters = 0
    public var results = 0
}

public final class Simulation {
    /// The most steps the closing phase may take before the run counts as stuck.
    static let drainLimit = 200_000

    public let workload: Workload
    private var now: Int64 = 1_000_000
    private var consumer: ConsumerModel
    private var outbound = OutboundModel()
    private var broker: BrokerModel
    private var machine: InboundMachine? = nil
    private var fetchWanted = false
    private var wantsBroker = false
    private var link: Int? = nil
    private var nextWireID: Int64 = 2
    private var groups: [(group: Int64, link: Int, ids: [Int64], answers: [InboundMachine.Answer?])] = []
    private var finisher: [(unit: Int64, publish: [OutboundMessage], ack: [Int], done: Int)] = []
    private var loseNextAck = false
    private var summary = SimulationSummary()
    private var trace: [String] = []

    public init(workload: Workload) {
        self.workload = workload
        consumer = ConsumerModel(ackWaitMs: workload.ackWaitMs, maxAckPending: 6 * workload.batch)
        broker = BrokerModel(maxFrame: workload.maxFrame, queueLimit: workload.queueLimit, messages: workload.messages)
    }

    /// Runs `program`: its first 8 bytes seed the workload, each later byte picks a step.
    public static func run(_ program: [UInt8]) throws(SimulationFailure) -> SimulationSummary {
        var seed: UInt64 = 0
        for (i, byte) in program.prefix(8).enumerated() { seed |= UInt64(byte) << (8 * UInt64(i)) }
        let simulation = Simulation(workload: Workload(seed: seed))
        do {
            try simulation.start()
            for byte in program.dropFirst(8) { try simulation.step(byte) }
            try simulation.drain()
            try simulation.check()
        } catch {
            throw SimulationFailure(
                error.description
                    + "\n  workload: \(simulation.workload.messages.count) messages, batch \(simulation.workload.batch), inflight \(simulation.workload.inflight), maxFrame \(simulation.workload.maxFrame)\n  last steps:\n    "
                    + simulation.trace.suffix(40).joined(separator: "\n    "))
        }
        return simulation.summary
    }

    private func note(_ line: String) {
        trace.append("[\(summary.steps) t=\(now - 1_000_000)] " + line)
        if trace.count > 400 { trace.removeFirst(200) }
    }

    // MARK: Steps

    private enum Progress: CaseIterable {
        case answers, finisher, brokerEnd, brokerStart, brokerRead, connect, fetch, publish, restartBridge, restartBroker
    }

    private func possible() -> [Progress] {
        Progress.allCases.filter { p in
            switch p {
            case .answers: return machine != nil && (groups.first.map { $0.answers.allSatisfy { $0 != nil } } ?? false)
            case .finisher: return machine != nil && !finisher.isEmpty
            case .brokerEnd: return broker.up && broker.running != nil
            case .brokerStart: return broker.up && broker.running == nil && !broker.queue.isEmpty
            case .brokerRead: return broker.up && !broker.inbox.isEmpty
            case .connect: return machine != nil && wantsBroker && broker.up
            case .fetch: return machine != nil && fetchWanted && consumer.canDeliver(now)
            case .publish: return consumer.available < workload.messages.count
            case .restartBridge: return machine == nil
            case .restartBroker: return !broker.up
            }
        }
    }

    private func start() throws(SimulationFailure) {
        try restartBridge(nudge: false)
    }

    /// One byte of the program: mostly progress, sometimes a fault or time passing.
    private func step(_ byte: UInt8) throws(SimulationFailure) {
        summary.steps += 1
        switch byte {
        case 176..<196: advance(Int64(byte - 175) * 20)
        case 196..<204: advance(workload.ackWaitMs + Int64(byte - 196) * 100)
        case 204..<212:
            if machine != nil { killBridge() }
        case 212..<216:
            if broker.up { killBroker(graceful: false) }
        case 216..<220:
            if broker.up { killBroker(graceful: true) }
        case 220..<228:
            broker.diskFull.toggle()
            note("broker disk \(broker.diskFull ? "full" : "freed")")
        case 228..<236:
            loseNextAck = true
        case 236..<244:
            consumer.expire(pick: Int(byte))
            note("a pending message comes due")
        default:
            let choices = possible()
            if choices.isEmpty {
                advance(100)
            } else {
                try perform(choices[Int(byte) % choices.count])
            }
        }
        try tick()
    }

    /// Faults stop; every step that can happen happens, in a fixed order, with time moving
    /// on to the next deadline when nothing else can, until everything is acked.
    private func drain() throws(SimulationFailure) {
        loseNextAck = false
        if broker.diskFull {
            broker.diskFull = false
            note("broker disk freed")
        }
        var steps = 0
        while !finished {
            steps += 1
            summary.steps += 1
            guard steps < Simulation.drainLimit else {
                throw SimulationFailure(
                    "the run did not finish: \(consumer.acked.count) of \(workload.messages.count) acked, \(groups.count) groups at the broker, machine idle: \(machine?.isIdle ?? true)"
                )
            }
            if let next = possible().first {
                try perform(next)
            } else {
                let wake = [machine?.deadline, consumer.pending.isEmpty ? nil : consumer.nextDue].compactMap { $0 }.min()
                advance(max((wake ?? now + 100) - now, 1))
            }
            try tick()
        }
    }

    private var finished: Bool {
        consumer.available == workload.messages.count && consumer.acked.count == workload.messages.count
            && consumer.pending.isEmpty && (machine?.isIdle ?? false) && groups.isEmpty && finisher.isEmpty
            && broker.queue.isEmpty && broker.running == nil
    }

    private func perform(_ progress: Progress) throws(SimulationFailure) {
        switch progress {
        case .answers:
            let group = groups.removeFirst()
            note("answers to group \(group.group)")
            try feed(.answers(group: group.group, group.answers.map { $0! }))
        case .finisher:
            var job = finisher[0]
            if job.done < job.publish.count {
                let message = job.publish[job.done]
                try outbound.publish(message)
                note("published \(message.msgID ?? "?")")
            } else if job.done < job.publish.count + job.ack.count {
                let handle = job.ack[job.done - job.publish.count]
                if loseNextAck {
                    loseNextAck = false
                    summary.lostAcks += 1
                    note("ack of seq \(consumer.handles[handle] ?? 0) lost")
                } else {
                    consumer.ack(handle)
                    note("acked seq \(consumer.handles[handle] ?? 0)")
                }
            } else {
                finisher.removeFirst()
                try feed(.finished(unit: job.unit))
                return
            }
            job.done += 1
            finisher[0] = job
        case .brokerEnd:
            note("broker ends event of \(broker.running ?? "")")
            broker.endEvent()
            deliverReplies()
        case .brokerStart:
            broker.startEvent()
            note("broker starts event of \(broker.running ?? "")")
        case .brokerRead:
            summary.requests += 1
            try broker.read()
            deliverReplies()
        case .connect:
            let number = broker.connect()
            link = number
            nextWireID = 2
            wantsBroker = false
            note("bridge connected to the broker (connection \(number))")
            try feed(.brokerConnected(maxFrame: workload.maxFrame))
        case .fetch:
            let delivered = consumer.fetch(workload.batch, now: now)
            fetchWanted = false
            let messages = delivered.map { handle, sequence in
                let m = workload.messages[Int(sequence) - 1]
                return InboundMachine.Message(sequence: sequence, subject: m.subject, msgID: m.msgID, body: m.body, handle: handle)
            }
            note("fetched seqs \(delivered.map(\.sequence))")
            try feed(.fetched(messages))
        case .publish:
            consumer.available += 1
        case .restartBridge:
            try restartBridge(nudge: summary.steps % 4 != 0)
        case .restartBroker:
            broker.up = true
            note("broker restarted")
        }
    }

    private func advance(_ ms: Int64) {
        now += ms
        note("time +\(ms) ms")
    }

    /// Ticks the machine while its deadline has come.
    private func tick() throws(SimulationFailure) {
        var rounds = 0
        while let deadline = machine?.deadline, deadline <= now {
            rounds += 1
            guard rounds < 100 else { throw SimulationFailure("the machine's deadline \(deadline) stays due at \(now)") }
            try feed(.tick)
        }
    }

    // MARK: Faults

    private func killBridge() {
        summary.bridgeKills += 1
        note("bridge SIGKILLed")
        machine = nil
        fetchWanted = false
        wantsBroker = false
        groups.removeAll()
        finisher.removeAll()
        if let link, broker.connection == link { broker.disconnect() }
        link = nil
    }

    /// A new bridge. With `nudge`, it reached JetStream in time to have its predecessor's
    /// messages redelivered at once; without, they wait out AckWait.
    private func restartBridge(nudge: Bool) throws(SimulationFailure) {
        note("bridge started" + (nudge ? ", pending messages redelivered now" : ""))
        var settings = InboundMachine.Settings(
            device: Workload.device, stream: Workload.stream, inflight: workload.inflight, ackWaitMs: workload.ackWaitMs)
        settings.backoffMaxMs = 2_000
        machine = InboundMachine(settings: settings)
        if nudge { consumer.expireAll() }
        wantsBroker = true
        try feed(.tick)
    }

    private func killBroker(graceful: Bool) {
        if graceful {
            summary.brokerStops += 1
            note("broker SIGTERMed")
            broker.terminate()
            deliverReplies()
        } else {
            summary.brokerKills += 1
            note("broker SIGKILLed")
        }
        broker.crash()
        failGroups(on: link)
    }

    // MARK: The shell

    private func feed(_ input: InboundMachine.Input) throws(SimulationFailure) {
        guard var m = machine else { return }
        let actions = m.handle(input, now: now)
        machine = m
        for action in actions { try execute(action) }
    }

    private func execute(_ action: InboundMachine.Action) throws(SimulationFailure) {
        switch action {
        case .fetch:
            fetchWanted = true
        case .send(let group, let requests):
            var ids: [Int64] = []
            for request in requests {
                let id = nextWireID
                nextWireID += 1
                ids.append(id)
                let frame =
                    Array(#"{"op":"#.utf8) + JSONValue.string(request.op).encoded + Array(#","id":\#(id)"#.utf8) + request.members + [
                        UInt8(ascii: "}")
                    ]
                if let link, broker.connection == link { broker.inbox.append((link, id, frame)) }
            }
            let alive = link != nil && broker.connection == link
            groups.append((group, link ?? 0, ids, Array(repeating: alive ? nil : .lost, count: ids.count)))
            note("sent group \(group): \(requests.count) requests" + (alive ? "" : " (connection gone)"))
        case .finish(let unit, let publish, let ack):
            finisher.append((unit, publish, ack, 0))
        case .keepAlive(let handles):
            for handle in handles { consumer.keepAlive(handle, now: now) }
        case .reconnect:
            note("bridge reconnects")
            if let link, broker.connection == link { broker.disconnect() }
            failGroups(on: link)
            link = nil
            wantsBroker = true
        case .log(let line):
            note("log: " + line)
        }
    }

    /// The connection closed: requests on it that got no reply fail.
    private func failGroups(on connection: Int?) {
        guard let connection else { return }
        for index in groups.indices where groups[index].link == connection {
            groups[index].answers = groups[index].answers.map { $0 ?? .lost }
        }
    }

    private func deliverReplies() {
        for reply in broker.replies {
            guard let index = groups.firstIndex(where: { $0.link == reply.connection && $0.ids.contains(reply.id) }) else { continue }
            let position = groups[index].ids.firstIndex(of: reply.id)!
            groups[index].answers[position] = reply.answer
        }
        broker.replies.removeAll()
    }

    // MARK: The end

    /// What every message came to, against what it must come to.
    private func check() throws(SimulationFailure) {
        let subjects = NATSSubjects(device: Workload.device)
        var expectedResults: Set<String> = []
        var expectedDead: Set<String> = []
        for (index, message) in workload.messages.enumerated() {
            let sequence = index + 1
            let deadID = "dead:" + Workload.stream + ":" + String(sequence)
            let key = message.msgID.map(subjects.onceKey)
            let isPost = message.subject.hasPrefix(subjects.post + ".")
            var applied: Bool
            switch message.expectation {
            case .dead(let reason):
                guard let letter = outbound.stored[deadID] else { throw SimulationFailure("seq \(sequence): no dead letter (\(reason) expected)") }
                let got = letter.headers.first { $0.0 == NATSSubjects.reasonHeader }?.1
                guard got == reason else { throw SimulationFailure("seq \(sequence): dead-lettered \(got ?? "?"), \(reason) expected") }
                expectedDead.insert(deadID)
                if let key, broker.effects[key] != nil {
                    throw SimulationFailure("seq \(sequence): dead-lettered as \(reason) yet applied")
                }
                continue
            case .applied:
                applied = true
            case .conflicting:
                guard let body = broker.appliedBodies[key!] else {
                    throw SimulationFailure("seq \(sequence): none of the bodies of \(message.msgID!) applied")
                }
                applied = body == (message.body.isEmpty ? nil : message.body)
                if !applied {
                    guard let letter = outbound.stored[deadID],
                        letter.headers.contains(where: { $0 == (NATSSubjects.reasonHeader, "once_conflict") })
                    else {
                        throw SimulationFailure(
                            "seq \(sequence): another body of \(message.msgID!) applied, and this one is not dead-lettered once_conflict")
                    }
                    expectedDead.insert(deadID)
                }
            }
            guard applied else { continue }
            let effects = broker.effects[key!] ?? 0
            guard effects == 1 else { throw SimulationFailure("seq \(sequence) (\(message.msgID!)): took effect \(effects) times") }
            guard isPost else { continue }
            guard case .ended(let answer)? = broker.keys[key!]?.state else { throw SimulationFailure("seq \(sequence): its post never ended") }
            let event = String(message.subject.dropFirst(subjects.post.count + 1))
            var body =
                Array(#"{"msgId":"#.utf8) + JSONValue.string(message.msgID!).encoded + Array(#","event":"#.utf8) + JSONValue.string(event).encoded
            switch answer {
            case .result(let bytes): body += Array(#","result":"#.utf8) + bytes + [UInt8(ascii: "}")]
            case .refused(let code, let text, _):
                body +=
                    Array(#","error":{"code":"#.utf8) + JSONValue.string(code).encoded + Array(#","message":"#.utf8)
                    + JSONValue.string(text).encoded + Array("}}".utf8)
                summary.interrupted += 1
            case .lost: throw SimulationFailure("the broker model ended a key with no answer")
            }
            let resultID = "result:" + message.msgID!
            guard let published = outbound.stored[resultID] else { throw SimulationFailure("seq \(sequence): no result published") }
            guard published.body == body else {
                throw SimulationFailure(
                    "seq \(sequence): result \(String(decoding: published.body, as: UTF8.self)) is not the real one \(String(decoding: body, as: UTF8.self))"
                )
            }
            expectedResults.insert(resultID)
        }
        for id in outbound.stored.keys {
            if id.hasPrefix("result:") && !expectedResults.contains(id) { throw SimulationFailure("unexpected result \(id)") }
            if id.hasPrefix("dead:") && !expectedDead.contains(id) { throw SimulationFailure("unexpected dead letter \(id)") }
        }
        summary.results = expectedResults.count
        summary.deadLetters = expectedDead.count
        summary.repeats = summary.requests - broker.effects.count
    }
}
