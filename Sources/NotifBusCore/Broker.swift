// The broker as a pure state machine: inputs (a connection arrived, a frame arrived, a
// connection closed, time passed, a durable write finished, shut down) go in, and each
// appends the actions it causes (send, close, persist) to the list its caller passes. It
// never reads a clock, never touches a descriptor and never blocks. Each registry keeps its
// own records (ClientSessions, ObserverRegistry, EventQueue, ChannelRouter, SlotStore,
// CategoryRegistry); the broker decides, answers through OutboundFrame, and refuses
// through BrokerError.
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

/// The whole broker: its registries (sessions, observers, the event queue, channels,
/// slots, categories) composed with the durable writes in flight, the requests held behind
/// them, and the counters. Not copyable: there is one of it, which its transport keeps, and
/// every input and every question (`wantsInput`, `pendingWrite`) reaches it where it is,
/// mutating or borrowed, never through a copy of the whole value.
public struct Broker: ~Copyable {
    public let configuration: BrokerConfiguration
    let startedAt: Instant
    /// `--hop-timeout` in nanoseconds, reckoned once: every step of a chain asks it.
    let hopBudget: UInt64

    var sessions = ClientSessions()
    var observers = ObserverRegistry()
    var events = EventQueue()
    var channels = ChannelRouter()
    var slots: SlotStore
    var categories = CategoryRegistry()
    var shuttingDown = false

    // Durable writes in flight, and what waits behind them (Broker+Writes.swift).
    var writes = WriteLedger()
    var held = HeldRequests()
    /// Set once shutdown has closed every connection (after the last write finished).
    var closedForShutdown = false

    public internal(set) var counters = BrokerCounters()
    /// Set by the transport; reported by `status`.
    public var buffers = BufferFigures()

    /// The caller's action list while one input runs (swapped in from `into:` and back
    /// out before the input returns): between inputs it is empty, so every action reaches
    /// the caller of the input that caused it, and no buffer is allocated per input.
    var actions: [BrokerAction] = []
    /// Every outgoing frame, encoded in place, one after another, until the transport calls
    /// `outputTaken()`; a `.send` names its frame's range here. A class, which the transport
    /// reads frames through.
    public let output = OutputStore()

    /// Idempotency keys and their outcomes (Broker+Once.swift). Kept after the fields of
    /// the per-frame path, which then stay where they were.
    var once: OnceTable
    /// The wall clock when the broker started, in milliseconds since 1970: keys' ages are
    /// counted from it on the monotonic clock of the inputs (`wallMs(_:)`).
    let wallAtStart: Int64
    /// The name of the last post the direct path decoded, as text (NameCache.swift).
    var postNames = NameCache()

    /// A broker starting at `now` (monotonic) and `wallClockMs` (the wall clock, in
    /// milliseconds since 1970), with slots, categories and idempotency keys restored from
    /// disk. Restored keys come in the order they were recorded; a key whose post was running
    /// when the broker stopped answers its repeats `interrupted`.
    public init(
        configuration: BrokerConfiguration, now: Instant, wallClockMs: Int64 = 0,
        slots restoredSlots: [String: RawJSON] = [:], categories restoredCategories: CategorySet? = nil,
        once restoredKeys: [OnceRecord] = []
    ) {
        self.configuration = configuration
        self.startedAt = now
        hopBudget = UInt64(configuration.hopTimeoutMs) * 1_000_000
        self.wallAtStart = wallClockMs
        slots = SlotStore(restoring: restoredSlots)
        if let restoredCategories { categories.set = restoredCategories }
        once = OnceTable(limits: configuration.once, seed: configuration.onceSeed)
        restore(restoredKeys, now: now)
    }

    // MARK: Inputs

    /// Whether a peer of `uid` may use this broker: its owner, root and `allowedUIDs`.
    public func admits(uid: UInt32) -> Bool {
        uid == configuration.brokerUID || uid == 0 || configuration.allowedUIDs.contains(uid)
    }

    // Each input appends the actions it causes, in order, to `actions` (the caller's list,
    // which it then carries out and empties; passing the same array each time reuses its
    // storage).

