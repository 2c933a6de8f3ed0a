// Invariants of a whole step, of `status` against the model, and of the end of a program:
// with the clock run past every deadline every request is answered and every event ends,
// and once everyone hangs up the broker holds nothing of any of them.
import FuzzDriver
import NotifBusCore
import NotifBusProtocol

extension Session {
    /// Frames one input may cause: replies to everything pending (posts, waiting takes and
    /// calls per connection, and the requests each connection holds back behind durable
    /// writes, all answered when the write they wait for ends), evictions, closes and an
    /// event, each mirrored to every monitor.
    var maxActionsPerStep: Int {
        let c = configuration
        let perConnection = c.maxTakesPerConnection + c.maxCallsPerConnection + c.maxHeldBackPerConnection + 2
        let frames = 16 + c.maxQueue + c.maxClients * perConnection
        return frames * (c.maxClients + 1)
    }

    func checkStep() {
        if context.ticked, let deadline = broker.nextDeadline, deadline <= now {
            violation("next deadline \(deadline) is not after now \(now) right after a tick")
        }
        for id in context.mustClose where peers[id - 1].open {
            violation("c\(id) should have been closed")
        }
        if context.actionCount > maxActionsPerStep {
            violation("\(context.actionCount) actions in one step (at most \(maxActionsPerStep))")
        }
        for (id, expected) in context.acknowledgements where peers[id - 1].open {
            violation("c\(id) never got the reply \(expected) that acknowledges a persisted change")
        }
        if let relay = context.relay, !relay.done {
            violation("call \(relay.call) was returned but its invoker got no reply")
        }
        checkHeldBack()
        var waitingPosts = 0
        // Slots whose value is being handed to a waiting take while keys are written: that
        // take waits no more (it holds no place among its connection's waiting takes).
        let handOvers = Set(
            inFlight.compactMap { write -> String? in
                guard case .slot(let name, nil) = write.record, !write.once.isEmpty else { return nil }
                return name
            })
        for peer in peers where peer.open {
            var takes = 0
            var handedOver: Set<String> = []
            var invokes = 0
            for pending in peer.outstanding {
                switch pending.request?.unkeyed {
                case .post?:
                    // A keyed one may be a repeat waiting for its post, which holds no place.
                    if pending.request?.onceKey == nil && !peer.admitted.contains(where: { $0.id == pending.id }) { waitingPosts += 1 }
                case .take(let slot, _)?:
                    // One whose removal is being written is not waiting either, nor one a value
                    // is being handed to (one per slot at most).
                    guard !peer.admitted.contains(where: { $0.id == pending.id }) && !isInFlight(pending.id, of: peer.id) else { break }
                    if handOvers.contains(slot) && handedOver.insert(slot).inserted { break }
                    takes += 1
                case .invoke?: if !peer.admitted.contains(where: { $0.id == pending.id }) { invokes += 1 }
                default:
                    // Answered at once, unless it is a write in flight or held behind one.
                    if !peer.admitted.contains(where: { $0.id == pending.id }) && !isInFlight(pending.id, of: peer.id) {
                        violation(
                            "\(String(describing: pending.request)) with id \(pending.id) on c\(peer.id) got no reply, "
                                + "and it is neither a write in flight nor held behind one")
                    }
                }
            }
            // Takes and invokes held back behind a write are not waiting takes or calls yet.
            if takes > configuration.maxTakesPerConnection { violation("c\(peer.id) has \(takes) takes waiting") }
            if invokes > configuration.maxCallsPerConnection { violation("c\(peer.id) has \(invokes) calls in flight") }
        }
        if shutDown && inFlight.isEmpty, let peer = peers.first(where: \.open) {
            violation("c\(peer.id) still open after shutdown with no write in flight")
        }
        // A post whose launch retention is being written has finished its turn in the queue.
        if waitingPosts > configuration.maxQueue + 1 + inFlight.count {
            violation("\(waitingPosts) posts await results with a queue of \(configuration.maxQueue)")
        }
    }

