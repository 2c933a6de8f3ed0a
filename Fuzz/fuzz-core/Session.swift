// One fuzz-core run: a fresh Broker with small limits, driven by a program as the transport
// would drive it, with every action it returns checked against a model of what each client
// was promised (Session+Frames.swift) and broker-wide invariants checked after every step
// and at the end (Session+Checks.swift). A broken invariant stops the process.
import FuzzDriver
import NotifBusCore
import NotifBusProtocol

#if canImport(Glibc)
import Glibc
#endif

/// A connection as the program's clients see it.
struct Peer {
    let id: ConnectionID
    let connectedAt: Instant
    var open = true
    var greeted = false
    var monitoring = false
    /// Requests sent and not yet answered.
    var outstanding: [Pending] = []
    /// Requests the broker took in (`admit`) that may still be held back behind durable
    /// writes, oldest first: those held are always the latest `Broker.heldBack` of them.
    var admitted: [Pending] = []
    /// Events and calls received, newest last, for answers and returns to aim at.
    var events: [Int64] = []
    var calls: [Int64] = []
    /// The steps in which it sent a frame, any frame (each clears its unresponsive mark).
    var frameSteps: [Int] = []
}

struct Pending {
    let id: JSONValue
    /// Nil when the decoder rejected the request (its reply is an error, at once).
    let request: SentRequest?
    let step: Int
    let sentAt: Instant
}

/// One `event` frame: a hop of an event's chain.
struct Hop {
    let observer: Int
    let connection: ConnectionID
    let sequence: Int
    let sentAt: Instant
    let step: Int
}

struct SentAnswer {
    let connection: ConnectionID
    let answer: Answer
    let sequence: Int
    let step: Int
}

struct CallRecord {
    let invoker: ConnectionID
    let requestID: JSONValue
    let handlerConnection: ConnectionID
    let sentAt: Instant
    var open = true
}

/// What the model knows of one idempotency key (decision 43): the op and fingerprint of the
/// request that holds it and, once seen, its first outcome's bytes.
struct OnceModel {
    let op: OnceOp
    let fingerprint: UInt64
    var outcome: [UInt8]?
    var isError = false
    /// Restored "running" after a restart: every repeat hears `interrupted`.
    var interrupted = false
}

/// What one broker input did, gathered while its actions are checked.
struct StepContext {
    /// The connection whose input this is (nil for ticks, shutdown and hang-ups).
    var input: ConnectionID? = nil
    var ticked = false
    var shuttingDown = false
    var actionCount = 0
    /// For a connect: the error the broker must refuse it with, if any.
    var refusal: String? = nil
    /// For a tick: ungreeted connections past the hello timeout, which it must close.
    var helloExpired: Set<ConnectionID> = []
    /// Persisted changes whose reply must be the connection's next frame, by connection.
    var acknowledgements: [ConnectionID: JSONValue] = [:]
    /// Connections that must be closed when the step ends, and those sent an error that closes.
    var mustClose: Set<ConnectionID> = []
    var closingErrors: Set<ConnectionID> = []
    /// "o3" or "h2" for every evicted frame of this step.
    var evicted: Set<String> = []
    /// Changes that became durable in this step (a write reported written).
    var persistedSlots: [(name: String, value: RawJSON?)] = []
    var persistedCategories = false
    /// For a step that reports a write: the request it answers, and whether it was written.
    var resolved: (connection: ConnectionID, id: JSONValue, written: Bool)? = nil
    /// Set in a step that reports a write or drops a connection: requests held back may
    /// start and be answered now.
    var afterWrite = false
    /// Set in a step that reports a write failed: a keyed post whose "running" record it was,
    /// the repeats waiting for it, and both sides of a hand-over may be refused storage_failed.
    var writeFailed = false
    /// The request this step sent.
    var request: (connection: ConnectionID, id: JSONValue, request: SentRequest?)? = nil
    /// Replies sent in this step to requests: connection, id, error code (nil: a result).
    var replies: [(connection: ConnectionID, id: JSONValue, code: String?)] = []
    /// A return the broker accepted: its invoker must get exactly this result or error.
    var relay: (call: Int64, body: ReturnBody, done: Bool)? = nil
}

