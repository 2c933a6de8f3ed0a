// The shell around InboundMachine: it turns fetched batches, broker replies, finished
// publishes and the clock into the machine's inputs, and carries its actions out (writes to
// the broker, publishes and acks, keep-alives, reconnects). It decides nothing itself: which
// message goes, comes back, is dead-lettered or acked is the machine's call.
import Dispatch
import Glibc
import NotifBusClient
import NotifBusNATS
import NotifBusProtocol

/// What the fetching and finishing threads hand the inbound thread.
private enum Arrival {
    case fetched([NATSMessage])
    case finished(unit: Int64)
}

/// A queue of arrivals with a bounded wait, filled by other threads.
private final class Mailbox: @unchecked Sendable {
    private let lock = Lock()
    private var items: [Arrival] = []
    private let count = DispatchSemaphore(value: 0)

    func post(_ arrival: Arrival) {
        lock.withLock { items.append(arrival) }
        count.signal()
    }

    /// The oldest arrival, waiting until `deadline` for one.
    func take(until deadline: DispatchTime) -> Arrival? {
        guard count.wait(timeout: deadline) == .success else { return nil }
        return lock.withLock { items.removeFirst() }
    }
}

/// The inbound thread: the machine, and the messages, groups and units it refers to by number.
final class InboundLoop {
    private unowned let bridge: NATSBridge
    private var machine: InboundMachine
    private let mailbox = Mailbox()
    /// Each fetched message by its handle, until its unit is finished.
    private var messages: [Int: NATSMessage] = [:]
    private var nextHandle = 1
    private var unitHandles: [Int64: [Int]] = [:]
    /// Groups written to the broker, oldest first, with their replies.
    private var groups: [(id: Int64, replies: PipelinedReplies)] = []
    private var needBroker = false
    private var failedConnects = 0
    private let fetcher: Fetcher
    private let finisher: Finisher
    /// With NOTIFBUS_BRIDGE_PROFILE set, where the inbound thread's time goes (logged).
    private let profile = PhaseProfile(enabled: getenv("NOTIFBUS_BRIDGE_PROFILE") != nil)

    init(bridge: NATSBridge, subscription: OpaquePointer, recovering: Bool) {
        self.bridge = bridge
        let options = bridge.options
        var settings = InboundMachine.Settings(
            device: options.device, stream: options.inboundStream, inflight: options.inflight, ackWaitMs: options.ackWaitMs)
        settings.layout = options.layout
        machine = InboundMachine(settings: settings)
        let mailbox = self.mailbox
        fetcher = Fetcher(bridge: bridge, subscription: subscription, recovering: recovering) { mailbox.post(.fetched($0)) }
        finisher = Finisher(bridge: bridge) { mailbox.post(.finished(unit: $0)) }
    }

    func run(maxFrame: Int) -> Never {
        var actions = handle(.brokerConnected(maxFrame: maxFrame))
        while true {
            var index = 0
            let started = profile.now()
            while index < actions.count {
                actions += perform(actions[index])
                index += 1
            }
            profile.add(.actions, since: started)
            actions = nextInput()
        }
    }

    // MARK: Inputs

    /// Waits for the next input: an arrival, the oldest group's replies, a reconnection, or
    /// the machine's deadline. Arrivals that came meanwhile go first.
    private func nextInput() -> [InboundMachine.Action] {
        if let arrival = mailbox.take(until: .now()) { return feed(arrival) }
        let deadline = machine.deadline.map { ms in DispatchTime.now() + .milliseconds(Int(max(0, ms - InboundLoop.now()))) }
        if needBroker {
            if let maxFrame = bridge.connectBus(attempts: 1, warn: failedConnects == 0) {
                needBroker = false
                if failedConnects > 0 { log("broker reachable again") }
                failedConnects = 0
                return handle(.brokerConnected(maxFrame: maxFrame))
            }
            failedConnects += 1
            let retry = DispatchTime.now() + .milliseconds(500)
            if let arrival = mailbox.take(until: min(deadline ?? retry, retry)) { return feed(arrival) }
            return handle(.tick)
        }
        if let oldest = groups.first {
            let started = profile.now()
            let replies = oldest.replies.waitAllRaw(until: deadline ?? .distantFuture)
            profile.add(.broker, since: started)
            guard let replies else { return handle(.tick) }
            groups.removeFirst()
            return handle(.answers(group: oldest.id, replies.map(InboundLoop.answer)))
        }
        let started = profile.now()
        let arrival = mailbox.take(until: deadline ?? .distantFuture)
        profile.add(.fetch, since: started)
        return arrival.map(feed) ?? handle(.tick)
    }

