// The broker as a pure state machine: inputs (a connection arrived, a frame arrived, a
// connection closed, time passed, a durable write finished, shut down) go in, and each
// appends the actions it causes (send, close, persist) to the list its caller passes. It
// never reads a clock, never touches a descriptor and never blocks.
//
// Connection lifecycle:
//
//     connect ──refused (uid, too many)──▶ error frame, close
//        │
//        ▼
//     ungreeted ──hello(1)──▶ greeted ──frame_too_large / unsupported──▶ closed
//        │  └─ any other op: hello_required, close          │
//        └──────────────── disconnected ◀───────────────────┘  (state dropped at once)
import NotifBusProtocol

/// The whole broker state: clients, observers and chains, the event queue, method
/// channels, slots and categories.
public struct Broker {
    public let configuration: BrokerConfiguration
    let startedAt: Instant

    var clients: [ConnectionID: ClientRecord] = [:]
    /// Greeting deadlines in accept order (one timeout for all keeps them sorted).
    var helloDeadlines = FIFO<(deadline: Instant, connection: ConnectionID)>()
    var monitors: [ConnectionID] = []
    var shuttingDown = false

    // Observers and ordered chains.
    var observers: [Int: ObserverRecord] = [:]
    /// Per event name, observer ids in chain order: priority, then subscription order.
    var chains: [String: [Int]] = [:]
    var observerKeys: [String: Int] = [:]
    var nextObserverID = 1

    // The single broker-wide event queue.
    var queue = FIFO<QueuedPost>()
    /// Payload bytes of the posts in `queue`.
    var queuedBytes = 0
    var current: RunningEvent? = nil
    var nextEventID: Int64 = 1

    // Method channels.
    var handlers: [Int: HandlerRecord] = [:]
    var routes: [HandlerKey: Int] = [:]
    var nextHandlerID = 1
    var calls: [Int64: PendingCall] = [:]
    /// Call deadlines in creation order: one timeout for all calls keeps them sorted.
    var callDeadlines = FIFO<(deadline: Instant, call: Int64)>()
    var nextCallID: Int64 = 1

    // Slots.
    var slots: [String: RawJSON] = [:]
    var slotBytes = 0
    var takeWaiters: [Int: TakeWaiter] = [:]
    var takeQueues: [String: [Int]] = [:]
    var takeDeadlines = DeadlineHeap()
    var nextTakeID = 1

    // Durable writes in flight (Broker+Writes.swift).
    var writes: [WriteID: PendingWrite] = [:]
    var busyKeys: Set<StateKey> = []
    var nextWriteID: WriteID = 1
    var reservedSlots = 0
    var reservedSlotBytes = 0
    /// Requests admitted so far: the broker-wide order of arrival of held requests.
    var arrivals = 0
    /// Set while `resumeWaiting` runs, and when it is asked to run again meanwhile.
    var resuming = false
    var resumeRequested = false
    /// Connections with requests held back, in the order they began waiting.
    var waitingClients: [ConnectionID] = []
    /// Launch retentions waiting for a write on `launch` to finish.
    var waitingRetentions = FIFO<RunningEvent>()
    /// Set once shutdown has closed every connection (after the last write finished).
    var closedForShutdown = false

    var categories = CategorySet.empty
    public internal(set) var counters = BrokerCounters()
    /// Set by the transport; reported by `status`.
    public var buffers = BufferFigures()

    /// The caller's action list while one input runs (swapped in from `into:` and back
    /// out before the input returns): between inputs it is empty, so every action reaches
    /// the caller of the input that caused it, and no buffer is allocated per input.
    var actions: [BrokerAction] = []

    /// A broker starting at `now`, with slots and categories restored from disk.
    public init(configuration: BrokerConfiguration, now: Instant,
                slots restoredSlots: [String: RawJSON] = [:], categories restoredCategories: CategorySet? = nil) {
        self.configuration = configuration
        self.startedAt = now
        for (name, value) in restoredSlots {
            slots[name] = value
            slotBytes += value.count
        }
        if let restoredCategories { categories = restoredCategories }
    }

