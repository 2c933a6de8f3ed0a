// Observers and the ordered chain, composed: subscribe with priority and unique key
// (ObserverRegistry), the single broker-wide FIFO of posts (EventQueue), and the walk of
// each event down its chain one hop at a time. The registries keep records; this decides.
//
// One event at a time:
//
//     post ─▶ queue ─▶ start: chain = observers of `name` now, in priority order
//                        │
//                        ▼
//              ┌─▶ next live observer? ──no──▶ finish(unhandled)
//              │         │ yes, but its connection is unresponsive, or its hops here
//              │         │      took a hop timeout already: trace `skipped`, look further
//              │         │ yes: send `event`, arm hop deadline
//              │         ▼
//              │   wait for that connection's answer
//              │     next / gone / invalid / timeout ──┐   a timeout also makes the connection
//              └─────────────────────────────────────┘   unresponsive until its next frame
//                    complete ─▶ finish(completed)    stop ─▶ finish(stopped)
import NotifBusProtocol

extension Broker {
    mutating func subscribe(
        events names: [String], priority: Int32, key: String?, resume: Bool = false,
        rid: RequestID, from c: ConnectionID, now: Instant
    ) {
        guard let client = sessions[c] else { return }
        guard client.observers.count < Limits.maxObserversPerConnection else {
            return refuse(c, rid, .chain(.tooManyObservers), now: now)
        }
        if resume, let key, let holder = observers.holder(ofKey: key) {
            return refuse(c, rid, .chain(.keyHeld(key: key, by: holder)), now: now)
        }
        let (id, replaced) = observers.add(client: c, events: names, priority: priority, key: key)
        if let replaced {
            send(.observerEvicted(replaced.id, by: id), to: replaced.client)
            forget(replaced, now: now)
        }
        client.observers.append(id)
        send(.reply(rid, .subscribed(observer: id, replaced: replaced?.id)), to: c)
        pump(now: now)
    }

    mutating func unsubscribe(_ target: UnsubscribeTarget, rid: RequestID, from c: ConnectionID, now: Instant) {
        let id: Int?
        switch target {
        case .observer(let text): id = observers.find(text)
        case .key(let key): id = observers.holder(ofKey: key)
        }
        guard let id else { return refuse(c, rid, .chain(.noSuchObserver), now: now) }
        removeObserver(id, now: now, pump: false)
        send(.reply(rid, .observerRemoved(id)), to: c)
        pump(now: now)
    }

    /// Removes an observer everywhere. If its hop is running, the hop ends as `gone`;
    /// callers that remove several pass `pump: false` and pump once afterwards.
    mutating func removeObserver(_ id: Int, now: Instant, pump shouldPump: Bool) {
        guard let record = observers.remove(id) else { return }
        forget(record, now: now)
        if shouldPump { pump(now: now) }
    }

    /// What an observer removed from the registry leaves behind: its place in its
    /// connection's list, and its hop if it was running (ended as `gone`).
    mutating func forget(_ record: ObserverRecord, now: Instant) {
        sessions[record.client]?.observers.removeAll { $0 == record.id }
        if events.awaited?.observer == record.id {
            counters.gone += 1
            recordHop(.gone, now: now)
        }
    }

    // MARK: Posting

    /// A post with a key (`once`) is answered from the key table when the key is held
    /// (Broker+Once.swift); otherwise it holds its key from when it is accepted. Kept apart
    /// from `post`, so that a post without a key pays one test for keys.
    @inline(never)
    mutating func post(
        name: String, payload: JSONBytes?, profile: ProfilePayload?, once key: String, rid: RequestID, from poster: ClientRecord,
        now: Instant
    ) {
        let fingerprint: UInt64
        if let payload {
            fingerprint = payload.withUnsafeBytes { Broker.fingerprint(target: name, body: $0) }
        } else {
            fingerprint = Broker.fingerprint(target: name, body: nil)
        }
        var key = key
        key.withUTF8 { key in
            let key = UnsafeRawBufferPointer(key)
            post(
                name: name, payload: payload, profile: profile, once: key, hash: once.hash(utf8: key), fingerprint: fingerprint, rid: rid,
                from: poster, now: now)
        }
    }

