// The NATS bridge: its streams and durable consumer, its broker connection, invokes, and the
// publishing of what JetStream must keep. The exactly-once logic is InboundMachine's
// (NotifBusNATS); NATSBridge+Inbound.swift carries its actions out. Nothing here decides
// whether a message is applied, sent again or acked.
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
    private let busLock = Lock()
    private var bus: NotifBusConnection? = nil
    private var exporter: EventExporter? = nil
    /// The whole chain of a post, queue wait included, may take this long before the bridge
    /// gives up on its reply, closes the connection and sends the post again with its key.
    static let postTimeout: Duration = .seconds(600)
    /// The duplicate window of the streams the bridge creates: a result republished after a
    /// crash or an outage shorter than this is stored once (JetStream's default is 2 minutes).
    static let duplicateWindowMs: Int64 = 10 * 60 * 1000
    /// A failed fetch or publish is retried after this pause.
    static let retryPauseMs: UInt32 = 250
    /// While a restarted bridge has JetStream redeliver what its predecessor held, the
    /// consumer's AckWait is this short (Protocol/NATS.md §4)...
    static let recoveryAckWaitMs: Int64 = 100
    /// ...and the first fetch waits this long, so that the redeliveries come first.
    static let recoveryPauseMs: UInt32 = 250

    init(options: BridgeOptions) throws(NATSError) {
        self.options = options
        subjects = NATSSubjects(device: options.device, layout: options.layout)
        nats = try NATSLink(urls: options.urls, name: "notifbus-bridge " + options.device, log: { log($0) })
    }

    /// The broker connection, if there is one now.
    var currentBus: NotifBusConnection? { busLock.withLock { bus } }

    // MARK: Start

    /// Sets up streams, consumer, invoke subscription and export, then runs the inbound loop forever.
    func run() -> Never {
        let (sub, held) = waitForConsumer()
        do {
            try nats.subscribe(subjects.invokeWildcard) { [self] msg in serveInvoke(msg) }
        } catch {
            log("cannot subscribe to \(subjects.invokeWildcard): \(error)")
            exit(1)
        }
        if !options.exports.isEmpty { exporter = EventExporter(bridge: self, events: Set(options.exports)) }
        let maxFrame = connectBus()!
        log("bridging device \(options.device): stream \(options.inboundStream), results to \(options.outboundStream)")
        if held > 0 { log("the consumer holds \(held) messages of an earlier run; they are redelivered now") }
        InboundLoop(bridge: self, subscription: sub, recovering: held > 0).run(maxFrame: maxFrame)
    }

    /// Creates the streams when asked and the durable consumer when missing, binds to it, and
    /// when an earlier run left messages unacked, shortens the consumer's AckWait so that
    /// JetStream redelivers them now (the inbound loop puts it back after its first fetch).
    /// Retries while JetStream is unreachable or electing leaders.
    private func waitForConsumer() -> (OpaquePointer, held: Int) {
        var lastError = ""
        while true {
            do {
                if options.createStream {
                    let shared = options.layout == .shared
                    try nats.createStream(
                        options.inboundStream, subjects: subjects.inboundSubjects, replicas: options.replicas,
                        duplicateWindowMs: NATSBridge.duplicateWindowMs,
                        limits: shared ? .init(workQueue: true, maxPerSubject: options.maxPerSubject, maxAgeMs: options.maxAgeMs) : nil)
                    try nats.createStream(
                        options.outboundStream, subjects: subjects.outboundSubjects, replicas: options.replicas,
                        duplicateWindowMs: NATSBridge.duplicateWindowMs,
                        limits: shared ? .init(workQueue: false, maxPerSubject: nil, maxAgeMs: options.maxAgeMs) : nil)
                }
                let configured = options.ackWaitMs
                let held = try nats.ensureConsumer(
                    stream: options.inboundStream, durable: options.durable, filter: subjects.consumerFilter,
                    ackWaitMs: { $0 > 0 ? NATSBridge.recoveryAckWaitMs : configured }, maxAckPending: options.maxAckPending)
                return (try nats.pullSubscribe(stream: options.inboundStream, durable: options.durable), held)
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

    /// Puts the consumer's AckWait back after the redeliveries of a restart came, retrying a
    /// while: a consumer left with the short one only redelivers sooner, which the keys make harmless.
    func restoreAckWait() {
        for attempt in 1...20 {
            do {
                try nats.setAckWait(stream: options.inboundStream, durable: options.durable, ackWaitMs: options.ackWaitMs)
                return
            } catch {
                if attempt == 1 || attempt == 20 { log("cannot set the consumer's AckWait back: \(error)") }
                usleep(NATSBridge.retryPauseMs * 1000)
            }
        }
    }

    // MARK: The broker connection

    /// Connects to the broker, retrying every half second for `attempts` tries (forever when
    /// nil), and says so once when it cannot and `warn` is set; returns the broker's
    /// maxFrame, or nil when the tries ran out.
    func connectBus(attempts: Int? = nil, warn: Bool = true) -> Int? {
        var tried = 0
        while attempts.map({ tried < $0 }) ?? true {
            tried += 1
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
                    break
                }
                busLock.withLock { bus = connection }
                return connection.maxFrame
            case .failure(let error):
                if warn && tried == 1 { log("broker unreachable (\(error)); not acking until it is back") }
            }
            if attempts.map({ tried < $0 }) ?? true { usleep(500_000) }
        }
        return nil
    }

    /// Closes the broker connection: requests in flight on it fail at once.
    func dropBus() {
        let connection = busLock.withLock { () -> NotifBusConnection? in
            defer { bus = nil }
            return bus
        }
        connection?.close()
    }

    // MARK: Outbound

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

    /// An ack the consumer did not confirm is sent again after this long.
    static let ackRetryMs: Int64 = 1000

    /// Acks `messages` and waits until the consumer confirmed every ack, sending again those
    /// that were not (an ack sent while the consumer's leader changes reaches no one). Gives
    /// up after AckWait: by then JetStream redelivers an unacked message, and the machine acks
    /// its redelivery without applying it again.
    func ackAll(_ messages: [NATSMessage]) {
        let report = nats.ackConfirmed(messages, retryMs: NATSBridge.ackRetryMs, timeoutMs: options.ackWaitMs)
        if report.unconfirmed > 0 {
            log("\(report.unconfirmed) of \(messages.count) acks not confirmed within AckWait; they come again and are acked then")
        } else if report.resent > 0 {
            log("\(report.resent) acks sent again before the consumer confirmed them")
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
        case fetch, machine, broker, actions
        var label: String {
            ["waiting for a fetched batch", "the exactly-once machine", "waiting for the broker", "carrying out actions"][rawValue]
        }
    }

    private let enabled: Bool
    private var totals = [UInt64](repeating: 0, count: Phase.allCases.count)
    private var messages = 0
    private var batches = 0
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
            batches = 0
            started = now()
            return
        }
        totals[phase.rawValue] += spent
    }

    func count(_ n: Int) {
        guard enabled else { return }
        if started == 0 { started = now() }
        messages += n
        batches += 1
        guard messages >= 9_000 else { return }
        let wall = Double(now() - started)
        var parts = Phase.allCases.map { "\($0.label) \(Int(Double(totals[$0.rawValue]) / 1000 / Double(messages))) µs" }
        parts.append("wall \(Int(wall / 1000 / Double(messages))) µs")
        log("profile, per message over \(messages) in \(batches) fetched batches: " + parts.joined(separator: ", "))
        totals = totals.map { _ in 0 }
        messages = 0
        batches = 0
        started = now()
    }
}
