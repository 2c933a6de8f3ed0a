// The NATS bridge's inbound loop: take a prefetched batch, record intents (one fsync, which
// also carries the previous batch's outcomes), pipeline the posts and puts to the broker in
// groups with a send marker after each, record outcomes; a finisher thread publishes the
// results and acks. It never acks a message before its effect is on disk and its result in
// JetStream, and never sends one the store applied or whose intent is not on disk.
import Dispatch
import Glibc
import NotifBusClient
import NotifBusNATS
import NotifBusProtocol

/// Runs async client calls from the bridge's plain threads, waiting on a semaphore.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        box.value = await body()
        done.signal()
    }
    done.wait()
    return box.value!
}

/// Carries a value from a task back to the thread that waits for it.
final class ResultBox<T>: @unchecked Sendable {
    var value: T?
    init() {}
}

/// Prints one line to stderr, prefixed with the tool's name.
func log(_ line: String) {
    var text = "notifbus-bridge: " + line + "\n"
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// The bridge between one device's broker and NATS.
final class NATSBridge: @unchecked Sendable {
    let options: BridgeOptions
    let subjects: NATSSubjects
    let nats: NATSLink
    let store: AppliedStore
    private let busLock = Lock()
    private var bus: NotifBusConnection? = nil
    private var exporter: EventExporter? = nil
    private lazy var finisher = BatchFinisher(bridge: self)
    private var prefetcher: Prefetcher? = nil
    /// The applied batch whose outcomes are recorded but not yet fsynced (at most one): the
    /// next fsync, usually the one of the next batch's intents, hands it to the finisher.
    private var finished: [([OutboundMessage], [NATSMessage])] = []
    /// With NOTIFBUS_BRIDGE_PROFILE set, where the inbound thread's time goes (logged).
    private let profile = PhaseProfile(enabled: getenv("NOTIFBUS_BRIDGE_PROFILE") != nil)
    /// The whole chain of a post, queue wait included, may take this long before the bridge
    /// gives up on its reply and treats the broker as lost (then the marker decides).
    static let postTimeout: Duration = .seconds(600)
    /// The duplicate window of the streams the bridge creates: a result republished after a
    /// crash or an outage shorter than this is stored once (JetStream's default is 2 minutes).
    static let duplicateWindowMs: Int64 = 10 * 60 * 1000
    /// A failed fetch or publish is retried after this pause.
    static let retryPauseMs: UInt32 = 250

    init(options: BridgeOptions) throws {
        self.options = options
        subjects = NATSSubjects(device: options.device)
        store = try AppliedStore(folder: options.stateDir, device: options.device, window: options.window)
        nats = try NATSLink(urls: options.urls, name: "notifbus-bridge " + options.device, log: { log($0) })
    }

    /// The broker connection, if there is one now.
    var currentBus: NotifBusConnection? { busLock.withLock { bus } }

    // MARK: Start

    /// Sets up streams, consumer, invoke subscription and export, then runs the inbound loop forever.
    func run() -> Never {
        if options.stateDir == nil {
            log("no --state-dir: applied message ids live in memory, so a restart of the bridge may apply a redelivered message again")
        }
        let sub = waitForConsumer()
        do {
            try nats.subscribe(subjects.invokeWildcard) { [self] msg in serveInvoke(msg) }
        } catch {
            log("cannot subscribe to \(subjects.invokeWildcard): \(error)")
            exit(1)
        }
        if !options.exports.isEmpty { exporter = EventExporter(bridge: self, events: Set(options.exports)) }
        connectBus()
        log("bridging device \(options.device): stream \(options.inboundStream), results to \(options.outboundStream)")
        let nats = self.nats, size = options.batch
        // Only the prefetcher's thread fetches through the subscription (cnats is thread-safe).
        nonisolated(unsafe) let subscription = sub
        prefetcher = Prefetcher {
            while true {
                do {
                    let batch = try nats.fetch(subscription, batch: size, timeoutMs: 1000)
                    if !batch.isEmpty { return batch }
                } catch {
                    if nats.isConnected { log("fetch: \(error)") }
                    usleep(NATSBridge.retryPauseMs * 1000)
                }
            }
        }
        while true {
            let started = profile.now()
            let batch: [NATSMessage]
            if let ready = prefetcher!.tryNext() {
                batch = ready
            } else {
                // Nothing to go on with: the finished batch's outcomes go to disk now.
                if !finished.isEmpty { syncOrExit() }
                batch = prefetcher!.next()
            }
            profile.add(.fetch, since: started)
            let outbound = process(batch)
            // A batch with nothing to send wrote no intents, so nothing synced the one before.
            if !finished.isEmpty { syncOrExit() }
            finished.append((outbound, batch))
            profile.count(batch.count)
        }
    }

    /// Fetches the next batch on a thread of its own while the current one is applied, so the
    /// broker does not wait for a NATS round trip between batches. One batch waits at most:
    /// with the one being applied and the finisher's two, that is MaxAckPending (4 × batch).
    final class Prefetcher: @unchecked Sendable {
        private let lock = Lock()
        private var waiting: [[NATSMessage]] = []
        private let ready = DispatchSemaphore(value: 0)
        private let room = DispatchSemaphore(value: 1)

        init(fetch: @escaping @Sendable () -> [NATSMessage]) {
            _ = DetachedThread.start { [self] in
                while true {
                    room.wait()
                    let batch = fetch()
                    lock.withLock { waiting.append(batch) }
                    ready.signal()
                }
            }
        }

        /// The next batch if one is ready now.
        func tryNext() -> [NATSMessage]? {
            guard ready.wait(timeout: .now()) == .success else { return nil }
            let batch = lock.withLock { waiting.removeFirst() }
            room.signal()
            return batch
        }

        /// The next batch, in fetch order.
        func next() -> [NATSMessage] {
            ready.wait()
            let batch = lock.withLock { waiting.removeFirst() }
            room.signal()
            return batch
        }

        /// Refreshes the ack timer of the batch waiting here (the current one is slow).
        func keepWaitingAlive() {
            lock.withLock { waiting.forEach { $0.forEach { _ = $0.inProgress() } } }
        }
    }

    /// Creates the streams when asked and binds the durable consumer, retrying while JetStream
    /// is unreachable or electing leaders.
    private func waitForConsumer() -> OpaquePointer {
        var lastError = ""
        while true {
            do {
                if options.createStream {
                    try nats.createStream(
                        options.inboundStream, subjects: subjects.inboundSubjects, replicas: options.replicas,
                        duplicateWindowMs: NATSBridge.duplicateWindowMs)
                    try nats.createStream(
                        options.outboundStream, subjects: subjects.outboundSubjects, replicas: options.replicas,
                        duplicateWindowMs: NATSBridge.duplicateWindowMs)
                }
                return try nats.pullSubscribe(
                    stream: options.inboundStream, durable: options.durable,
                    ackWaitMs: options.ackWaitMs, maxAckPending: options.batch * 6)
            } catch {
                if error.description != lastError { log("waiting for JetStream: \(error)") }
                lastError = error.description
                if options.createStream == false, nats.isConnected, nats.streamExists(options.inboundStream) == false {
                    log("stream \(options.inboundStream) does not exist (use --create-stream)")
                    exit(1)
                }
                usleep(500_000)
            }
        }
    }

    // MARK: The broker connection

    /// Connects to the broker, retrying every half second, then settles intents left in doubt.
    private func connectBus() {
        var warned = false
        while true {
            let socket = options.socket
            let result: Result<NotifBusConnection, NotifBusError> = blocking {
                do throws(NotifBusError) {
                    return .success(try await NotifBusConnection.connect(socket: socket, name: "notifbus-bridge nats", reconnect: .never))
                } catch {
                    return .failure(error)
                }
            }
            switch result {
            case .success(let connection):
                if let exporter, !exporter.attach(connection) {
                    connection.close()
                    usleep(500_000)
                    continue
                }
                if resolveInDoubt(connection) {
                    busLock.withLock { bus = connection }
                    if warned { log("broker reachable again") }
                    return
                }
                connection.close()
            case .failure(let error):
                if !warned { log("broker unreachable (\(error)); not acking until it is back") }
                warned = true
            }
            usleep(500_000)
        }
    }

    /// Decides the intents that have no outcome: those the broker saw (their marker, or a later
    /// one, is in the slot) took effect; the rest never reached it and are forgotten.
    private func resolveInDoubt(_ connection: NotifBusConnection) -> Bool {
        let slot = subjects.markerSlot
        let peeked: Result<JSONValue?, NotifBusError> = blocking {
            do throws(NotifBusError) { return .success(try await connection.peek(slot)) } catch { return .failure(error) }
        }
        guard case .success(let marker) = peeked else { return false }
        let sent = marker?["seq"]?.intValue ?? 0
        for (id, sequence) in store.unresolved {
            if sequence <= sent {
                store.recordApplied(id, outcome: lostOutcome(id))
                log("message \(id) reached the broker before a restart; its result is unknown")
            } else {
                store.dropIntent(id)
            }
        }
        store.raiseSequence(to: sent)
        do { try store.sync() } catch {
            log("\(error)")
            exit(1)
        }
        return true
    }

    private func lostOutcome(_ id: String) -> JSONValue {
        [
            "msgId": .string(id),
            "error": [
                "code": "result_lost",
                "message": "the post reached the broker before the bridge or the broker restarted; it took effect, its result is unknown",
            ],
        ]
    }

    private func dropBus(_ connection: NotifBusConnection) {
        busLock.withLock { if bus === connection { bus = nil } }
        connection.close()
    }

    // MARK: One batch

    /// What to do with one fetched message.
    private enum Step {
        case dead(DeadLetterReason)
        /// Already applied: publish its stored result again (deduplicated by JetStream) and ack.
        case replay(JSONValue?)
        case apply(id: String, action: InboundAction)
    }

    /// Takes a batch to the point where every message of it took effect and its outcome is
    /// recorded, and returns its results and dead letters. The caller hands them to the
    /// finisher once the outcomes are on disk, which is usually the next batch's intent fsync.
    private func process(_ batch: [NATSMessage]) -> [OutboundMessage] {
        while true {
            let planned = profile.now()
            let steps = plan(batch)
            profile.add(.plan, since: planned)
            guard let outcomes = apply(batch, steps) else {
                // The broker went away: reconnect, settle what it saw, and plan the batch again.
                connectBus()
                continue
            }
            var outbound: [OutboundMessage] = []
            for (index, step) in steps.enumerated() {
                switch step {
                case .dead(let reason): outbound.append(deadLetter(batch[index], reason))
                case .replay(let outcome): if let outcome { outbound.append(resultMessage(outcome)) }
                case .apply: if let outcome = outcomes[index] { outbound.append(resultMessage(id: outcome.id, body: outcome.body)) }
                }
            }
            return outbound
        }
    }

    private func plan(_ batch: [NATSMessage]) -> [Step] {
        var seen: [String: Int] = [:]
        return batch.map { msg in
            let id = msg.header(NATSLink.msgIDHeader)
            switch subjects.classify(subject: msg.subject, msgID: id, body: msg.data) {
            case .failure(let reason): return .dead(reason)
            case .success(let action):
                let id = id!
                if case .applied(let outcome) = store.state(of: id) { return .replay(outcome) }
                // The same id twice in one batch: the second is a duplicate of the first.
                if seen[id] != nil { return .replay(nil) }
                seen[id] = 1
                return .apply(id: id, action: action)
            }
        }
    }

    /// Sends every `.apply` step to the broker and records the outcomes. Returns the result
    /// bodies by index (nil for puts and other steps), or nil when the broker was lost.
    ///
    /// Up to `options.inflight` messages are at the broker at once, in two groups of half that.
    /// Each group is one write of its posts and puts followed by one marker put (the highest
    /// intent sequence of the group); when the older group has come back, the next one goes.
    /// So the broker never waits for the bridge, the bridge wakes once per group, and
    /// the broker fsyncs once per group (the marker). The bridge fsyncs once per batch: the
    /// intents before the first group, and with them the outcomes of the batch before (group
    /// commit), so a crash leaves at most one batch of posts whose results are unknown.
    private func apply(_ batch: [NATSMessage], _ steps: [Step]) -> [Int: (id: String, body: [UInt8])]? {
        var queue = steps.enumerated().compactMap { index, step -> Work? in
            if case .apply(let id, let action) = step { return Work(index: index, id: id, action: action, sequence: 0) }
            return nil
        }
        guard !queue.isEmpty else { return [:] }
        guard let connection = currentBus else { return nil }
        for i in queue.indices { queue[i].sequence = store.recordIntent(queue[i].id) }
        let slot = subjects.markerSlot
        var outcomes: [Int: (id: String, body: [UInt8])] = [:]
        var groups: [(members: [Work], replies: PipelinedReplies)] = []
        var next = 0
        var lost = false
        let groupSize = max(options.inflight / 2, 1)
        while !lost && (next < queue.count || !groups.isEmpty) {
            // Keep two groups at the broker: it works on one while the bridge reads the other.
            while next < queue.count && groups.count < 2 {
                // Intents reach the disk before their messages reach the broker.
                if store.hasUnsyncedIntents { syncOrExit() }
                var requests: [(op: String, fields: [String: JSONValue])] = []
                var members: [Work] = []
                while next < queue.count && members.count < groupSize {
                    let work = queue[next]
                    next += 1
                    members.append(work)
                    switch work.action {
                    case .post(let event, let payload):
                        var fields: [String: JSONValue] = ["name": .string(event)]
                        if payload != .null { fields["payload"] = payload }
                        requests.append((Op.post, fields))
                    case .put(let slot, let value):
                        requests.append((Op.put, ["slot": .string(slot), "value": value]))
                    }
                }
                requests.append((Op.put, ["slot": .string(slot), "value": ["seq": .integer(members.last!.sequence)]]))
                groups.append((members, connection.pipeline(requests, timeout: NATSBridge.postTimeout)))
            }
            let (members, group) = groups.removeFirst()
            let waited = profile.now()
            let replies = waitKeepingAlive(batch, group)
            profile.add(.broker, since: waited)
            for (position, work) in members.enumerated() where !lost {
                switch replies[position] {
                case .success(let result):
                    if case .post(let event, _) = work.action {
                        let outcome: JSONValue = ["msgId": .string(work.id), "event": .string(event), "result": result]
                        let body = outcome.encoded
                        outcomes[work.index] = (work.id, body)
                        store.recordApplied(work.id, outcome: outcome, encoded: body)
                    } else {
                        store.recordApplied(work.id, outcome: nil)
                    }
                case .failure(.broker(let e)) where e.code == ErrorCode.queueFull.rawValue:
                    // Refused before queuing, so nothing happened: send it again after the others.
                    var again = work
                    again.sequence = store.recordIntent(work.id)
                    queue.append(again)
                    usleep(10_000)
                case .failure(.broker(let e)) where e.code == ErrorCode.storageFailed.rawValue || e.code == ErrorCode.shuttingDown.rawValue:
                    log("broker refused message \(work.id) for now: \(e)")
                    lost = true
                case .failure(.broker(let e)):
                    // A refusal that will never change (invalid_payload, bad_request…): final.
                    var error: [String: JSONValue] = ["code": .string(e.code), "message": .string(e.message)]
                    if let details = e.details { error["details"] = details }
                    let outcome: JSONValue = ["msgId": .string(work.id), "error": .object(error)]
                    if case .put = work.action { log("put of message \(work.id) refused: \(e)") }
                    let body = outcome.encoded
                    outcomes[work.index] = (work.id, body)
                    store.recordApplied(work.id, outcome: outcome, encoded: body)
                case .failure(let other):
                    log("broker lost while applying message \(work.id): \(other)")
                    lost = true
                }
            }
        }
        if lost {
            syncOrExit()
            dropBus(connection)
            return nil
        }
        return outcomes
    }

    /// One message on its way to the broker.
    private struct Work {
        let index: Int
        let id: String
        let action: InboundAction
        var sequence: Int64
    }

    /// A store that cannot write cannot promise anything: stop, and let redelivery take over.
    /// Then the finished batch waiting for this fsync goes to the finisher.
    private func syncOrExit() {
        let started = profile.now()
        do { try store.sync() } catch {
            log("\(error)")
            exit(1)
        }
        profile.add(.fsync, since: started)
        let handed = profile.now()
        for (outbound, batch) in finished { finisher.hand(outbound, batch) }
        finished.removeAll()
        profile.add(.handOff, since: handed)
    }

    /// Waits on this thread for every reply of `group`, telling JetStream every third of
    /// AckWait that the batch is still in progress. No task is involved: the reader thread's
    /// last reply wakes this thread once for the group.
    private func waitKeepingAlive(_ batch: [NATSMessage], _ group: PipelinedReplies) -> [PipelinedReplies.Reply] {
        let every = max(options.ackWaitMs / 3, 50)
        while true {
            if let replies = group.waitAll(until: .now() + .milliseconds(Int(every))) { return replies }
            batch.forEach { _ = $0.inProgress() }
            prefetcher?.keepWaitingAlive()
        }
    }

    // MARK: Outbound

    private func resultMessage(_ outcome: JSONValue) -> OutboundMessage {
        resultMessage(id: outcome["msgId"]?.stringValue ?? "", body: outcome.encoded)
    }

    /// The result message of inbound message `id`, whose outcome is encoded already (the same
    /// bytes as in the store's record, so it is encoded once).
    private func resultMessage(id: String, body: [UInt8]) -> OutboundMessage {
        OutboundMessage(
            subject: subjects.result, body: body,
            headers: [(NATSLink.msgIDHeader, "result:" + id), (NATSSubjects.inboundIDHeader, id)])
    }

    private func deadLetter(_ msg: NATSMessage, _ reason: DeadLetterReason) -> OutboundMessage {
        let position = msg.jetStreamPosition.map { String($0.streamSequence) } ?? "?"
        var headers: [(String, String)] = [
            (NATSLink.msgIDHeader, "dead:" + options.inboundStream + ":" + position),
            (NATSSubjects.reasonHeader, reason.code),
            (NATSSubjects.detailHeader, String(reason.detail.prefix(512)).filter { $0 != "\r" && $0 != "\n" }),
            (NATSSubjects.subjectHeader, msg.subject),
        ]
        if let id = msg.header(NATSLink.msgIDHeader) { headers.append((NATSSubjects.inboundIDHeader, id)) }
        log("dead-lettered \(msg.subject) (stream seq \(position)): \(reason.code): \(reason.detail)")
        return OutboundMessage(subject: subjects.dead, body: msg.data, headers: headers)
    }

    /// Publishes to JetStream until every message has the stream's ack, however long NATS is
    /// away: asynchronously first, then one by one with a wait for each ack for what failed.
    /// Every message has a Nats-Msg-Id, so a copy the stream already holds is dropped there.
    func publishAll(_ messages: [OutboundMessage]) {
        guard !messages.isEmpty else { return }
        _ = nats.takeFailed()
        var sentAll = true
        for m in messages {
            do { try nats.publishAsync(m, maxWaitMs: 5000) } catch { sentAll = false; break }
        }
        if sentAll {
            do { try nats.publishComplete(timeoutMs: 10_000) } catch { sentAll = false }
        }
        let failed = nats.takeFailed()
        if sentAll && failed.isEmpty { return }
        let remaining = sentAll ? messages.filter { $0.msgID.map(failed.contains) ?? true } : messages
        log("publishing \(remaining.count) of \(messages.count) messages failed; publishing them one by one until NATS takes them")
        for m in remaining {
            var attempts = 0
            while true {
                do {
                    try nats.publish(m, timeoutMs: 2000)
                    break
                } catch {
                    attempts += 1
                    if attempts % 20 == 1 { log("publish to \(m.subject): \(error); retrying") }
                    usleep(NATSBridge.retryPauseMs * 1000)
                }
            }
        }
    }

    /// Publishes a finished batch's results and dead letters, then acks its messages and frees
    /// them, on a thread of its own and in batch order. At most two batches wait here, so a
    /// NATS outage stops the fetching too.
    final class BatchFinisher: @unchecked Sendable {
        private unowned let bridge: NATSBridge
        private let lock = Lock()
        private var queue: [([OutboundMessage], [NATSMessage])] = []
        private let ready = DispatchSemaphore(value: 0)
        private let room = DispatchSemaphore(value: 2)

        init(bridge: NATSBridge) {
            self.bridge = bridge
            _ = DetachedThread.start { [self] in loop() }
        }

        func hand(_ outbound: [OutboundMessage], _ batch: [NATSMessage]) {
            room.wait()
            lock.withLock { queue.append((outbound, batch)) }
            ready.signal()
        }

        private func loop() {
            while true {
                ready.wait()
                let (outbound, batch) = lock.withLock { queue.removeFirst() }
                bridge.publishAll(outbound)
                for msg in batch {
                    let s = msg.ack()
                    if s.rawValue != 0 { log("ack: \(NATSError("natsMsg_Ack", s)) (the message will come again and be recognised)") }
                    msg.destroy()
                }
                room.signal()
            }
        }
    }

    // MARK: Invoke

    /// Answers `notifbus.<device>.invoke.<channel>.<method>` with `{"result":…}` or `{"error":{…}}`.
    private func serveInvoke(_ msg: NATSMessage) {
        defer { msg.destroy() }
        guard let reply = msg.reply else {
            log("invoke on \(msg.subject) without a reply subject: dropped")
            return
        }
        func answer(_ body: JSONValue) {
            do { try nats.publishCore(OutboundMessage(subject: reply, body: body.encoded, headers: [])) } catch {
                log("cannot answer invoke on \(reply): \(error)")
            }
        }
        func fail(_ code: String, _ message: String, _ details: JSONValue? = nil) {
            var error: [String: JSONValue] = ["code": .string(code), "message": .string(message)]
            if let details { error["details"] = details }
            answer(["error": .object(error)])
        }
        guard let target = subjects.invokeTarget(msg.subject) else {
            return fail(ErrorCode.badRequest.rawValue, "subject \(msg.subject) is not \(subjects.prefix)invoke.<channel>.<method>")
        }
        let body = msg.data
        var arguments: JSONValue? = nil
        if !body.isEmpty {
            guard let parsed = try? JSONValue(parsing: body) else { return fail(ErrorCode.badJSON.rawValue, "the arguments are not JSON") }
            arguments = parsed
        }
        var timeout: Duration? = nil
        if let text = msg.header(NATSSubjects.timeoutHeader) {
            guard let ms = Int64(text), ms > 0, ms <= 600_000 else {
                return fail(ErrorCode.badRequest.rawValue, "\(NATSSubjects.timeoutHeader) is 1 to 600000")
            }
            timeout = .milliseconds(ms)
        }
        guard let connection = currentBus else { return fail("unavailable", "the device's broker is not reachable") }
        let replySubject = reply
        let link = nats
        Task {
            let body: JSONValue
            do throws(MethodChannelError) {
                let result = try await connection.methodChannel(target.channel).invokeMethod(target.method, arguments: arguments, timeout: timeout)
                body = ["result": result]
            } catch {
                var e: [String: JSONValue]
                switch error {
                case .notImplemented(let m): e = ["code": .string(ErrorCode.notImplemented.rawValue), "message": .string(m)]
                case .platform(let p):
                    e = ["code": .string(p.code), "message": .string(p.message)]
                    if let d = p.details { e["details"] = d }
                case .transport(.timedOut(let m)): e = ["code": .string(ErrorCode.timeout.rawValue), "message": .string(m)]
                case .transport(let t): e = ["code": "unavailable", "message": .string(t.description)]
                }
                body = ["error": .object(e)]
            }
            do { try link.publishCore(OutboundMessage(subject: replySubject, body: body.encoded, headers: [])) } catch {
                log("cannot answer invoke on \(replySubject): \(error)")
            }
        }
    }
}

/// Where the bridge's inbound thread spends its time, logged every 9,000 messages after an idle pause when
/// NOTIFBUS_BRIDGE_PROFILE is set; without it every call returns at once. Used only from
/// the inbound thread.
final class PhaseProfile: @unchecked Sendable {
    enum Phase: Int, CaseIterable {
        case fetch, plan, fsync, broker, handOff
        var label: String {
            ["waiting for a fetched batch", "planning", "store fsync", "waiting for the broker", "waiting for the finisher"][rawValue]
        }
    }

    private let enabled: Bool
    private var totals = [UInt64](repeating: 0, count: Phase.allCases.count)
    private var messages = 0
    private var started: UInt64 = 0

    init(enabled: Bool) { self.enabled = enabled }

    func now() -> UInt64 {
        guard enabled else { return 0 }
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    func add(_ phase: Phase, since start: UInt64) {
        guard enabled else { return }
        let spent = now() - start
        if phase == .fetch && spent > 200_000_000 {
            // Nothing to fetch for a while: the bridge was idle, which is not a cost. Start over.
            totals = totals.map { _ in 0 }
            messages = 0
            started = now()
            return
        }
        totals[phase.rawValue] += spent
    }

    func count(_ n: Int) {
        guard enabled else { return }
        if started == 0 { started = now() }
        messages += n
        guard messages >= 9_000 else { return }
        let wall = Double(now() - started)
        var parts = Phase.allCases.map { "\($0.label) \(Int(Double(totals[$0.rawValue]) / 1000 / Double(messages))) µs" }
        parts.append("wall \(Int(wall / 1000 / Double(messages))) µs")
        log("profile, per message over \(messages): " + parts.joined(separator: ", "))
        totals = totals.map { _ in 0 }
        messages = 0
        started = now()
    }
}
