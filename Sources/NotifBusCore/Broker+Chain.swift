// Observers and the ordered chain: subscribe with priority and unique key, the single
// broker-wide FIFO of posts, and the walk of each event down its chain one hop at a time.
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
    mutating func subscribe(events: [String], priority: Int32, key: String?, resume: Bool = false,
                            rid: RequestID, from c: ConnectionID, now: Instant) {
        guard let client = clients[c] else { return }
        guard client.observers.count < Limits.maxObserversPerConnection else {
            return refuse(c, rid, .chain(.tooManyObservers), now: now)
        }
        if resume, let key, let holder = observerKeys[key] {
            return refuse(c, rid, .chain(.keyHeld(key: key, by: holder)), now: now)
        }
        let id = nextObserverID
        nextObserverID += 1
        var replaced: Int? = nil
        if let key, let old = observerKeys[key] {
            replaced = old
            if let oldClient = observers[old]?.client { send(.observerEvicted(old, by: id), to: oldClient) }
            removeObserver(old, now: now, pump: false)
        }
        observers[id] = ObserverRecord(id: id, client: c, events: events, priority: priority, key: key)
        clients[c]?.observers.append(id)
        if let key { observerKeys[key] = id }
        for name in events { insertIntoChain(name, id, priority) }

        send(.reply(rid, .subscribed(observer: id, replaced: replaced)), to: c)
        pump(now: now)
    }

    /// Ids grow with subscription order, so (priority, id) is the chain order.
    mutating func insertIntoChain(_ name: String, _ id: Int, _ priority: Int32) {
        var chain = chains.removeValue(forKey: name) ?? []
        var lo = 0, hi = chain.count
        while lo < hi {
            let mid = (lo + hi) / 2
            let p = observers[chain[mid]]!.priority
            if p <= priority { lo = mid + 1 } else { hi = mid }
        }
        chain.insert(id, at: lo)
        chains[name] = chain
    }

    mutating func unsubscribe(_ target: UnsubscribeTarget, rid: RequestID, from c: ConnectionID, now: Instant) {
        let id: Int?
        switch target {
        case .observer(let text): id = Broker.parseID(text, prefix: "o").flatMap { observers[$0] != nil ? $0 : nil }
        case .key(let key): id = observerKeys[key]
        }
        guard let id else { return refuse(c, rid, .chain(.noSuchObserver), now: now) }
        removeObserver(id, now: now, pump: false)
        send(.reply(rid, .observerRemoved(id)), to: c)
        pump(now: now)
    }

    /// Removes an observer everywhere. If its hop is running, the hop ends as `gone`;
    /// callers that remove several pass `pump: false` and pump once afterwards.
    mutating func removeObserver(_ id: Int, now: Instant, pump shouldPump: Bool) {
        guard let record = observers.removeValue(forKey: id) else { return }
        clients[record.client]?.observers.removeAll { $0 == id }
        if let key = record.key, observerKeys[key] == id { observerKeys[key] = nil }
        for name in record.events {
            guard var chain = chains.removeValue(forKey: name) else { continue }
            chain.removeAll { $0 == id }
            if !chain.isEmpty { chains[name] = chain }
        }
        if current?.hopObserver == id {
            counters.gone += 1
            recordHop(.gone, now: now)
        }
        if shouldPump { pump(now: now) }
    }

    static func parseID(_ text: String, prefix: Character) -> Int? {
        guard text.first == prefix else { return nil }
        return Int(text.dropFirst())
    }

    // MARK: Posting

    mutating func post(name: String, payload: RawJSON?, profile: ProfilePayload?, rid: RequestID, from c: ConnectionID, now: Instant) {
        if shuttingDown { return refuse(c, rid, .session(.shuttingDown), now: now) }
        // A click the categories refuse is refused as such even when the queue is full:
        // retrying it could never succeed, while queue_full invites a retry.
        var launches = false
        if case .didReceive(let action, let hasUserText, let categoryID)? = profile {
            switch checkAction(action, hasUserText: hasUserText, categoryID: categoryID) {
            case .failure(let error): return refuse(c, rid, .category(error), now: now)
            case .success(let l): launches = l
            }
        }
        if current != nil && queue.count >= configuration.maxQueue {
            return refuse(c, rid, .chain(.queueFull(max: configuration.maxQueue)), now: now)
        }
        guard let poster = clients[c] else { return }
        if current != nil && poster.queuedPosts >= configuration.queueShare {
            return refuse(c, rid, .chain(.connectionQueueFull(waiting: poster.queuedPosts, share: configuration.queueShare)), now: now)
        }
        let size = payload?.count ?? 0
        if current != nil && queuedBytes + size > configuration.maxQueueBytes {
            return refuse(c, rid, .chain(.queueBytesFull(max: configuration.maxQueueBytes)), now: now)
        }
        if current != nil && poster.queuedBytes + size > configuration.queueByteShare {
            return refuse(c, rid, .chain(.connectionQueueBytesFull(max: configuration.queueByteShare)), now: now)
        }
        let event = nextEventID
        nextEventID += 1
        counters.posted += 1
        queuedBytes += size
        poster.queuedPosts += 1
        poster.queuedBytes += size
        queue.append(QueuedPost(event: event, poster: c, requestID: rid, name: name, payload: payload,
                                isWillPresent: profile == .willPresent, launchesApp: launches))
        pump(now: now)
    }

    /// Checks a `didReceive` action against the categories in force, and says whether it
    /// launches the app.
    func checkAction(_ action: String, hasUserText: Bool, categoryID: String?) -> Result<Bool, CategoryError> {
        let category = categoryID.flatMap { categories.categories[$0] }
        if action == ProfilePayload.defaultActionIdentifier || action == ProfilePayload.dismissActionIdentifier {
            if hasUserText { return .failure(.userTextWithoutTextInput) }
            if action == ProfilePayload.defaultActionIdentifier { return .success(true) }
            guard category?.customDismissAction == true else {
                return .failure(.dismissWithoutCustomDismiss)
            }
            return .success(false)
        }
        guard let category else {
            return .failure(.unknownCategory(action: action, category: categoryID))
        }
        guard let rule = category.actions[action], let categoryID else {
            return .failure(.unknownAction(action: action, category: categoryID ?? ""))
        }
        if rule.textInput != hasUserText {
            return .failure(rule.textInput ? .textInputRequired(action: action) : .textInputNotAllowed(action: action))
        }
        return .success(rule.foreground)
    }

    // MARK: Running the chain

    /// Advances the queue until an answer is awaited or nothing is left.
    mutating func pump(now: Instant) {
        while true {
            if current == nil {
                guard !shuttingDown, let post = dequeue() else { return }
                current = RunningEvent(post: post, chain: chains[post.name] ?? [])
            }
            if current!.hopObserver != nil { return }
            var target: ObserverRecord? = nil
            let budget = UInt64(configuration.hopTimeoutMs) * 1_000_000
            while current!.nextIndex < current!.chain.count {
                let id = current!.chain[current!.nextIndex]
                current!.nextIndex += 1
                guard let record = observers[id] else { continue }
                if clients[record.client]?.unresponsive == true || (current!.spent[record.client] ?? 0) >= budget {
                    counters.skipped += 1
                    current!.trace.append(TraceHop(observer: id, reply: .skipped))
                    continue
                }
                target = record
                break
            }
            guard let target else {
                finish(.unhandled, by: nil, value: nil)
                continue
            }
            current!.hopObserver = target.id
            current!.hopClient = target.client
            current!.hopDeadline = now &+ budget
            current!.hopStartedAt = now
            let post = current!.post
            send(.event(event: post.event, observer: target.id, name: post.name, payload: post.payload), to: target.client)
        }
    }

    /// Takes the oldest waiting post off the queue, and off its poster's share.
    mutating func dequeue() -> QueuedPost? {
        guard let post = queue.popFirst() else { return nil }
        let size = post.payload?.count ?? 0
        queuedBytes -= size
        if let poster = clients[post.poster] {
            poster.queuedPosts -= 1
            poster.queuedBytes -= size
        }
        return post
    }

    /// The running hop's deadline passed without an answer. Its connection is now
    /// unresponsive: until it sends a frame (a late answer, a ping, anything), its observers
    /// get no event in this or any later event, so a silent connection holds the queue up
    /// for one hop timeout in all, not one per event.
    mutating func hopTimedOut(now: Instant) {
        guard let cur = current, cur.hopObserver != nil, cur.hopDeadline <= now else { return }
        counters.hopTimeouts += 1
        clients[cur.hopClient]?.unresponsive = true
        endHop(.timeout, now: now)
    }

    mutating func handleAnswer(_ answer: Answer, from c: ConnectionID, now: Instant) {
        guard let cur = current, let observer = cur.hopObserver, cur.hopClient == c, cur.post.event == answer.event else {
            return  // another connection, another event, an ended hop, or a second answer
        }
        switch answer {
        case .next:
            endHop(.next, now: now)
        case .stop:
            recordHop(.stop, now: now)
            finish(.stopped, by: observer, value: nil)
            pump(now: now)
        case .complete(_, let value):
            if cur.post.isWillPresent && !PresentationOptionNames.isValidCompletion(value) {
                refuse(c, nil, .chain(.invalidCompletion), now: now)
                counters.invalid += 1
                return endHop(.invalid, now: now)
            }
            recordHop(.complete, now: now)
            finish(.completed, by: observer, value: value)
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
        guard let observer = current?.hopObserver else { return }
        current!.trace.append(TraceHop(observer: observer, reply: reply))
        current!.hopObserver = nil
        let took = now >= current!.hopStartedAt ? now - current!.hopStartedAt : 0
        current!.spent[current!.hopClient, default: 0] += took
    }

    /// Replies to the poster, applies launch retention, and clears the running event.
    mutating func finish(_ outcome: EventOutcome, by: Int?, value: RawJSON?) {
        guard let cur = current else { return }
        current = nil
        switch outcome {
        case .completed: counters.completed += 1
        case .stopped: counters.stopped += 1
        case .unhandled: counters.unhandled += 1
        }
        if outcome == .unhandled && cur.post.launchesApp { return retainLaunchPayload(cur) }
        sendPostResult(cur, outcome, by: by, value: value, retained: false)
    }

    /// The poster's reply: the outcome, the value and the trace.
    mutating func sendPostResult(_ cur: RunningEvent, _ outcome: EventOutcome, by: Int?, value: RawJSON?, retained: Bool) {
        guard clients[cur.post.poster] != nil else { return }
        let result = PostReply(event: cur.post.event, outcome: outcome, by: by, value: value, retained: retained, trace: cur.trace)
        send(.reply(cur.post.requestID, .posted(result)), to: cur.post.poster)
    }
}