final class Session {
    static let uids: [UInt32] = [1000, 0, 1001, 4242]
    static let allowedUIDs: Set<UInt32> = [1000, 0, 1001]
    static let start: Instant = 1_000_000_000
    /// Each draining tick consumes at least one deadline (hop, call, take or greeting), and a
    /// program of at most a few thousand bytes sets up far fewer than this.
    static let maxDrainTicks = 100_000
    /// Events and calls a peer remembers for answers and returns to aim at.
    static let remembered = 8
    /// FUZZ_CORE_TRACE=1 prints every input and action, to read what a crashing program did.
    static let tracing = getenv("FUZZ_CORE_TRACE") != nil

    let configuration: BrokerConfiguration
    var broker: Broker
    var now = Session.start
    private var buffer: [BrokerAction] = []

    var peers: [Peer] = []
    /// Live observers and handlers, each with the connection that holds it.
    var observers: [Int: ConnectionID] = [:]
    /// Every observer's connection, kept after it is removed (a trace may name it later).
    var observerHolders: [Int: ConnectionID] = [:]
    var handlers: [Int: ConnectionID] = [:]
    var hops: [Int64: [Hop]] = [:]
    /// The steps that ticked the broker, and the time each ticked at: only a tick ends a
    /// hop by its timeout.
    var ticks: [(step: Int, at: Instant)] = []
    var answers: [Int64: [SentAnswer]] = [:]
    var calls: [Int64: CallRecord] = [:]
    var finishedEvents: Set<Int64> = []
    /// Slots as the written persist actions describe them: what a restarted broker would restore.
    var slots: [String: RawJSON] = [:]
    /// The category set and the idempotency keys the written persist actions carry.
    var diskCategories: RawJSON? = nil
    var diskKeys: [OnceRecord] = []
    /// Keys with an ended record on disk: a second one would be a second application.
    var diskEnded: Set<String> = []
    /// Keys the model knows held, and those whose first request's fate it cannot know (its
    /// reply was lost with its connection). Nothing is forgotten: the window is wide.
    var onceKeys: [String: OnceModel] = [:]
    var onceUnsure: Set<String> = []
    /// Keyed posts whose connection closed before their reply: accepted or refused, the
    /// model cannot tell, so they widen the bound on `posted`.
    var keyedPostsUnknown = 0
    /// When the running broker started (it restarts).
    var brokerStart = Session.start
    /// Durable writes asked for and not yet reported, oldest first.
    var inFlight: [(write: WriteID, record: StateRecord, acknowledges: Acknowledgement?, once: [OnceRecord])] = []
    /// How writes are reported (`Instruction.storage`).
    var holdWrites = false
    var failWrites = false
    var reporting = false
    var acceptedPosts = 0
    var acceptedInvokes = 0
    var seenHopTimeouts = 0
    var seenGone = 0
    var seenInvalid = 0
    var shutDown = false
    var serial = 0
    var sequence = 0
    var stepNumber = 0
    var context = StepContext()

    /// Small limits, so that a short program reaches them (timeouts of a few instructions'
    /// clock advances, 200 payload bytes in the queue, 100 per poster): the first program
    /// byte picks the queue length (0 to 3), the client limit (2 to 5) and one poster's
    /// share of the queue (1 to 4).
    init(configurationByte k: UInt8) {
        var c = BrokerConfiguration()
        c.brokerUID = 1000
        c.allowedUIDs = [1001]
        c.hopTimeoutMs = 50
        c.callTimeoutMs = 80
        c.maxFrame = 4096
        c.maxQueue = Int(k % 4)
        c.maxClients = 2 + Int((k / 4) % 4)
        c.maxQueuePerClient = 1 + Int((k / 16) % 4)
        c.maxSlots = 3
        c.maxSlotBytes = 256
        c.maxCallsPerConnection = 2
        c.maxTakesPerConnection = 2
        c.helloTimeoutMs = 150
        // Status is compared whole with the model; its paging has a core test of its own.
        c.statusPageBytes = 1 << 30
        c.maxQueueBytes = 200
        c.maxQueueBytesPerClient = 100
        c.persistsState = true
        // Keys are never forgotten within a program, so that any second application shows;
        // the window has tests of its own (OnceTests).
        c.once.maxAgeMs = Int64.max / 4
        configuration = c
        broker = Broker(configuration: c, now: Session.start)
    }