    /// Whether a write in flight answers request `id` of connection `c`.
    func isInFlight(_ id: JSONValue, of c: ConnectionID) -> Bool {
        inFlight.contains { write in
            guard let ack = write.acknowledges, ack.connection == c else { return false }
            return Session.json(ack.requestID) == id
        }
    }

    /// Checks what the broker holds back against the model: the held requests are each
    /// connection's latest admitted ones (as many as `Broker.heldBack` says), none of them
    /// answered yet, and the oldest has a reason to wait — a write of what it reads, or a
    /// write of its own connection it must not answer ahead of. Requests that left the held
    /// ones in this step started now: posts and invokes are counted as accepted then.
    func checkHeldBack() {
        for index in peers.indices where peers[index].open {
            let id = peers[index].id
            let n = broker.heldBack(from: id)
            let admitted = peers[index].admitted
            guard n <= admitted.count else {
                violation("c\(id) has \(n) requests held back but sent only \(admitted.count) that could be")
            }
            peers[index].admitted = Array(admitted.suffix(n))
            for pending in admitted.prefix(admitted.count - n) {
                let code = context.replies.first { $0.connection == id && $0.id == pending.id }?.code
                switch pending.request {
                case .post?:
                    if code == nil { acceptedPosts += 1 }
                case .invoke?:
                    if code == nil || code == "not_implemented" { acceptedInvokes += 1 }
                default:
                    break
                }
            }
        }
        for peer in peers where peer.open {
            for pending in peer.admitted where !peer.outstanding.contains(where: { $0.id == pending.id }) {
                violation("c\(peer.id)'s request \(pending.id) was answered but is still held back")
            }
            if let front = peer.admitted.first, !mayBeHeld(front, of: peer.id) {
                violation("c\(peer.id)'s \(String(describing: front.request)) with id \(front.id) is held back with no write to wait for")
            }
        }
    }

    /// Whether the oldest held request of `c` has a reason to wait (Broker+Writes.swift).
    func mayBeHeld(_ pending: Pending, of c: ConnectionID) -> Bool {
        let ownWrites = inFlight.contains { $0.acknowledges?.connection == c }
        guard let request = pending.request else { return ownWrites }
        // A keyed request waits as its request does, and a repeat also for its own writes.
        if case .keyed(_, let inner) = request {
            return ownWrites || mayBeHeld(Pending(id: pending.id, request: inner, step: pending.step, sentAt: pending.sentAt), of: c)
        }
        func slotBusy(_ slot: String) -> Bool {
            inFlight.contains { if case .slot(slot, _) = $0.record { true } else { false } }
        }
        let categoriesBusy = inFlight.contains { if case .categories = $0.record { true } else { false } }
        // A take of the slot held (somewhere) before this one keeps values for it.
        func heldTakeAhead(_ slot: String) -> Bool {
            peers.contains { peer in
                peer.open
                    && peer.admitted.contains { other in
                        guard other.id != pending.id || peer.id != c, case .take(slot, let wait?)? = other.request?.unkeyed else { return false }
                        return wait > 0 && other.step <= pending.step
                    }
            }
        }
        switch request {
        case .post(_, _, .didReceive?):
            return categoriesBusy || (shutDown && ownWrites)
        case .post, .invoke:
            return shutDown && ownWrites
        case .put(let slot, let value):
            return slotBusy(slot) || ownWrites || (value != nil && heldTakeAhead(slot))
        case .take(let slot, _):
            return slotBusy(slot) || ownWrites || heldTakeAhead(slot)
        case .peek(let slot):
            return slotBusy(slot) || ownWrites
        case .setCategories, .getCategories:
            return categoriesBusy || ownWrites
        default:
            return ownWrites
        }
    }

    /// Requests whose reply may come in a later step: posts, takes that wait, invokes.
    static func mayWait(_ request: SentRequest?) -> Bool {
        switch request {
        case .post?, .invoke?, .keyed?: return true
        case .take(_, let wait)?: return (wait ?? 0) > 0
        default: return false
        }
    }