    /// Runs one input: the caller's list becomes the list its actions go to (`self.actions`),
    /// and goes back to the caller with them when `body` returns. Every input changes hands
    /// through it (`receiveFrame` writes it out): between inputs `self.actions` is empty, and
    /// no list is allocated per input.
    @inline(__always)
    mutating func input<R>(_ actions: inout [BrokerAction], _ body: (inout Broker) -> R) -> R {
        swap(&self.actions, &actions)
        defer { swap(&self.actions, &actions) }
        return body(&self)
    }

    /// A socket was accepted. Refused peers get one error frame and are closed.
    public mutating func connect(_ id: ConnectionID, credentials: PeerCredentials, now: Instant, into actions: inout [BrokerAction]) {
        input(&actions) { $0.accept(id, credentials: credentials, now: now) }
    }

    private mutating func accept(_ id: ConnectionID, credentials: PeerCredentials, now: Instant) {
        let uid = credentials.uid
        guard admits(uid: uid) else {
            return refuse(id, nil, .session(.forbidden(uid: uid)), now: now)
        }
        guard sessions.count < configuration.maxClients else {
            return refuse(id, nil, .session(.tooManyClients(max: configuration.maxClients)), now: now)
        }
        sessions.add(id, credentials: credentials, helloDeadline: now &+ UInt64(configuration.helloTimeoutMs) * 1_000_000)
    }

    /// One complete frame body arrived on `id`. The decoded message's relayed user data
    /// (`JSONBytes`) are views of `body`: every frame built from them is built within this
    /// call, and whatever must outlive it (a request held back, a queued post's payload) is
    /// copied first.
    public mutating func receive(_ body: UnsafeRawBufferPointer, from id: ConnectionID, now: Instant, into actions: inout [BrokerAction]) {
        _ = receiveFrame(body, from: id, now: now, into: &actions)
    }

    /// `receive`, returning `wantsInput(from: id)` afterwards, read from the record at hand:
    /// the transport asks after every frame.
    public mutating func receiveFrame(_ body: UnsafeRawBufferPointer, from id: ConnectionID, now: Instant, into actions: inout [BrokerAction]) -> Bool
    {
        // `input(&actions) { ... }` written out: in a closure the per-event ops are not
        // inlined into the frame's dispatch (core-invoke: 47 instructions more per call).
        swap(&self.actions, &actions)
        defer { swap(&self.actions, &actions) }
        guard let client = sessions[id] else { return true }
        receive(body, from: client, now: now)
        // A client the frame ended is no longer held back (`wantsInput` of a gone client).
        return client.waiting.count < configuration.maxHeldBackPerConnection || sessions[id] !== client
    }

    /// `receive` for the record of the connection the frame came from.
    @inline(__always)
    private mutating func receive(_ body: UnsafeRawBufferPointer, from client: ClientRecord, now: Instant) {
        let id = client.id
        // Any frame shows the peer is there again (decision 30).
        client.unresponsive = false
        // The per-event frames of a greeted connection are acted on as the direct path
        // decodes them, monitored or not (a monitor is shown the frame first, as below);
        // anything else takes the full decoder.
        var frame = DirectFrame.ping(id: 0)
        if client.greeted && frame.decode(body) {
            if _slowPath(!sessions.monitors.isEmpty) { mirrorInbound(body, from: id) }
            return receive(frame, body: body, from: client, now: now)
        }
        receiveDecoded(body, from: client, mirrored: false, now: now)
    }

    /// A frame the direct path declined (or any frame before `hello`), through the full
    /// decoder. Kept out of `receiveFrame`, which the per-event frames take (inlined there:
    /// core-invoke 3,645 instructions rather than 3,639, chain3 5,570 rather than 5,557).
    @inline(never)
    private mutating func receiveDecoded(_ body: UnsafeRawBufferPointer, from client: ClientRecord, mirrored: Bool, now: Instant) {
        let id = client.id
        let decoded = MessageDecoder.decode(body)
        if !mirrored && !sessions.monitors.isEmpty {
            if case .badJSON = decoded {} else { mirrorInbound(body, from: id) }
        }
        // Before hello, `hello_required` echoes the refused request's id when it had a usable
        // one (an answer, or a frame whose id is missing or unusable, gets `"id": null`).
        switch consume decoded {
        case .badJSON(let reason):
            refuse(id, nil, .badJSON(reason), now: now)
        case .rejected(let rejection, let isHello):
            guard client.greeted || isHello else { return refuse(id, rejection.id, .session(.helloRequired), now: now) }
            if isHello && client.greeted, let rid = rejection.id {
                // A second hello is refused as such, before its own fields are judged.
                return admit(refusing: rid, .session(.alreadyGreeted), from: client, now: now)
            }
            admit(refusing: rejection.id, .rejected(rejection.reason, rejection.message), from: client, now: now)
        case .decoded(let inbound, let isHello):
            guard client.greeted || isHello else {
                if case .request(let requestID, _) = inbound { return refuse(id, requestID, .session(.helloRequired), now: now) }
                return refuse(id, nil, .session(.helloRequired), now: now)
            }
            switch consume inbound {
            case .request(let requestID, let request): dispatch(requestID, request, body: body, from: client, now: now)
            case .answer(let answer): handleAnswer(answer, from: id, now: now)
            case .callReturn(let ret): handleReturn(ret, from: client)
            }
        }
    }