    // MARK: Inputs

    /// Whether a peer of `uid` may use this broker: its owner, root and `allowedUIDs`.
    public func admits(uid: UInt32) -> Bool {
        uid == configuration.brokerUID || uid == 0 || configuration.allowedUIDs.contains(uid)
    }

    // Each input appends the actions it causes, in order, to `actions` (the caller's list,
    // which it then carries out and empties; passing the same array each time reuses its
    // storage).

    /// A socket was accepted. Refused peers get one error frame and are closed.
    public mutating func connect(_ id: ConnectionID, credentials: PeerCredentials, now: Instant, into actions: inout [BrokerAction]) {
        swap(&self.actions, &actions)
        defer { swap(&self.actions, &actions) }
        let uid = credentials.uid
        guard admits(uid: uid) else {
            return refuse(id, nil, .session(.forbidden(uid: uid)), now: now)
        }
        guard clients.count < configuration.maxClients else {
            return refuse(id, nil, .session(.tooManyClients(max: configuration.maxClients)), now: now)
        }
        clients[id] = ClientRecord(id: id, credentials: credentials)
        helloDeadlines.append((now &+ UInt64(configuration.helloTimeoutMs) * 1_000_000, id))
    }

    /// One complete frame body arrived on `id`.
    public mutating func receive(_ body: UnsafeRawBufferPointer, from id: ConnectionID, now: Instant, into actions: inout [BrokerAction]) {
        swap(&self.actions, &actions)
        defer { swap(&self.actions, &actions) }
        guard let client = clients[id] else { return }
        // Any frame shows the peer is there again (decision 30).
        client.unresponsive = false
        let decoded = MessageDecoder.decode(body)
        if !monitors.isEmpty { mirrorInbound(body, from: id, decoded) }
        switch decoded {
        case .badJSON(let reason):
            refuse(id, nil, .badJSON(reason), now: now)
        case .rejected(let rejection, let isHello):
            guard client.greeted || isHello else { return refuse(id, rejection.id, .session(.helloRequired), now: now) }
            if isHello && client.greeted, let rid = rejection.id {
                // A second hello is refused as such, before its own fields are judged.
                return admit(.rejected(rid, .session(.alreadyGreeted)), from: id, now: now)
            }
            admit(.rejected(rejection.id, .rejected(rejection.code, rejection.message)), from: id, now: now)
        case .decoded(let inbound, let isHello):
            guard client.greeted || isHello else {
                if case .request(let requestID, _) = inbound { return refuse(id, requestID, .session(.helloRequired), now: now) }
                return refuse(id, nil, .session(.helloRequired), now: now)
            }
            switch inbound {
            case .request(let requestID, let request): admit(.request(requestID, request), from: id, now: now)
            case .answer(let answer): handleAnswer(answer, from: id, now: now)
            case .callReturn(let ret): handleReturn(ret, from: id)
            }
        }
    }

    /// The length prefix on `id` was 0 or above `maxFrame`: the stream is out of step.
    public mutating func receiveOversizedFrame(from id: ConnectionID, length: UInt32, now: Instant, into actions: inout [BrokerAction]) {
        swap(&self.actions, &actions)
        defer { swap(&self.actions, &actions) }
        guard clients[id] != nil else { return }
        refuse(id, nil, .session(.frameOutOfRange(length: length, max: configuration.maxFrame)), now: now)
    }

    /// The peer closed `id`, or the transport gave up on it.
    public mutating func disconnected(_ id: ConnectionID, now: Instant, into actions: inout [BrokerAction]) {
        swap(&self.actions, &actions)
        defer { swap(&self.actions, &actions) }
        guard clients[id] != nil else { return }
        dropClient(id, now: now)
    }