    /// Runs a whole program, then the end checks.
    static func run(_ program: [UInt8]) {
        var reader = ProgramReader(program)
        let session = Session(configurationByte: reader.byte())
        while !reader.isAtEnd {
            session.execute(Instruction.decode(&reader))
        }
        session.finish()
    }

    // MARK: Instructions

    func execute(_ instruction: Instruction) {
        if shutDown {
            // The transport has stopped reading and accepting; only its timer still fires.
            switch instruction {
            case .advance, .tickAtDeadline, .storage, .restart: break
            default: return
            }
        }
        switch instruction {
        case .connect(let uid, let flags):
            let id = connect(uid: Session.uids[Int(uid % 4)])
            if flags & 1 != 0 {
                let name = flags & 2 != 0 ? ",\"name\":\"app\(id)\"" : ""
                deliver(id, "{\"op\":\"hello\",\"id\":\"hello\(nextSerial())\",\"protocol\":1\(name)}")
            }
        case .send(let selector, let template, let idChoice, let a, let b, let c):
            guard let id = connection(selector) else { return }
            let text = FrameTemplates.request(
                template, id: FrameTemplates.id(idChoice, serial: nextSerial()), a: a, b: b, c: c,
                observers: observers.keys.sorted(), handlers: handlers.keys.sorted())
            deliver(id, text)
        case .raw(let selector, let body):
            guard let id = connection(selector), !body.isEmpty else { return }
            deliver(id, body)
        case .answer(let selector, let pick, let kind):
            guard let id = connection(selector) else { return }
            let events = peers[id - 1].events
            let event = events.isEmpty ? Int64(pick) : events[Int(pick) % events.count]
            deliver(id, FrameTemplates.answer(event: event, kind: kind))
        case .return(let selector, let pick, let kind):
            guard let id = connection(selector) else { return }
            let received = peers[id - 1].calls
            let call = received.isEmpty ? Int64(pick) : received[Int(pick) % received.count]
            deliver(id, FrameTemplates.callReturn(call: call, kind: kind))
        case .disconnect(let selector):
            guard let id = connection(selector) else { return }
            hangUp(id)
            probeStatus()
        case .advance(let ms, let flags):
            now += (ms == 255 ? 600_000 : UInt64(ms)) * 1_000_000
            if flags & 1 != 0 { tick() }
        case .tickAtDeadline:
            if let deadline = broker.nextDeadline { now = Swift.max(now, deadline) }
            tick()
        case .oversized(let selector, let choice):
            guard let id = connection(selector) else { return }
            let length = choice & 1 == 0 ? 0 : UInt32(configuration.maxFrame) + 1 + UInt32(choice)
            begin(input: id)
            context.afterWrite = true  // closing it may let requests held behind its takes start
            if peers[id - 1].open { context.mustClose.insert(id) }
            broker.receiveOversizedFrame(from: id, length: length, now: now, into: &buffer)
            end()
        case .shutdown:
            shutDown = true
            begin(input: nil)
            context.shuttingDown = true
            // With writes in flight the connections close once the last is reported.
            // Those that never greeted hold nothing and close at once.
            for peer in peers where peer.open && (inFlight.isEmpty || !peer.greeted) { context.mustClose.insert(peer.id) }
            broker.shutdown(now: now, into: &buffer)
            end()
            if let deadline = broker.nextDeadline { violation("deadline \(deadline) still set after shutdown") }
        case .storage(let flags):
            holdWrites = flags & 1 != 0
            failWrites = flags & 2 != 0
            if flags & 4 != 0, !inFlight.isEmpty { reportWrite() }
            if !holdWrites { reportAllWrites() }
        case .restart(let flags):
            restart(landing: flags & 1 != 0)
        }
    }

