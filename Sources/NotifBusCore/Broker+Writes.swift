// Durable writes (`persistsState`): a change to slots or categories is asked of the
// transport as a `.persist` action and held here, with its reply, until the transport
// reports it written or failed. It must never apply a change or answer before that.
//
// A write in flight makes its key (a slot, or the categories) busy:
//
//     request ──▶ its connection has requests waiting, or its key is busy, or its
//        │        connection has a write in flight and the request would neither write
//        │        nor answer later anyway? ──yes──▶ waits (per connection, in order)
//        │ no                                                    │
//        ▼                                                       │ a write finishes
//     handled ──writes──▶ .persist, key busy ──persisted──▶ applied + result,
//                                                   or nothing changed + storage_failed
//
// So every request sees the state as the writes before it left it, a connection's
// requests are handled in the order they arrive (a post or invoke never passes a request
// of its own connection that waits), and writes of one connection to different keys are
// in flight together (the transport syncs all writes of one loop turn with one
// fdatasync). A `didReceive` reads the categories like `getCategories`. At shutdown no
// waiting request starts: each is answered `shutting_down` in its connection's order.
// Each connection's held requests wait in its ClientRecord; HeldRequests keeps the order
// across connections.
import NotifBusProtocol

extension Broker {
    /// Handles a request now, or holds it back behind the durable writes it depends on. One
    /// held back is kept as its frame, `body`: the request's user data are views of it.
    mutating func admit(_ rid: RequestID, _ request: consuming Request, body: UnsafeRawBufferPointer, from client: ClientRecord, now: Instant) {
        let c = client.id
        let arrival = held.arrive()
        if client.waiting.isEmpty && canStart(request, arrival: arrival, from: client) { return handle(request, id: rid, from: client, now: now) }
        if shuttingDown && client.writesInFlight == 0 {
            // Nothing of this connection is in flight and nothing will start any more.
            return refuse(c, rid, .session(.shuttingDown), now: now)
        }
        if client.waiting.isEmpty { held.beganWaiting(c) }
        if case .take(let slot, let wait?) = request.unkeyed, wait > 0, !shuttingDown, client.takes.count < configuration.maxTakesPerConnection {
            let key = request.onceKey
            // The take keeps its place among the slot's waiting takers from now on.
            let id = slots.addWaiter(
                TakeWaiter(client: c, requestID: rid, slot: slot, held: true, arrival: arrival, once: key), deadline: nil)
            client.takes.insert(id)
            return client.waiting.append((.heldTake(rid, slot: slot, waitMs: wait, place: id), arrival))
        }
        client.waiting.append((.request(rid, frame: Array(body)), arrival))
    }

    /// Refuses a request now, or behind its connection's requests and writes, in order.
    mutating func admit(refusing rid: RequestID?, _ error: BrokerError, from client: ClientRecord, now: Instant) {
        let c = client.id
        guard let rid else { return refuse(c, nil, error, now: now) }  // an error frame answers nothing in order
        let arrival = held.arrive()
        if client.waiting.isEmpty && client.writesInFlight == 0 { return refuse(c, rid, error, now: now) }
        if shuttingDown && client.writesInFlight == 0 { return refuse(c, rid, error, now: now) }
        if client.waiting.isEmpty { held.beganWaiting(c) }
        client.waiting.append((.rejected(rid, error), arrival))
    }

    /// Calls `body` with the request a held frame holds, decoded again as it was when it
    /// arrived (the decoder is deterministic).
    static func withHeld<R>(_ frame: [UInt8], _ body: (borrowing Request) -> R) -> R {
        frame.withUnsafeBytes { bytes in
            guard case .decoded(.request(_, let request), _) = MessageDecoder.decode(bytes) else {
                preconditionFailure("a held frame no longer decodes to a request")
            }
            return body(request)
        }
    }

    /// Whether the transport should go on reading `c`'s frames: not while
    /// `maxHeldBackPerConnection` of its requests wait behind durable writes, so that one
    /// client cannot pile up requests in the broker faster than the disk takes them.
    public func wantsInput(from c: ConnectionID) -> Bool {
        heldBack(from: c) < configuration.maxHeldBackPerConnection
    }