    /// The transport wrote (or failed to write) the record of `.persist(write, …)`. Only now
    /// does the change take effect and its request get its answer; a failed write changes
    /// nothing and is answered `storage_failed`. Requests that waited for it go on.
    public mutating func persisted(_ write: WriteID, written: Bool, now: Instant, into actions: inout [BrokerAction]) {
        swap(&self.actions, &actions)
        defer { swap(&self.actions, &actions) }
        guard let pending = writes.removeValue(forKey: write) else { return }
        busyKeys.remove(pending.key)
        reservedSlots -= pending.reservedSlots
        reservedSlotBytes -= pending.reservedBytes
        complete(pending.completion, written: written, now: now)
        resumeWaiting(now: now)
        closeIfShutDown()
    }

    /// Time passed: expire hops, calls and waiting takes whose deadline is at or before `now`.
    public mutating func tick(now: Instant, into actions: inout [BrokerAction]) {
        swap(&self.actions, &actions)
        defer { swap(&self.actions, &actions) }
        while let front = helloDeadlines.first, front.deadline <= now {
            _ = helloDeadlines.popFirst()
            guard let client = clients[front.connection], !client.greeted else { continue }
            refuse(front.connection, nil, .session(.helloTimedOut(ms: configuration.helloTimeoutMs)), now: now)
        }
        hopTimedOut(now: now)
        while let front = callDeadlines.first, front.deadline <= now {
            _ = callDeadlines.popFirst()
            guard let call = calls.removeValue(forKey: front.call) else { continue }
            counters.callTimeouts += 1
            clients[call.handlerClient]?.callsReceived.remove(front.call)
            clients[call.invoker]?.callsInvoked -= 1
            refuse(call.invoker, call.requestID, .channel(.timedOut(ms: configuration.callTimeoutMs)), now: now)
        }
        while let top = takeDeadlines.min, top.deadline <= now {
            _ = takeDeadlines.popMin()
            guard let waiter = removeTakeWaiter(top.id) else { continue }
            replyValue(to: waiter.client, waiter.requestID, nil)
        }
    }

    /// SIGINT or SIGTERM: answer everything pending with `shutting_down` and close every
    /// connection after its output is flushed. Durable writes already in flight still
    /// finish and are answered; requests held back behind them start no more and are
    /// answered `shutting_down` after them, in their connection's order.
    public mutating func shutdown(now: Instant, into actions: inout [BrokerAction]) {
        swap(&self.actions, &actions)
        defer { swap(&self.actions, &actions) }
        guard !shuttingDown else { return }
        shuttingDown = true
        if let cur = current {
            current = nil
            refuse(cur.post.poster, cur.post.requestID, .session(.shuttingDown), now: now)
        }
        while let post = dequeue() {
            refuse(post.poster, post.requestID, .session(.shuttingDown), now: now)
        }
        for (_, call) in calls.sorted(by: { $0.key < $1.key }) {
            refuse(call.invoker, call.requestID, .session(.shuttingDown), now: now)
        }
        calls.removeAll()
        callDeadlines.removeAll()
        // A take still held behind its connection's requests is answered in their order.
        for (_, waiter) in takeWaiters.sorted(by: { $0.key < $1.key }) where !waiter.held {
            refuse(waiter.client, waiter.requestID, .session(.shuttingDown), now: now)
        }
        takeWaiters.removeAll()
        takeQueues.removeAll()
        takeDeadlines = DeadlineHeap()
        helloDeadlines.removeAll()
        resumeWaiting(now: now)
        closeIfShutDown()
    }

    /// Closes every connection once shutdown has begun and no durable write is in flight, so
    /// that each write's request, and each request waiting behind one, still gets its answer.
    mutating func closeIfShutDown() {
        guard shuttingDown, !closedForShutdown, writes.isEmpty, waitingRetentions.isEmpty else { return }
        closedForShutdown = true
        for id in clients.keys.sorted() { actions.append(.close(id)) }
    }

    // MARK: Outputs

    /// The earliest time at which `tick` has work, if any.
    public var nextDeadline: Instant? {
        var best: Instant? = nil
        if let cur = current, cur.hopObserver != nil { best = cur.hopDeadline }
        if let h = helloDeadlines.first { best = Swift.min(best ?? h.deadline, h.deadline) }
        if let c = callDeadlines.first { best = Swift.min(best ?? c.deadline, c.deadline) }
        if let t = takeDeadlines.min { best = Swift.min(best ?? t.deadline, t.deadline) }
        return best
    }