    /// `post` with a key (its UTF-8 where it lies) whose table hash and whose request's
    /// fingerprint are known.
    mutating func post(
        name: String, payload: JSONBytes?, profile: ProfilePayload?, once key: UnsafeRawBufferPointer, hash: UInt64, fingerprint: UInt64,
        rid: RequestID, from poster: ClientRecord, now: Instant
    ) {
        guard admitOnce(key, hash: hash, .post, fingerprint, rid: rid, from: poster.id, now: now) else { return }
        // Held from here; forgotten again if the post is refused (nothing else can see it
        // meanwhile): an accepted post is counted.
        let entry = once.insert(key, hash: hash, op: .post, fingerprint: fingerprint, wallMs: wallMs(now))
        let posted = counters.posted
        post(name: name, payload: payload, profile: profile, rid: rid, from: poster, onceEntry: entry, now: now)
        if counters.posted == posted { once.remove(entry) }
    }

    /// `poster` is the record of the connection that posted (which the sessions hold). The
    /// payload outlives the frame (the queue keeps it): it is copied, into the post's `event`
    /// frames, once it is accepted. `onceEntry` is its key's entry in the key table, or -1.
    mutating func post(
        name: String, payload: JSONBytes?, profile: ProfilePayload?, rid: RequestID, from poster: ClientRecord, onceEntry entry: Int32 = -1,
        now: Instant
    ) {
        let c = poster.id
        if shuttingDown { return refuse(c, rid, .session(.shuttingDown), now: now) }
        // A click the categories refuse is refused as such even when the queue is full:
        // retrying it could never succeed, while queue_full invites a retry.
        var launches = false
        if case .didReceive(let action, let hasUserText, let categoryID)? = profile {
            switch categories.check(action, hasUserText: hasUserText, categoryID: categoryID) {
            case .failure(let error): return refuse(c, rid, .category(error), now: now)
            case .success(let l): launches = l
            }
        }
        let running = events.isRunning
        // Launch retentions waiting for `launch` still hold their posts: they count as waiting
        // posts, or a run of clicks behind a slow write would hold memory without bound. A
        // post that would start at once becomes one of them when its chain ends unhandled,
        // so it is refused too once they alone fill the queue.
        let waiting = events.count + held.retentionCount
        if waiting + (running ? 1 : 0) > configuration.maxQueue {
            return refuse(c, rid, .chain(.queueFull(max: configuration.maxQueue)), now: now)
        }
        if running && poster.queuedPosts >= configuration.queueShare {
            return refuse(c, rid, .chain(.connectionQueueFull(waiting: poster.queuedPosts, share: configuration.queueShare)), now: now)
        }
        let size = payload?.count ?? 0
        if (running || held.hasRetentions) && events.waitingBytes + held.retentionBytes + size > configuration.maxQueueBytes {
            return refuse(c, rid, .chain(.queueBytesFull(max: configuration.maxQueueBytes)), now: now)
        }
        if running && poster.queuedBytes + size > configuration.queueByteShare {
            return refuse(c, rid, .chain(.connectionQueueBytesFull(max: configuration.queueByteShare)), now: now)
        }
        counters.posted += 1
        // Nothing runs and nothing waits: the post starts down its chain at once. Through the
        // queue it would be taken off again straight away (its poster's share and the
        // queue's bytes back where they were), which is all this skips.
        if !running && events.count == 0 {
            events.startNow(
                poster: c, requestID: rid, name: name, payload: payload, isWillPresent: profile == .willPresent,
                launchesApp: launches, onceEntry: entry, chain: observers.chain(for: name))
            // A keyed post is recorded running before it goes down its chain.
            if entry >= 0 { startKeyed(now: now) }
            return pump(now: now)
        }
        poster.queuedPosts += 1
        poster.queuedBytes += size
        _ = events.enqueue(
            poster: c, requestID: rid, name: name, payload: payload,
            isWillPresent: profile == .willPresent, launchesApp: launches, onceEntry: entry)
        pump(now: now)
    }

    // MARK: Running the chain

    /// Advances the queue until an answer is awaited or nothing is left.
    mutating func pump(now: Instant) {
        let budget = hopBudget
        while true {
            if events.awaited != nil { return }
            if !events.isRunning {
                guard !shuttingDown, let event = dequeueEvent() else { return }
                events.begin(event, chain: observers.chain(for: event.post.name))
                if event.post.onceEntry >= 0 { startKeyed(event, now: now) }
            } else {
                // Between hops.
                var target: (id: Int, client: ConnectionID)? = nil
                let event = events.runningEvent ?? 0
                while let id = events.nextInChain() {
                    guard let client = observers.client(of: id) else { continue }
                    if !sessions.mayTakeHop(client, of: event, budget: budget) {
                        counters.skipped += 1
                        events.skip(id)
                        continue
                    }
                    target = (id, client)
                    break
                }
                guard let target else {
                    finish(.unhandled, by: nil, value: nil, now: now)
                    continue
                }
                let hop = AwaitedHop(observer: target.id, client: target.client, deadline: now &+ budget, startedAt: now)
                emit(to: target.client, events.awaitHop(hop, encodingInto: output))
            }
        }
    }