    /// Starts a request of `client` now when `startsAtOnce`, and admits it behind its
    /// connection's requests and the writes in flight otherwise: the way a request of the
    /// full decoder goes on as it arrives (one held back reaches `handle` later, from
    /// `admit`). `body` is the frame it was decoded from.
    @inline(__always)
    mutating func dispatch(
        _ rid: RequestID, _ request: consuming Request, body: UnsafeRawBufferPointer, from client: ClientRecord, now: Instant
    ) {
        guard startsAtOnce(client, touchingSlot: Broker.touchesSlot(request)) else {
            return admit(rid, request, body: body, from: client, now: now)
        }
        held.arrive()
        handle(request, id: rid, from: client, now: now)
    }

    /// The admission rule's short way, for both decoders' requests: nothing of the connection
    /// waits and no durable write is in flight, so `admit` would start the request at once;
    /// unless it puts or takes, which still asks `admit`, for takers held back.
    @inline(__always)
    func startsAtOnce(_ client: ClientRecord, touchingSlot: Bool = false) -> Bool {
        client.waiting.isEmpty && writes.isEmpty && !touchingSlot
    }

    /// A frame of a greeted connection that the direct path decoded, acted on as the full
    /// decoder's outcome is: a request that starts at once as `dispatch` starts it, an answer
    /// or a return where each is handled. Its names and user data are views of the body. Each
    /// request is made where its op is known, so that `handle`'s switch folds away for it
    /// (made into one `Inbound` first and taken apart in one switch, ping costs 746
    /// instructions rather than 533, core-invoke 3,959 rather than 3,639); and only where it
    /// starts: one that does not start at once takes the full decoder's way to `admit`
    /// (given to `dispatch`, whose other branch keeps it, every request was stored whole
    /// before the test: ping 544, core-invoke 3,714).
    @inline(__always)
    private mutating func receive(_ frame: DirectFrame, body: UnsafeRawBufferPointer, from client: ClientRecord, now: Instant) {
        switch frame {
        case .ping(let id):
            guard startsAtOnce(client) else { return receiveDecoded(body, from: client, mirrored: true, now: now) }
            held.arrive()
            handle(.ping, id: .integer(id), from: client, now: now)
        case .invoke(let id, let channel, let method, let arguments):
            guard startsAtOnce(client) else { return receiveDecoded(body, from: client, mirrored: true, now: now) }
            held.arrive()
            let request = Request.invoke(
                channel: JSONName(inPlace: channel), method: JSONName(inPlace: method), arguments: JSONBytes(inPlace: arguments))
            handle(request, id: .integer(id), from: client, now: now)
        case .post(let id, let name, let key, let payload):
            guard startsAtOnce(client) else { return receiveDecoded(body, from: client, mirrored: true, now: now) }
            held.arrive()
            if !key.isEmpty { return receivePost(id: id, name: name, once: key, payload: payload, from: client, now: now) }
            handle(
                .post(name: postNames.text(of: name), payload: JSONBytes(inPlace: payload), profile: nil), id: .integer(id), from: client, now: now)
        case .callReturn(let call, let result):
            handleReturn(CallReturn(call: call, body: .result(JSONBytes(inPlace: result))), from: client)
        case .next(let event): handleAnswer(.next(event: event), from: client.id, now: now)
        case .stop(let event): handleAnswer(.stop(event: event), from: client.id, now: now)
        case .complete(let event, let value): handleAnswer(.complete(event: event, value: value.map { RawJSON($0) }), from: client.id, now: now)
        }
    }