    /// `status` agrees with the model: the same greeted clients, observers (in chain order)
    /// and handlers, the slots the persist actions left, and counters that add up.
    func checkStatus(_ value: JSONValue?) {
        guard case .object(let s)? = value, case .object(let once)? = s["once"],
            Set(s.keys) == ["server", "uptimeMs", "clients", "observers", "handlers", "queue", "slots", "next", "buffers", "once", "counters"],
            s["next"] == .null,
            let clients = s["clients"]?.arrayValue, let observerList = s["observers"]?.arrayValue,
            let handlerList = s["handlers"]?.arrayValue, let slotList = s["slots"]?.arrayValue,
            let pending = s["queue"]?["pending"]?.intValue, let current = s["queue"]?["current"],
            case .object(let counters)? = s["counters"]
        else { violation("status result \(String(describing: value))") }

        let listedClients = clients.compactMap { $0["client"]?.stringValue }
        let greeted = peers.filter { $0.open && $0.greeted }.map { "c\($0.id)" }
        if listedClients.sorted() != greeted.sorted() { violation("status lists clients \(listedClients); greeted and open: \(greeted)") }
        // Each client's waiting posts stay within its share, and all of them within the
        // queue (posts of clients that left are counted by no client).
        var queuedByClients: Int64 = 0
        for entry in clients {
            guard let text = entry["client"]?.stringValue, let holder = Int(text.dropFirst()),
                let queued = entry["queued"]?.intValue, case .bool(let unresponsive)? = entry["unresponsive"]
            else { violation("status client \(entry)") }
            if queued > Int64(configuration.queueShare) { violation("c\(holder) has \(queued) posts waiting, beyond its share") }
            queuedByClients += queued
            if unresponsive && !mayBeUnresponsive(holder, during: stepNumber...stepNumber) {
                violation("status says c\(holder) is unresponsive, but it answered or spoke since its last hop timed out")
            }
        }
        if s["queue"]?["maxPerClient"]?.intValue != Int64(configuration.queueShare) {
            violation("status queue \(String(describing: s["queue"])) does not name the share \(configuration.queueShare)")
        }

        var listedObservers: [Int: ConnectionID] = [:]
        var previous: (Int64, Int)? = nil
        for o in observerList {
            guard let text = o["observer"]?.stringValue, let n = Int(text.dropFirst()), let priority = o["priority"]?.intValue,
                let client = o["client"]?.stringValue, let holder = Int(client.dropFirst())
            else { violation("status observer \(o)") }
            if let previous, previous >= (priority, n) { violation("status observers out of chain order at \(text)") }
            previous = (priority, n)
            listedObservers[n] = holder
        }
        if listedObservers != observers { violation("status lists observers \(listedObservers); the clients hold \(observers)") }

        var listedHandlers: [Int: ConnectionID] = [:]
        for h in handlerList {
            guard let text = h["handler"]?.stringValue, let n = Int(text.dropFirst()),
                let client = h["client"]?.stringValue, let holder = Int(client.dropFirst())
            else { violation("status handler \(h)") }
            listedHandlers[n] = holder
        }
        if listedHandlers != handlers { violation("status lists handlers \(listedHandlers); the clients hold \(handlers)") }

        let listedSlots = slotList.compactMap(\.stringValue)
        if listedSlots != slots.keys.sorted() { violation("status lists slots \(listedSlots); persisted: \(slots.keys.sorted())") }

        if pending > Int64(configuration.maxQueue) { violation("\(pending) posts queued with a queue of \(configuration.maxQueue)") }
        if queuedByClients > pending { violation("clients hold \(queuedByClients) waiting posts; \(pending) are queued") }
        if current == .null && pending > 0 { violation("\(pending) posts queued and none running") }
        func count(_ name: String) -> Int64 {
            guard let n = counters[name]?.intValue else { violation("status counter \(name) missing") }
            return n
        }
        let running: Int64 = current == .null ? 0 : 1
        // Posts and invokes held back may have started earlier in this step: they are counted
        // as accepted only when the step ends.
        func heldBack(_ isKind: (SentRequest?) -> Bool) -> Int64 {
            guard context.afterWrite else { return 0 }
            return Int64(peers.filter(\.open).reduce(0) { $0 + $1.admitted.filter { isKind($0.request) }.count })
        }
        // Keyed posts are counted as accepted when their first result arrives: those still
        // awaited, and those whose connection left, may be counted already.
        let keyedPosts = Int64(
            keyedPostsUnknown
                + peers.filter(\.open).reduce(0) {
                    $0 + $1.outstanding.filter { if case .keyed(_, .post)? = $0.request { true } else { false } }.count
                })
        let heldPosts = heldBack { if case .post? = $0 { true } else { false } } + keyedPosts
        let heldInvokes = heldBack { if case .invoke? = $0 { true } else { false } }
        let posted = count("posted")
        if posted < Int64(acceptedPosts) || posted > Int64(acceptedPosts) + heldPosts {
            violation("status counts \(posted) posts; \(acceptedPosts) were accepted (and \(heldPosts) held back may have started)")
        }
        if posted - count("completed") - count("stopped") - count("unhandled") != pending + running {
            violation("posted \(posted) minus finished is not \(pending) queued plus \(running) running: \(counters)")
        }
        let invokes = count("invokes")
        if invokes < Int64(acceptedInvokes) || invokes > Int64(acceptedInvokes) + heldInvokes {
            violation("status counts \(count("invokes")) invokes; \(acceptedInvokes) were accepted")
        }
        if count("hopTimeouts") < seenHopTimeouts || count("gone") < seenGone || count("invalid") < seenInvalid {
            violation("status counters \(counters) below the traces seen (\(seenHopTimeouts) timeouts, \(seenGone) gone, \(seenInvalid) invalid)")
        }
        if s["uptimeMs"]?.intValue != Int64((now - brokerStart) / 1_000_000) { violation("uptime \(String(describing: s["uptimeMs"]))") }
        // Every key the model knows held is held (nothing is forgotten), and no more than
        // those, those whose fate is unknown, and those of requests awaiting replies.
        let outstandingKeys = Set(peers.filter(\.open).flatMap { $0.outstanding.compactMap { $0.request?.onceKey } })
        let held = once["keys"]?.intValue ?? -1
        let most = Set(onceKeys.keys).union(onceUnsure).union(outstandingKeys).count
        if held < Int64(onceKeys.count) || held > Int64(most) {
            violation("status holds \(held) keys; the model knows \(onceKeys.count), at most \(most)")
        }
        if once["maxKeys"]?.intValue != Int64(configuration.once.maxKeys) || once["maxAgeMs"]?.intValue != configuration.once.maxAgeMs
            || once["maxBytes"]?.intValue != Int64(configuration.once.maxBytes)
        {
            violation("status once \(once) does not name the window")
        }
    }