    /// A connection for a selector: an open one when any is open (a high selector may pick
    /// one already closed, whose input the broker must ignore), else any made so far.
    func connection(_ selector: UInt8) -> ConnectionID? {
        let open = peers.filter(\.open)
        if selector < 0xF0, !open.isEmpty { return open[Int(selector) % open.count].id }
        return peers.isEmpty ? nil : peers[Int(selector) % peers.count].id
    }

    func nextSerial() -> Int {
        serial += 1
        return serial
    }

    // MARK: Broker inputs, one step each

    @discardableResult
    func connect(uid: UInt32) -> ConnectionID {
        let id = peers.count + 1
        let openCount = peers.filter(\.open).count
        peers.append(Peer(id: id, connectedAt: now))
        begin(input: id)
        trace("c\(id) connects with uid \(uid)")
        broker.connect(id, credentials: PeerCredentials(pid: Int32(100 + id), uid: uid, gid: uid), now: now, into: &buffer)
        let refusal = Session.allowedUIDs.contains(uid) ? (openCount >= configuration.maxClients ? "too_many_clients" : nil) : "forbidden"
        if refusal != nil { context.mustClose.insert(id) }
        context.refusal = refusal
        end()
        if refusal == nil && !peers[id - 1].open { violation("c\(id) (uid \(uid)) refused with \(openCount) of \(configuration.maxClients) clients") }
        return id
    }

    func deliver(_ id: ConnectionID, _ text: String) {
        deliver(id, Array(text.utf8))
    }

    func deliver(_ id: ConnectionID, _ body: [UInt8]) {
        begin(input: id)
        trace("c\(id) -> \(String(decoding: body, as: UTF8.self))")
        noteSent(body, from: id)
        let wantsInput = body.withUnsafeBytes { broker.receiveFrame($0, from: id, now: now, into: &buffer) }
        // What `receiveFrame` says of the connection is what asking the broker says.
        if wantsInput != broker.wantsInput(from: id) {
            violation("receiveFrame said wantsInput \(wantsInput) for c\(id), wantsInput(from:) says otherwise")
        }
        end()
    }

    /// The transport reports the oldest write in flight, as `failWrites` says.
    func reportWrite() {
        let write = inFlight.removeFirst()
        let written = !failWrites
        begin(input: nil)
        context.shuttingDown = shutDown
        context.afterWrite = true
        context.writeFailed = !written
        trace("write \(write.write) \(written ? "written" : "failed")")
        if let ack = write.acknowledges, peers[ack.connection - 1].open {
            let id = Session.json(ack.requestID)
            context.resolved = (ack.connection, id, written)
            context.acknowledgements[ack.connection] = id
        }
        if written { land(write.record, write.once, stepped: true) }
        broker.persisted(write.write, written: written, now: now, into: &buffer)
        end()
    }

    /// A record on disk: its change, and its keys, each key ended at most once on disk.
    func land(_ record: StateRecord, _ keys: [OnceRecord], stepped: Bool) {
        switch record {
        case .slot(let name, let value):
            if let value { slots[name] = value } else { slots[name] = nil }
            if stepped { context.persistedSlots.append((name, value)) }
        case .categories(let raw):
            diskCategories = raw
            if stepped { context.persistedCategories = true }
        case .keysOnly:
            break
        }
        for key in keys {
            if diskEnded.contains(key.key) { violation("key \(key.key) written again after its outcome was on disk: applied twice") }
            if key.outcome != nil { diskEnded.insert(key.key) }
            diskKeys.append(key)
        }
    }