    /// A keyed post the direct path decoded, which starts at once: kept out of `receive`, so
    /// that the frames of the per-event path without keys are decoded and acted on as they were.
    @inline(never)
    private mutating func receivePost(
        id: Int64, name: UnsafeRawBufferPointer, once key: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer?,
        from client: ClientRecord, now: Instant
    ) {
        let hash = self.once.hash(utf8: key), name = postNames.text(of: name)
        let fingerprint = Broker.fingerprint(targetHash: postNames.hash(), body: payload), payload = JSONBytes(inPlace: payload)
        post(name: name, payload: payload, profile: nil, once: key, hash: hash, fingerprint: fingerprint, rid: .integer(id), from: client, now: now)
    }

    /// The length prefix on `id` was 0 or above `maxFrame`: the stream is out of step.
    public mutating func receiveOversizedFrame(from id: ConnectionID, length: UInt32, now: Instant, into actions: inout [BrokerAction]) {
        input(&actions) { $0.refuseKnown(id, .session(.frameOutOfRange(length: length, max: $0.configuration.maxFrame)), now: now) }
    }

    /// Refuses and closes `id`, if it is still known.
    private mutating func refuseKnown(_ id: ConnectionID, _ error: BrokerError, now: Instant) {
        guard sessions[id] != nil else { return }
        refuse(id, nil, error, now: now)
    }

    /// The input and output the transport buffers across all connections passed `limit`
    /// (`--max-buffered-bytes`), and `id` holds the most of them (`held` bytes): it is
    /// refused `overloaded` and closed, so that its buffers are freed.
    public mutating func overBudget(_ id: ConnectionID, held: Int, limit: Int, now: Instant, into actions: inout [BrokerAction]) {
        input(&actions) { $0.refuse(id, nil, .session(.overBudget(held: held, limit: limit)), now: now) }
    }

    /// The peer closed `id`, or the transport gave up on it.
    public mutating func disconnected(_ id: ConnectionID, now: Instant, into actions: inout [BrokerAction]) {
        input(&actions) { $0.dropClient(id, now: now) }
    }

    /// The record of `.persist(write)` and the request it answers, while the write is in
    /// flight (from the action until `persisted`).
    public func pendingWrite(_ write: WriteID) -> PendingWriteRecord? { writes.write(write)?.record }

    /// The transport wrote (or failed to write) the record of `.persist(write)`. Only now
    /// does the change take effect and its request get its answer; a failed write changes
    /// nothing and is answered `storage_failed`. Requests that waited for it go on.
    public mutating func persisted(_ write: WriteID, written: Bool, now: Instant, into actions: inout [BrokerAction]) {
        input(&actions) { $0.persisted(write, written: written, now: now) }
    }

    private mutating func persisted(_ write: WriteID, written: Bool, now: Instant) {
        guard let pending = writes.finish(write) else { return }
        slots.reserve(slots: -pending.reservedSlots, bytes: -pending.reservedBytes)
        // The one place a request's write leaves its connection's count (`beginWrite` the one
        // it joins): before it is answered, so that what the answer lets go on sees it.
        if let ack = pending.record.acknowledges { sessions[ack.connection]?.writesInFlight -= 1 }
        complete(pending.completion, written: written, now: now)
        resumeWaiting(now: now)
        closeIfShutDown()
    }

    /// Time passed: expire hops, calls and waiting takes whose deadline is at or before `now`.
    public mutating func tick(now: Instant, into actions: inout [BrokerAction]) {
        input(&actions) { $0.expire(now: now) }
    }

    private mutating func expire(now: Instant) {
        while let c = sessions.popUngreeted(now: now) {
            refuse(c, nil, .session(.helloTimedOut(ms: configuration.helloTimeoutMs)), now: now)
        }
        hopTimedOut(now: now)
        while let (_, call) = channels.popExpiredCall(now: now) {
            counters.callTimeouts += 1
            ClientRecord.callEnded(invoker: sessions[call.invoker], handler: sessions[call.handlerClient])
            refuse(call.invoker, call.requestID, .channel(.timedOut(ms: configuration.callTimeoutMs)), now: now)
        }
        while let id = slots.popExpiredWaiter(now: now) {
            guard let waiter = removeTakeWaiter(id) else { continue }
            replyValue(to: waiter.client, waiter.requestID, nil)
        }
    }