    /// The end of a program: every deadline runs out, every request is answered, everyone
    /// hangs up, and a fresh client finds the broker empty and its counters balanced.
    func finish() {
        failWrites = false
        holdWrites = false
        reportAllWrites()
        guard !shutDown else { return }
        var ticks = 0
        while let deadline = broker.nextDeadline {
            ticks += 1
            if ticks > Session.maxDrainTicks { violation("deadlines keep coming after \(ticks) ticks") }
            now = Swift.max(now, deadline)
            tick()
        }
        for peer in peers where peer.open {
            if let pending = peer.outstanding.first {
                violation("\(String(describing: pending.request)) with id \(pending.id) on c\(peer.id) was never answered")
            }
        }
        probeStatus()
        for peer in peers where peer.open { hangUp(peer.id) }
        if !observers.isEmpty || !handlers.isEmpty { violation("observers \(observers) and handlers \(handlers) outlive their clients") }

        let id = connect(uid: 1000)
        deliver(id, "{\"op\":\"hello\",\"id\":0,\"protocol\":1}")
        if !peers[id - 1].greeted { violation("a fresh client could not say hello to an empty broker") }
        deliver(id, "{\"op\":\"status\",\"id\":\"final\"}")
        hangUp(id)
        if broker.hasClients { violation("the broker still holds clients after everyone hung up") }
    }
}