    /// Whether any connection is still known.
    public var hasClients: Bool { !clients.isEmpty }

    // MARK: Dispatch

    mutating func handle(_ request: Request, id rid: RequestID, from c: ConnectionID, now: Instant) {
        switch request {
        case .hello(let version, let name):
            guard clients[c]?.greeted == false else { return refuse(c, rid, .session(.alreadyGreeted), now: now) }
            guard version == protocolVersion else { return refuse(c, rid, .session(.unsupportedProtocol(version)), now: now) }
            clients[c]?.greeted = true
            clients[c]?.name = name
            send(.reply(rid, .hello(server: configuration.serverName, client: c, maxFrame: configuration.maxFrame)), to: c)
        case .ping:
            send(.reply(rid, .empty), to: c)
        case .subscribe(let events, let priority, let key, let resume):
            subscribe(events: events, priority: priority, key: key, resume: resume, rid: rid, from: c, now: now)
        case .unsubscribe(let target):
            unsubscribe(target, rid: rid, from: c, now: now)
        case .post(let name, let payload, let profile):
            post(name: name, payload: payload, profile: profile, rid: rid, from: c, now: now)
        case .handle(let channel, let method, let resume):
            handleChannel(HandlerKey(channel: channel, method: method), resume: resume, rid: rid, from: c, now: now)
        case .unhandle(let handler):
            unhandle(handler, rid: rid, from: c, now: now)
        case .invoke(let channel, let method, let arguments):
            invoke(channel: channel, method: method, arguments: arguments, rid: rid, from: c, now: now)
        case .put(let slot, let value):
            put(slot: slot, value: value, rid: rid, from: c, now: now)
        case .take(let slot, let wait):
            take(slot: slot, waitMs: wait, rid: rid, from: c, now: now)
        case .peek(let slot):
            replyValue(to: c, rid, slots[slot])
        case .setCategories(let set):
            beginWrite(.categories, .categories(set.raw), then: .categories(c, rid, set))
        case .getCategories:
            send(.reply(rid, .categories(categories.raw)), to: c)
        case .status(let page):
            let frame = statusReply(rid, page: page, now: now)
            emit(to: c, frame)
        case .monitor:
            if clients[c]?.monitoring == false {
                clients[c]?.monitoring = true
                monitors.append(c)
            }
            send(.reply(rid, .empty), to: c)
        }
    }

    // MARK: Connection teardown

    // `hello_required` echoes the refused request's id when it had a usable one (an answer,
    // or a frame whose id is missing or unusable, gets `"id": null`).

    /// Drops `c`'s state and asks the transport to flush and close it.
    mutating func close(_ c: ConnectionID, now: Instant) {
        dropClient(c, now: now)
        actions.append(.close(c))
    }

    /// Removes everything `c` owned: observers (ending its hop as `gone`), handlers, calls
    /// it was serving (`handler_gone` to their invokers), calls it made, waiting takes.
    mutating func dropClient(_ c: ConnectionID, now: Instant) {
        guard let client = clients.removeValue(forKey: c) else { return }
        if client.monitoring { monitors.removeAll { $0 == c } }
        for h in client.handlers {
            if let record = handlers.removeValue(forKey: h), routes[record.key] == h { routes[record.key] = nil }
        }
        for callID in client.callsReceived.sorted() {
            guard let call = calls.removeValue(forKey: callID) else { continue }
            clients[call.invoker]?.callsInvoked -= 1
            refuse(call.invoker, call.requestID, .channel(.handlerGone), now: now)
        }
        // A take of its still held back kept values for that slot waiting: they may go on.
        let heldTakes = client.takes.contains { takeWaiters[$0]?.held == true }
        for t in client.takes { _ = removeTakeWaiter(t) }
        if heldTakes { resumeWaiting(now: now) }
        for o in client.observers { removeObserver(o, now: now, pump: false) }
        pump(now: now)
    }
}