    /// SIGINT or SIGTERM: answer everything pending with `shutting_down` and close every
    /// connection after its output is flushed. Durable writes already in flight still
    /// finish and are answered; requests held back behind them start no more and are
    /// answered `shutting_down` after them, in their connection's order.
    public mutating func shutdown(now: Instant, into actions: inout [BrokerAction]) {
        input(&actions) { $0.shutDown(now: now) }
    }

    private mutating func shutDown(now: Instant) {
        guard !shuttingDown else { return }
        shuttingDown = true
        // A keyed post's key is forgotten in memory: queued, it was never recorded; running,
        // its "running" record (if written) answers repeats after the restart.
        if let cur = events.finish() {
            refuse(cur.post.poster, cur.post.requestID, .session(.shuttingDown), now: now)
            forgetKey(of: cur.post, refusal: .session(.shuttingDown), now: now)
        }
        while let post = dequeue() {
            refuse(post.poster, post.requestID, .session(.shuttingDown), now: now)
            forgetKey(of: post, refusal: .session(.shuttingDown), now: now)
        }
        for call in channels.removeAllCalls() {
            refuse(call.invoker, call.requestID, .session(.shuttingDown), now: now)
        }
        // A take still held behind its connection's requests is answered in their order.
        for waiter in slots.removeAllWaiters() where !waiter.held {
            refuse(waiter.client, waiter.requestID, .session(.shuttingDown), now: now)
        }
        // No hello can arrive any more, and one that never came holds nothing: those
        // connections close now instead of waiting for the writes of others.
        sessions.dropHelloDeadlines()
        for id in sessions.records.keys.sorted() where sessions[id]?.greeted == false { close(id, now: now) }
        resumeWaiting(now: now)
        closeIfShutDown()
    }

    /// Closes every connection once shutdown has begun and no durable write is in flight, so
    /// that each write's request, and each request waiting behind one, still gets its answer.
    mutating func closeIfShutDown() {
        guard shuttingDown, !closedForShutdown, writes.isEmpty, !held.hasRetentions else { return }
        closedForShutdown = true
        for id in sessions.records.keys.sorted() { actions.append(.close(id)) }
    }

    // MARK: Outputs

    /// The earliest time at which `tick` has work, if any. Mutating: the channel router keeps
    /// the oldest call in flight once it has looked for it (looking when asked, not each time
    /// the oldest call ends, keeps a handler's thousands of calls ending at once linear), and
    /// the registries are read where they lie: through a borrow of the broker, the compiler
    /// copies `sessions` and `channels` (their references retained and released) before it
    /// reads one field of each, and the transport asks every loop turn
    /// (Benchmarks/callgrind-broker.sh: 7,035 instructions per invoke round trip borrowed,
    /// 6,745 mutating).
    public var nextDeadline: Instant? {
        mutating get {
            var best = events.awaited?.deadline
            if let h = sessions.nextHelloDeadline { best = Swift.min(best ?? h, h) }
            if let c = channels.nextCallDeadline { best = Swift.min(best ?? c, c) }
            if let t = slots.nextDeadline { best = Swift.min(best ?? t, t) }
            return best
        }
    }

    /// Lends the bytes of a `.send` (its length prefix included) to `body`, which must not
    /// keep them. Traps when `range` was handed out before the last `outputTaken()`.
    @inline(__always)
    public func withOutput<R>(_ range: OutputRange, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try output.withBytes(of: range, body)
    }

    /// A copy of the bytes of a `.send` (tests, tools); traps like `withOutput`.
    public func outputBytes(_ range: OutputRange) -> [UInt8] { output.bytes(of: range) }

    /// The caller has consumed every `.send` handed out so far (written them, or copied what
    /// it keeps): the output store starts again and those ranges are no longer valid.
    public mutating func outputTaken() { output.reset() }

    /// Whether any connection is still known.
    public var hasClients: Bool { !sessions.isEmpty }

    // MARK: Dispatch