    /// SIGKILL and a start on what is on disk: the writes in flight are lost (or landed,
    /// synced but never reported), every connection is gone, and a fresh broker restores the
    /// slots, the categories and the keys. Every key answered before must be back, with the
    /// same outcome; a post recorded running and never ended answers `interrupted`.
    func restart(landing: Bool) {
        begin(input: nil)
        trace("restart (writes in flight \(landing ? "landed" : "lost"))")
        if landing { for write in inFlight { land(write.record, write.once, stepped: false) } }
        inFlight.removeAll()
        for peer in peers where peer.open { markClosed(peer.id) }
        // The keys as the journal holds them: each at its last record.
        var last: [String: (index: Int, record: OnceRecord)] = [:]
        for (i, record) in diskKeys.enumerated() { last[record.key] = (i, record) }
        let restored = last.values.sorted { $0.index < $1.index }.map(\.record)
        for (key, model) in onceKeys where last[key] == nil {
            violation("key \(key), a \(model.op.wireName) answered before the restart, is not on disk")
        }
        var known: [String: OnceModel] = [:]
        for record in restored {
            var model = OnceModel(op: record.op, fingerprint: record.fingerprint, interrupted: record.outcome == nil)
            record.outcome?.withBytes { isError, bytes in
                model.outcome = Array(bytes)
                model.isError = isError
            }
            if let before = onceKeys[record.key], let seen = before.outcome, !model.interrupted,
                seen != model.outcome || before.isError != model.isError || before.op != model.op
            {
                violation("key \(record.key) answered \(Session.text(seen)) before the restart, restored as \(Session.text(model.outcome ?? []))")
            }
            known[record.key] = model
        }
        onceKeys = known
        onceUnsure.removeAll()
        keyedPostsUnknown = 0
        observers.removeAll()
        observerHolders.removeAll()
        handlers.removeAll()
        hops.removeAll()
        ticks.removeAll()
        answers.removeAll()
        calls.removeAll()
        finishedEvents.removeAll()
        acceptedPosts = 0
        acceptedInvokes = 0
        seenHopTimeouts = 0
        seenGone = 0
        seenInvalid = 0
        shutDown = false
        brokerStart = now
        broker = Broker(
            configuration: configuration, now: now, wallClockMs: Int64((now - Session.start) / 1_000_000), slots: slots,
            categories: diskCategories.flatMap { try? CategorySet.parse($0) }, once: restored)
        end()
    }

    func reportAllWrites() {
        guard !reporting else { return }
        reporting = true
        while !inFlight.isEmpty { reportWrite() }
        reporting = false
    }

    func hangUp(_ id: ConnectionID) {
        begin(input: nil)
        // Held requests may start: a take held back on the leaving connection kept them.
        context.afterWrite = true
        trace("c\(id) hangs up")
        markClosed(id)
        broker.disconnected(id, now: now, into: &buffer)
        end()
    }

    func tick() {
        begin(input: nil)
        context.ticked = true
        ticks.append((stepNumber, now))
        trace("tick")
        let limit = UInt64(configuration.helloTimeoutMs) * 1_000_000
        for peer in peers where peer.open && !peer.greeted && peer.connectedAt + limit <= now {
            context.helloExpired.insert(peer.id)
            context.mustClose.insert(peer.id)
        }
        broker.tick(now: now, into: &buffer)
        end()
    }

    /// Asks for `status` from an open greeted connection, whose reply `checkStatus` compares
    /// with the model. Nothing to do when no such connection is left.
    func probeStatus() {
        guard let peer = peers.first(where: { $0.open && $0.greeted }) else { return }
        deliver(peer.id, "{\"op\":\"status\",\"id\":\"probe\(nextSerial())\"}")
    }

    func begin(input: ConnectionID?) {
        stepNumber += 1
        trace("step \(stepNumber) at \((now - Session.start) / 1_000_000) ms")
        context = StepContext()
        context.input = input
    }

    /// Takes the step's actions, checks each in order, then the step as a whole.
    func end() {
        let actions = buffer
        buffer.removeAll(keepingCapacity: true)
        for action in actions {
            if Session.tracing { trace("  \(Session.describe(action, broker))") }
            check(action)
        }
        // Every frame of the step was read: the transport would reset the store here too.
        broker.outputTaken()
        checkStep()
        // The transport reports a batch's writes after the callbacks of one loop iteration.
        if !holdWrites && !reporting && !inFlight.isEmpty { reportAllWrites() }
    }