    /// How many of `c`'s requests are held back: always its latest ones, since once one
    /// waits every later one waits behind it.
    public func heldBack(from c: ConnectionID) -> Int {
        sessions[c]?.waiting.count ?? 0
    }

    mutating func start(_ input: WaitingInput, from client: ClientRecord, now: Instant) {
        let c = client.id
        switch input {
        case .request(let rid, let frame): Broker.withHeld(frame) { handle(copy $0, id: rid, from: client, now: now) }
        case .rejected(let rid, let error): refuse(c, rid, error, now: now)
        case .heldTake(let rid, let slot, let waitMs, let place):
            let key = slots.waiter(place)?.once
            guard slots[slot] == nil, !shuttingDown, !isHeld(key) else {
                _ = removeTakeWaiter(place)
                return take(slot: slot, waitMs: waitMs, once: key, rid: rid, from: c, now: now)
            }
            // It waits where it has stood since it arrived; its wait runs from now, so that it
            // cannot run out before the replies ahead of it.
            slots.startWaiting(place, deadline: now &+ UInt64(waitMs) * 1_000_000)
        }
    }

    /// Answers a request that will never start: the broker is shutting down.
    mutating func answerShuttingDown(_ input: WaitingInput, from c: ConnectionID, now: Instant) {
        switch input {
        case .request(let rid, _): refuse(c, rid, .session(.shuttingDown), now: now)
        case .rejected(let rid, let error): refuse(c, rid, error, now: now)
        case .heldTake(let rid, _, _, let place):
            _ = removeTakeWaiter(place)
            refuse(c, rid, .session(.shuttingDown), now: now)
        }
    }

    /// Whether the held `input` may be handled now (`canStart` of its request).
    func canStart(_ input: WaitingInput, arrival: Int, from client: ClientRecord) -> Bool {
        switch input {
        case .rejected: return client.writesInFlight == 0
        case .heldTake(_, let slot, let waitMs, let place):
            if slots[slot] != nil && slots.oldestTakerIsHeld(slot, before: arrival, except: place) { return false }
            return mayStart(.take(slot: slot, waitMs: waitMs), from: client)
        case .request(_, let frame):
            return Broker.withHeld(frame) { canStart($0, arrival: arrival, from: client) }
        }
    }

    /// Whether `request` may be handled now: its key is not being written, and it will not
    /// answer ahead of a write its connection is still waiting for.
    func canStart(_ request: borrowing Request, arrival: Int, from client: ClientRecord) -> Bool {
        // A value must not pass a take that waits for this slot but is still held behind
        // its own connection's requests: waiting takers are served oldest first.
        switch request.unkeyed {
        case .put(let slot, _?), .take(let slot, _):
            if slots.oldestTakerIsHeld(slot, before: arrival) { return false }
        default: break
        }
        return mayStart(request, from: client)
    }

    /// `canStart` once the slot's takers let `request` pass.
    private func mayStart(_ request: borrowing Request, from client: ClientRecord) -> Bool {
        guard !writes.isEmpty else { return true }
        if let key = Broker.stateKey(of: request), writes.isBusy(key) { return false }
        guard client.writesInFlight > 0 else { return true }
        // A request answered from the key table is answered at once: it waits its turn.
        if isHeld(request.onceKey) { return false }
        return willWrite(request) || Broker.answersLater(request)
    }

    /// Whether `canStart` must ask the slots about `request`: a value must not pass a take
    /// held behind its own connection's requests.
    /// Not recursive, so that it is inlined where a request is dispatched (a key holds no
    /// key: the decoder refuses `once` on anything but the four ops).
    @inline(__always)
    static func touchesSlot(_ request: borrowing Request) -> Bool {
        switch request {
        case .put(_, _?), .take, .keyed(_, .put(_, _?)), .keyed(_, .take): true
        default: false
        }
    }