    /// Carries out one request of `client` (which the sessions hold): the ops of the
    /// per-event path here, inlined where the request is made so that the switch folds away
    /// for them, every other in `handleOther`.
    @inline(__always)
    mutating func handle(_ request: consuming Request, id rid: RequestID, from client: ClientRecord, now: Instant) {
        switch consume request {
        case .ping:
            send(.reply(rid, .empty), to: client.id)
        case .post(let name, let payload, let profile):
            post(name: name, payload: payload, profile: profile, rid: rid, from: client, now: now)
        case .invoke(let channel, let method, let arguments):
            invoke(channel: channel, method: method, arguments: arguments, rid: rid, from: client, now: now)
        case let request:
            handleOther(request, id: rid, from: client, now: now)
        }
    }

    /// `handle` for every op but the three of the per-event path.
    @inline(never)
    private mutating func handleOther(_ request: consuming Request, id rid: RequestID, from client: ClientRecord, now: Instant) {
        let c = client.id
        switch consume request {
        case .hello(let version, let name):
            guard !client.greeted else { return refuse(c, rid, .session(.alreadyGreeted), now: now) }
            guard version == protocolVersion else { return refuse(c, rid, .session(.unsupportedProtocol(version)), now: now) }
            client.greeted = true
            client.name = name
            send(.reply(rid, .hello(server: configuration.serverName, client: c, maxFrame: configuration.maxFrame)), to: c)
        case .subscribe(let events, let priority, let key, let resume):
            subscribe(events: events, priority: priority, key: key, resume: resume, rid: rid, from: c, now: now)
        case .unsubscribe(let target):
            unsubscribe(target, rid: rid, from: c, now: now)
        case .handle(let channel, let method, let resume):
            handleChannel(HandlerKey(channel: channel, method: method), resume: resume, rid: rid, from: c, now: now)
        case .unhandle(let handler):
            unhandle(handler, rid: rid, from: c, now: now)
        case .put(let slot, let value):
            put(slot: slot, value: value, once: nil, rid: rid, from: c, now: now)
        case .take(let slot, let wait):
            take(slot: slot, waitMs: wait, once: nil, rid: rid, from: c, now: now)
        case .peek(let slot):
            replyValue(to: c, rid, slots[slot])
        case .setCategories(let set):
            setCategories(set, once: nil, rid: rid, from: client, now: now)
        case .getCategories:
            send(.reply(rid, .categories(categories.set.raw)), to: c)
        case .status(let page):
            once.forgetPastBounds(nowMs: wallMs(now))
            let frame = statusReply(rid, page: page, now: now)
            emit(to: c, frame)
        case .monitor:
            sessions.startMonitoring(c)
            send(.reply(rid, .empty), to: c)
        case .keyed(let key, let request):
            handleKeyed(key, request, id: rid, from: client, now: now)
        case .ping, .post, .invoke:
            preconditionFailure("handle carries out the per-event ops")
        }
    }

    // MARK: Connection teardown

    /// Asks the transport to flush and close `c`, then drops its state. The close comes
    /// first among the actions: what dropping it sets going for other connections (their
    /// held requests resumed, a chain moving on) happens after `c` is gone, and a `status`
    /// answered then no longer lists it.
    mutating func close(_ c: ConnectionID, now: Instant) {
        actions.append(.close(c))
        dropClient(c, now: now)
    }

    /// Removes everything `c` owned: handlers, calls it was serving (`handler_gone` to their
    /// invokers), waiting takes, observers (ending its hop as `gone`). Calls it made stay
    /// until returned or timed out, and their answers then go nowhere.
    mutating func dropClient(_ c: ConnectionID, now: Instant) {
        guard let client = sessions.remove(c) else { return }
        for h in client.handlers { _ = channels.remove(h) }
        for call in client.callsReceived > 0 ? channels.removeCalls(servedBy: c) : [] {
            ClientRecord.callEnded(invoker: sessions[call.invoker], handler: client)
            refuse(call.invoker, call.requestID, .channel(.handlerGone), now: now)
        }
        // A take of its still held back kept values for that slot waiting: they may go on,
        // once nothing of `c` is left for them to see (a resumed `status` or post).
        let heldTakes = client.takes.contains { slots.waiter($0)?.held == true }
        for t in client.takes { _ = removeTakeWaiter(t) }
        for o in client.observers { removeObserver(o, now: now, pump: false) }
        if heldTakes { resumeWaiting(now: now) }
        pump(now: now)
    }
}