    private func feed(_ arrival: Arrival) -> [InboundMachine.Action] {
        switch arrival {
        case .fetched(let batch):
            profile.count(batch.count)
            let inbound = batch.map { msg -> InboundMachine.Message in
                let handle = nextHandle
                nextHandle += 1
                messages[handle] = msg
                return InboundMachine.Message(
                    sequence: msg.jetStreamPosition?.streamSequence ?? 0, subject: msg.subject, msgID: msg.header(NATSLink.msgIDHeader),
                    body: msg.data, handle: handle)
            }
            return handle(.fetched(inbound))
        case .finished(let unit):
            for handle in unitHandles.removeValue(forKey: unit) ?? [] { messages.removeValue(forKey: handle)?.destroy() }
            return handle(.finished(unit: unit))
        }
    }

    private func handle(_ input: InboundMachine.Input) -> [InboundMachine.Action] {
        let started = profile.now()
        defer { profile.add(.machine, since: started) }
        return machine.handle(input, now: InboundLoop.now())
    }

    /// The machine's view of a reply: its result as the broker wrote it, the broker's refusal,
    /// or nothing (the connection closed, or the reply did not come in time).
    static func answer(_ reply: PipelinedReplies.RawReply) -> InboundMachine.Answer {
        switch reply {
        case .success(let result): return .result(result)
        case .failure(.broker(let e)): return .refused(code: e.code, message: e.message, details: e.details?.encoded)
        case .failure: return .lost
        }
    }

    /// Milliseconds on the monotonic clock.
    static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    // MARK: Actions

    /// Carries out one action; returns what the machine said to the inputs it caused.
    private func perform(_ action: InboundMachine.Action) -> [InboundMachine.Action] {
        switch action {
        case .fetch:
            fetcher.request()
        case .send(let group, let requests):
            guard let bus = bridge.currentBus else { preconditionFailure("the machine sent with no broker connection") }
            let encoded = requests.map { EncodedRequest(op: $0.op, members: $0.members) }
            groups.append((group, bus.pipeline(encoded: encoded, timeout: NATSBridge.postTimeout)))
        case .finish(let unit, let publish, let ack):
            unitHandles[unit] = ack
            finisher.hand(unit: unit, publish: publish, ack: ack.map { messages[$0]! })
        case .keepAlive(let handles):
            for handle in handles { _ = messages[handle]?.inProgress() }
        case .reconnect:
            // Every request still at the broker fails with the connection; the machine sends
            // each again, with its key, once connected anew.
            bridge.dropBus()
            needBroker = true
            var follow: [InboundMachine.Action] = []
            for group in groups {
                let replies =
                    group.replies.waitAllRaw(until: .now() + .seconds(10))
                    ?? Array(repeating: .failure(.connectionLost("closed")), count: group.replies.count)
                follow += handle(.answers(group: group.id, replies.map(InboundLoop.answer)))
            }
            groups.removeAll()
            return follow
        case .log(let line):
            log(line)
        }
        return []
    }
}

/// Fetches on a thread of its own, one batch each time the machine asks, so that the next
/// batch is on its way while the current one is applied. After a restart that found messages
/// of an earlier run unacked, its first fetch waits for their redelivery, then puts the
/// consumer's AckWait back.
private final class Fetcher: @unchecked Sendable {
    private let wanted = DispatchSemaphore(value: 0)

    init(bridge: NATSBridge, subscription: OpaquePointer, recovering: Bool, deliver: @escaping @Sendable ([NATSMessage]) -> Void) {
        nonisolated(unsafe) let sub = subscription
        let nats = bridge.nats, size = bridge.options.batch, wait = bridge.options.fetchWaitMs
        _ = DetachedThread.start { [self] in
            var restore = recovering
            if recovering { usleep(NATSBridge.recoveryPauseMs * 1000) }
            while true {
                wanted.wait()
                while true {
                    var batch: [NATSMessage] = []
                    do { batch = try nats.fetch(sub, batch: size, timeoutMs: wait) } catch {
                        if nats.isConnected { log("fetch: \(error)") }
                        usleep(NATSBridge.retryPauseMs * 1000)
                    }
                    if !batch.isEmpty { deliver(batch) }
                    if restore {
                        restore = false
                        bridge.restoreAckWait()
                    }
                    if !batch.isEmpty { break }
                }
            }
        }
    }

    func request() { wanted.signal() }
}

/// Publishes each finished unit's results and dead letters, waits for JetStream's acks, then
/// acks the unit's messages and waits for the consumer to confirm the acks, on a thread of
/// its own and in unit order.
private final class Finisher: @unchecked Sendable {
    private let lock = Lock()
    private var queue: [(unit: Int64, publish: [OutboundMessage], ack: [NATSMessage])] = []
    private let ready = DispatchSemaphore(value: 0)

    init(bridge: NATSBridge, done: @escaping @Sendable (Int64) -> Void) {
        _ = DetachedThread.start { [self] in
            while true {
                ready.wait()
                let job = lock.withLock { queue.removeFirst() }
                bridge.publishAll(job.publish)
                bridge.ackAll(job.ack)
                done(job.unit)
            }
        }
    }

    func hand(unit: Int64, publish: [OutboundMessage], ack: [NATSMessage]) {
        lock.withLock { queue.append((unit, publish, ack)) }
        ready.signal()
    }
}