    /// Posts and invokes are answered later in any case: once every earlier request of
    /// their connection has started, they need not wait for that connection's writes.
    static func answersLater(_ request: borrowing Request) -> Bool {
        switch request {
        case .post, .invoke, .keyed(_, .post): return true
        default: return false
        }
    }

    /// The durable state a request reads or changes. A `didReceive` post is checked
    /// against the categories, so it reads them.
    static func stateKey(of request: borrowing Request) -> StateKey? {
        switch request {
        case .put(let slot, _), .take(let slot, _), .peek(let slot), .keyed(_, .put(let slot, _)), .keyed(_, .take(let slot, _)): return .slot(slot)
        case .setCategories, .getCategories, .post(_, _, .didReceive?), .keyed(_, .setCategories), .keyed(_, .post(_, _, .didReceive?)):
            return .categories
        default: return nil
        }
    }

    /// Whether handling `request` now starts a durable write (rather than answering at once).
    /// A keyed request whose key is held writes nothing (`canStart` asks that first).
    func willWrite(_ request: borrowing Request) -> Bool {
        let key = request.onceKey
        switch request.unkeyed {
        case .put(let slot, nil):
            return slots[slot] != nil || key != nil
        case .put(let slot, let value?):
            if let id = slots.firstReadyWaiter(slot) {
                // Handed over: a write for sure when only the put has a key (a taker's key may
                // be answered from the table instead; not starting is the safe answer).
                return configuration.persistsState && key != nil && slots.waiter(id)?.once == nil
            }
            return slots.limitError(slot, value, maxSlots: configuration.maxSlots, maxBytes: configuration.maxSlotBytes) == nil
        case .take(let slot, _):
            return slots[slot] != nil
        case .setCategories:
            return true
        default:
            return false
        }
    }

    /// Starts a durable write at `now` of `record` and the keys `once` (one journal record);
    /// without `persistsState` the change is applied and answered at once.
    mutating func beginWrite(
        _ key: StateKey?, _ record: StateRecord, once: [OnceRecord] = [], then completion: WriteCompletion,
        reservedSlots: Int = 0, reservedBytes: Int = 0, now: Instant
    ) {
        guard configuration.persistsState else { return complete(completion, written: true, now: now) }
        var acknowledgement: Acknowledgement? = nil
        var durable = true
        switch completion {
        case .put(let c, let rid, _, _, _, _), .empty(let c, let rid, _, _, _), .take(let c, let rid, _, _), .categories(let c, let rid, _, _):
            sessions[c]?.writesInFlight += 1
            acknowledgement = Acknowledgement(connection: c, requestID: rid)
        case .handOver(let h):
            if case .put(let c, let rid, _) = h.source {
                sessions[c]?.writesInFlight += 1
                acknowledgement = Acknowledgement(connection: c, requestID: rid)
            }
        case .running:
            durable = false
        case .retention, .restore, .ended:
            break
        }
        let id = writes.begin(
            PendingWrite(
                key: key, completion: completion,
                record: PendingWriteRecord(record: record, once: once, acknowledges: acknowledgement, durable: durable),
                reservedSlots: reservedSlots, reservedBytes: reservedBytes))
        slots.reserve(slots: reservedSlots, bytes: reservedBytes)
        actions.append(.persist(id))
    }