    /// What the clients learn from their own frames: requests now await replies, answers
    /// and returns may end hops and calls. Judged with the protocol's own decoder.
    func noteSent(_ body: [UInt8], from id: ConnectionID) {
        sequence += 1
        guard peers[id - 1].open else { return }
        peers[id - 1].frameSteps.append(stepNumber)
        let greeted = peers[id - 1].greeted
        switch MessageDecoder.decode(body) {
        case .badJSON:
            return
        case .rejected(let rejection, let isHello):
            guard greeted || isHello else {
                context.mustClose.insert(id)
                // hello_required echoes a usable id.
                if let rid = rejection.id { expectReply(Session.json(rid), nil, from: id, admitted: false) }
                return
            }
            guard let rid = rejection.id else { return }
            expectReply(Session.json(rid), nil, from: id)
        case .decoded(let inbound, let isHello):
            guard greeted || isHello else {
                context.mustClose.insert(id)
                if case .request(let rid, _) = inbound { expectReply(Session.json(rid), nil, from: id, admitted: false) }
                return
            }
            switch inbound {
            case .request(let rid, let request):
                expectReply(Session.json(rid), SentRequest(request), from: id)
            case .answer(let answer):
                answers[answer.event, default: []].append(SentAnswer(connection: id, answer: answer, sequence: sequence, step: stepNumber))
            case .callReturn(let ret):
                guard var call = calls[ret.call], call.open, call.handlerConnection == id else { return }
                call.open = false
                calls[ret.call] = call
                if peers[call.invoker - 1].open { context.relay = (ret.call, ReturnBody(ret.body), false) }
            }
        }
    }

    private func expectReply(_ rid: JSONValue, _ request: SentRequest?, from id: ConnectionID, admitted: Bool = true) {
        let pending = Pending(id: rid, request: request, step: stepNumber, sentAt: now)
        peers[id - 1].outstanding.append(pending)
        if admitted { peers[id - 1].admitted.append(pending) }
        context.request = (id, rid, request)
    }

    /// The transport will deliver nothing more for `id`, and the broker must send nothing more.
    func markClosed(_ id: ConnectionID) {
        guard peers[id - 1].open else { return }
        for pending in peers[id - 1].outstanding {
            guard case .keyed(let key, let inner)? = pending.request else { continue }
            // Its fate is unknown: applied or not, the model cannot tell from here.
            onceUnsure.insert(key)
            if case .post = inner { keyedPostsUnknown += 1 }
        }
        peers[id - 1].open = false
        peers[id - 1].outstanding.removeAll()
        peers[id - 1].admitted.removeAll()
        observers = observers.filter { $0.value != id }
        handlers = handlers.filter { $0.value != id }
    }

    func trace(_ line: @autoclosure () -> String) {
        if Session.tracing { print(line()) }
    }

    static func describe(_ action: BrokerAction, _ broker: borrowing Broker) -> String {
        switch action {
        case .send(let id, let range): return "c\(id) <- \(String(decoding: broker.outputBytes(range).dropFirst(4), as: UTF8.self))"
        case .close(let id): return "close c\(id)"
        case .persist(let write):
            switch broker.pendingWrite(write)?.record {
            case .slot(let name, let value)?:
                return "persist \(write): slot \(name) = \(value.map { String(decoding: $0, as: UTF8.self) } ?? "nil")"
            case .categories(let raw)?: return "persist \(write): categories \(String(decoding: raw, as: UTF8.self))"
            case .keysOnly?: return "persist \(write): keys \(broker.pendingWrite(write)?.once.map(\.key) ?? [])"
            case nil: return "persist \(write) of no write in flight"
            }
        }
    }

    static func json(_ id: RequestID) -> JSONValue {
        switch id {
        case .integer(let i): return .integer(i)
        case .string(let raw):
            guard let value = try? JSONValue(parsing: Array("\"\(raw)\"".utf8)) else { violation("request id \(raw) is not string text") }
            return value
        }
    }
}