    /// Takes the oldest waiting post off the queue, and off its poster's share.
    mutating func dequeueEvent() -> RunningEvent? {
        guard let event = events.dequeue() else { return nil }
        if let poster = sessions[event.post.poster] {
            poster.queuedPosts -= 1
            poster.queuedBytes -= event.post.payloadCount
        }
        return event
    }

    /// `dequeueEvent`, for what needs only the post (its poster, its request).
    mutating func dequeue() -> QueuedPost? { dequeueEvent()?.post }

    /// The running hop's deadline passed without an answer. Its connection is now
    /// unresponsive: until it sends a frame (a late answer, a ping, anything), its observers
    /// get no event in this or any later event, so a silent connection holds the queue up
    /// for one hop timeout in all, not one per event.
    mutating func hopTimedOut(now: Instant) {
        guard let hop = events.awaited, hop.deadline <= now else { return }
        // A keyed event waits on for its "running" record, however long the disk takes.
        if hop.client == AwaitedHop.journal {
            events.endRecordWait()
            return events.awaitRecord(until: now &+ hopBudget, now: now)
        }
        counters.hopTimeouts += 1
        sessions[hop.client]?.unresponsive = true
        endHop(.timeout, now: now)
    }

    mutating func handleAnswer(_ answer: consuming Answer, from c: ConnectionID, now: Instant) {
        // The running event is read, not held: once it ends, its record is reused only if
        // nothing else holds it.
        guard let hop = events.awaited, hop.client == c, events.runningEvent == answer.event else {
            return  // another connection, another event, an ended hop, or a second answer
        }
        switch consume answer {
        case .next:
            endHop(.next, now: now)
        case .stop:
            recordHop(.stop, now: now)
            finish(.stopped, by: hop.observer, value: nil, now: now)
            pump(now: now)
        case .complete(_, let value):
            if events.runningIsWillPresent && !PresentationOptionNames.isValidCompletion(value) {
                refuse(c, nil, .chain(.invalidCompletion), now: now)
                counters.invalid += 1
                return endHop(.invalid, now: now)
            }
            recordHop(.complete, now: now)
            finish(.completed, by: hop.observer, value: value, now: now)
            pump(now: now)
        }
    }

    /// Ends the running hop and moves on down the chain.
    mutating func endHop(_ reply: HopReply, now: Instant) {
        recordHop(reply, now: now)
        pump(now: now)
    }

    /// Ends the running hop in the trace and charges its time to its connection.
    mutating func recordHop(_ reply: HopReply, now: Instant) {
        guard let hop = events.endHop(reply), let event = events.runningEvent else { return }
        sessions.update(hop.client) { $0.charge(hop.duration(until: now), in: event) }
    }

    /// Replies to the poster, applies launch retention, and clears the running event.
    mutating func finish(_ outcome: EventOutcome, by: Int?, value: RawJSON?, now: Instant) {
        guard let event = events.finish() else { return }
        switch outcome {
        case .completed: counters.completed += 1
        case .stopped: counters.stopped += 1
        case .unhandled: counters.unhandled += 1
        }
        if event.post.endsAside & outcome.bit != 0 { return finishAside(event, outcome, by: by, value: value, now: now) }
        sendPostResult(event, outcome, by: by, value: value, retained: false)
        events.recycle(event)
    }

    /// The poster's reply: the outcome, the value and the trace, encoded from the record.
    mutating func sendPostResult(_ event: RunningEvent, _ outcome: EventOutcome, by: Int?, value: RawJSON?, retained: Bool) {
        guard sessions.contains(event.post.poster) else { return }
        let frame = event.trace.withUnsafeBufferPointer { trace in
            PostReply.encodeReply(
                event.post.requestID, event: event.post.event, outcome: outcome, by: by, value: value, retained: retained, trace: trace,
                into: output)
        }
        emit(to: event.post.poster, frame)
    }
}