    /// Applies a finished write (if it was written) and answers for it.
    mutating func complete(_ completion: WriteCompletion, written: Bool, now: Instant) {
        switch completion {
        case .put(let c, let rid, let slot, let value, let replaced, let ticket):
            if written { slots.set(slot, value) }
            if let ticket { return answerKeyed(c, rid, written, ticket, now: now) }
            answerWrite(c, rid, written, .put(replaced: replaced, delivered: false), now: now)
        case .empty(let c, let rid, let slot, let replaced, let ticket):
            if written { _ = slots.remove(slot) }
            if let ticket { return answerKeyed(c, rid, written, ticket, now: now) }
            answerWrite(c, rid, written, .put(replaced: replaced, delivered: false), now: now)
        case .take(let c, let rid, let slot, let ticket):
            let value = slots[slot] ?? RawJSON.null
            if written { _ = slots.remove(slot) }
            // A keyed take's value is its taker's, gone or not: its repeat will get it.
            if let ticket {
                let key = once.key(ticket.entry)
                answerKeyed(c, rid, written, ticket, now: now)
                if written { answerWaitingRepeats(slot: slot, key: key, ticket.outcome) }
                return
            }
            // Its removal is on disk but nobody received the value: it must not be lost.
            if written && sessions[c] == nil { return handBack(slot, value, now: now) }
            answerWrite(c, rid, written, .value(value), now: now)
        case .restore(let slot, let value):
            if written { slots.set(slot, value) }
        case .categories(let c, let rid, let set, let ticket):
            if written { categories.set = set }
            if let ticket { return answerKeyed(c, rid, written, ticket, now: now) }
            answerWrite(c, rid, written, .categoryCount(set.categories.count), now: now)
        case .retention(let event, _):
            if written { slots.set(Broker.launchSlot, event.post.payload ?? RawJSON.null) }
            answerRetention(event, written: written, now: now)
        case .running(let event):
            recordedRunning(event, written: written, now: now)
        case .ended(let event, let how, let outcome):
            // Written or not, the event ran: its poster gets its result (a failed record
            // leaves the key "running" on disk, so a repeat after a restart hears
            // `interrupted`), unless no observer was sent it.
            if !written && refuseUnseen(event, how, now: now) { return }
            endPost(event, outcome, now: now)
        case .handOver(let h):
            handedOver(h, written: written, wrote: true, now: now)
        }
    }

    /// A value whose taker left while its removal was written goes back into the slot, by a
    /// write of its own; takers that arrived meanwhile waited for the slot, so the oldest of
    /// them takes it next. Should that write fail too, the value is gone from disk and from
    /// memory alike.
    mutating func handBack(_ slot: String, _ value: RawJSON, now: Instant) {
        beginWrite(
            .slot(slot), .slot(name: slot, value: value), then: .restore(slot: slot, value: value),
            reservedSlots: 1, reservedBytes: value.count, now: now)
    }

    /// The reply to a request whose write finished: its result, or `storage_failed`.
    mutating func answerWrite(_ c: ConnectionID, _ rid: RequestID, _ written: Bool, _ result: ReplyResult, now: Instant) {
        guard sessions.contains(c) else { return }
        guard written else {
            return refuse(c, rid, .storageFailed, now: now)
        }
        send(.reply(rid, result), to: c)
    }

    /// Goes on with what waited: launch retentions first, then each waiting connection's
    /// requests in order, as far as each can start; again while anything started, since
    /// one connection's start (a held take taking its place) can free another's. At
    /// shutdown nothing starts: a connection with no write in flight has its waiting
    /// requests answered `shutting_down`, in order.
    mutating func resumeWaiting(now: Instant) {
        // A request started here may close a connection, which resumes again: that is done
        // by this loop, not by a second one inside it.
        guard held.beginResume() else { return }
        defer { held.endResume() }
        var progressed = true
        while progressed {
            progressed = false
            _ = held.takeResumeRequest()
            while held.hasRetentions && canRetain, let event = held.popRetention() {
                startRetention(event, now: now)
                progressed = true
            }
            guard held.hasWaitingClients else { break }
            for c in held.takeWaitingClients() {
                guard let client = sessions[c] else { continue }
                if shuttingDown {
                    if client.writesInFlight == 0 {
                        while let next = client.waiting.popFirst() { answerShuttingDown(next.input, from: c, now: now) }
                    }
                } else {
                    while let next = client.waiting.first, canStart(next.input, arrival: next.arrival, from: client) {
                        _ = client.waiting.popFirst()
                        progressed = true
                        start(next.input, from: client, now: now)
                        if sessions[c] == nil { break }
                    }
                }
                if sessions[c] != nil && !client.waiting.isEmpty { held.beganWaiting(c) }
            }
            if held.takeResumeRequest() { progressed = true }
        }
    }
}
