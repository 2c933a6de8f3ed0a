// Idempotency keys (`once`, §3.8), composed: a keyed post, put, take or setCategories is
// looked up in the key table before anything else about it is decided. A repeat (same op,
// same fingerprint) is answered with the first outcome, byte for byte, marked
// `"repeat":true`, or waits for it while the first post is queued or running; another use of
// the key is refused `once_conflict`. A fresh key is held from when its request takes
// effect, and with `--state-dir` written in the same journal record as the change. The
// table keeps records (OnceTable.swift); this decides.
//
// A keyed post:
//
//     accepted ──▶ pending ──event starts──▶ running ──chain ends──▶ ended: outcome written
//        (queued: memory only)   │ (state-dir, a chain: "running"        (state-dir: with its
//                                │  written before the first event)      launch retention) and
//                                └── refused (its "running" record          answered, repeats too
//                                    failed, shutdown): forgotten
import NotifBusProtocol

extension Broker {
    /// The wall clock at `now`, in milliseconds since 1970.
    @inline(__always)
    func wallMs(_ now: Instant) -> Int64 {
        wallAtStart &+ Int64(truncatingIfNeeded: (now &- startedAt) / 1_000_000)
    }

    /// The fingerprint of a request: its target (event name, slot; empty for the categories)
    /// and the bytes of its body as sent (`payload`, `value`, `categories`; none for `take`).
    static func fingerprint(target: String, body: UnsafeRawBufferPointer?) -> UInt64 {
        var target = target
        return target.withUTF8 { fingerprint(target: UnsafeRawBufferPointer($0), body: body) }
    }

    /// The same from the target's UTF-8 where it lies.
    static func fingerprint(target: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer?) -> UInt64 {
        fingerprint(targetHash: ContentHash.hash(target), body: body)
    }

    /// The same from the target's `ContentHash`.
    @inline(__always)
    static func fingerprint(targetHash: UInt64, body: UnsafeRawBufferPointer?) -> UInt64 {
        ContentHash.combine(targetHash, ContentHash.hash(body ?? UnsafeRawBufferPointer(start: nil, count: 0)))
    }

    static func fingerprint(target: String, raw: RawJSON?) -> UInt64 {
        guard let raw else { return fingerprint(target: target, body: nil) }
        return raw.withUnsafeBytes { fingerprint(target: target, body: $0) }
    }

    /// Looks `key` up for a request of `op` with `fingerprint`. A repeat is answered now (its
    /// key ended) or once its post ends; another use of the key is refused. True when the key
    /// is not held: the request goes on as a new one.
    /// `hash` is the key's in the table, when the caller has it already.
    mutating func admitOnce(_ key: String, _ op: OnceOp, _ fingerprint: UInt64, rid: RequestID, from c: ConnectionID, now: Instant) -> Bool {
        var key = key
        return key.withUTF8 { utf8 in
            let key = UnsafeRawBufferPointer(utf8)
            return admitOnce(key, hash: once.hash(utf8: key), op, fingerprint, rid: rid, from: c, now: now)
        }
    }

    /// `admitOnce` for a key's UTF-8 where it lies, whose `hash` the table gave.
    mutating func admitOnce(
        _ key: UnsafeRawBufferPointer, hash: UInt64, _ op: OnceOp, _ fingerprint: UInt64, rid: RequestID, from c: ConnectionID, now: Instant
    ) -> Bool {
        guard let i = once.find(key, hash: hash, nowMs: wallMs(now)) else { return true }
        guard once.op(i) == op && once.fingerprint(i) == fingerprint else {
            refuse(c, rid, .once(.conflict(key: String(decoding: key, as: UTF8.self), firstOp: once.op(i))), now: now)
            return false
        }
        if once.state(i) == .ended {
            let frame = once.withOutcome(i) { isError, bytes in OutboundFrame.repeatReply(rid, isError: isError, bytes, into: output) }
            emit(to: c, frame)
            return false
        }
        guard let client = sessions[c] else { return false }
        guard client.repeatsWaiting < configuration.maxRepeatsWaitingPerConnection else {
            refuse(c, rid, .once(.tooManyRepeats(max: configuration.maxRepeatsWaitingPerConnection)), now: now)
            return false
        }
        client.repeatsWaiting += 1
        once.addWaiter(i, OnceWaiter(connection: c, requestID: rid))
        return false
    }

    /// Carries out a request with an idempotency key.
    mutating func handleKeyed(_ key: String, _ request: consuming KeyedRequest, id rid: RequestID, from client: ClientRecord, now: Instant) {
        switch consume request {
        case .post(let name, let payload, let profile):
            post(name: name, payload: payload, profile: profile, once: key, rid: rid, from: client, now: now)
        case .put(let slot, let value):
            put(slot: slot, value: value, once: key, rid: rid, from: client.id, now: now)
        case .take(let slot, let wait):
            take(slot: slot, waitMs: wait, once: key, rid: rid, from: client.id, now: now)
        case .setCategories(let set):
            setCategories(set, once: key, rid: rid, from: client, now: now)
        }
    }

    /// Whether a request with this key would be answered from the table (a repeat or a
    /// conflict) rather than applied: it then writes nothing.
    func isHeld(_ key: String?) -> Bool {
        guard let key else { return false }
        return once.holds(key)
    }

    /// The repeats that waited for a key's first outcome get it, each marked as a repeat.
    mutating func answerRepeats(_ waiters: [OnceWaiter], isError: Bool, _ outcome: UnsafeRawBufferPointer) {
        for w in waiters {
            guard let client = sessions[w.connection] else { continue }
            client.repeatsWaiting -= 1
            emit(to: w.connection, OutboundFrame.repeatReply(w.requestID, isError: isError, outcome, into: output))
        }
    }

    /// The repeats that waited for a request that was refused get the same refusal: nothing
    /// was recorded, and sending it again is a fresh try.
    mutating func refuseRepeats(_ waiters: [OnceWaiter], _ error: BrokerError, now: Instant) {
        for w in waiters {
            guard let client = sessions[w.connection] else { continue }
            client.repeatsWaiting -= 1
            refuse(w.connection, w.requestID, error, now: now)
        }
    }

    /// Records the outcome of a keyed request's entry and answers the repeats waiting for it.
    mutating func endKey(_ entry: Int32, _ outcome: OnceOutcome, now: Instant) {
        outcome.withBytes { isError, bytes in endKey(entry, isError: isError, bytes, now: now) }
    }

    /// `endKey` with the outcome's bytes lent (not memory of the output store).
    mutating func endKey(_ entry: Int32, isError: Bool, _ outcome: UnsafeRawBufferPointer, now: Instant) {
        let waiters = once.end(entry, isError: isError, outcome: outcome, wallMs: wallMs(now))
        if !waiters.isEmpty { answerRepeats(waiters, isError: isError, outcome) }
    }

    /// Forgets a keyed request's entry that took no effect; its waiting repeats get `error`.
    mutating func dropKey(_ entry: Int32, refusal error: BrokerError, now: Instant) {
        refuseRepeats(once.remove(entry), error, now: now)
    }

    /// The key of a post that will not run (queued or running at shutdown) is forgotten.
    mutating func forgetKey(of post: QueuedPost, refusal error: BrokerError, now: Instant) {
        guard post.onceEntry >= 0 else { return }
        dropKey(post.onceEntry, refusal: error, now: now)
    }

    /// The record of a key in the journal.
    func onceRecord(_ entry: Int32, outcome: OnceOutcome?, now: Instant) -> OnceRecord {
        OnceRecord(key: once.key(entry), op: once.op(entry), fingerprint: once.fingerprint(entry), wallMs: wallMs(now), outcome: outcome)
    }

    /// Keys restored from the journal, oldest first; those of posts cut by a stop of the
    /// broker answer `interrupted`.
    mutating func restore(_ records: [OnceRecord], now: Instant) {
        for r in records {
            if let i = once.index(of: r.key) { once.remove(i) }
            let i = once.insert(r.key, op: r.op, fingerprint: r.fingerprint, wallMs: r.wallMs)
            once.end(i, outcome: r.outcome ?? .interrupted, wallMs: r.wallMs)
        }
        once.forgetPastBounds(nowMs: wallMs(now))
    }

    // MARK: Posts

    /// A keyed post's event has just started down `event`'s chain: with `--state-dir` and
    /// observers to see it, its "running" record is written before the first `event` frame.
    /// Inlined where a post starts at once: a call of its own cost chain3-once 13 instructions
    /// per post, and the plain post nothing either way.
    @inline(__always)
    mutating func startKeyed(now: Instant) {
        guard let event = events.running else { return }
        startKeyed(event, now: now)
    }

    mutating func startKeyed(_ event: RunningEvent, now: Instant) {
        once.setRunning(event.post.onceEntry)
        guard configuration.persistsState, !event.chain.isEmpty else { return }
        writeRunningRecord(event, now: now)
    }

    /// Writes the running keyed event's "running" record and awaits it. Apart from
    /// `startKeyed`, which without `--state-dir` then saves no registers (chain3-once: 9
    /// instructions per post).
    @inline(never)
    mutating func writeRunningRecord(_ event: RunningEvent, now: Instant) {
        beginWrite(nil, .keysOnly, once: [onceRecord(event.post.onceEntry, outcome: nil, now: now)], then: .running(event), now: now)
        events.awaitRecord(until: now &+ hopBudget, now: now)
    }

    /// The "running" record of the running keyed event is written (the chain goes on) or
    /// failed (the post is refused `storage_failed`: no observer saw it).
    mutating func recordedRunning(_ event: RunningEvent, written: Bool, now: Instant) {
        guard events.running === event, events.isAwaitingRecord else { return }  // ended meanwhile (shutdown)
        events.endRecordWait()
        if !written {
            _ = events.finish()
            counters.posted -= 1
            refuse(event.post.poster, event.post.requestID, .storageFailed, now: now)
            forgetKey(of: event.post, refusal: .storageFailed, now: now)
        }
        pump(now: now)
    }

    /// An event that ended otherwise than most: one that retains its payload in `launch`
    /// (which records a keyed post's outcome in its own write), or a keyed post's, whose
    /// outcome is recorded (with `--state-dir`, written first) before it and its waiting
    /// repeats are answered. Kept out of `finish`, which stays as short as it was.
    @inline(never)
    mutating func finishAside(_ event: consuming RunningEvent, _ outcome: EventOutcome, by: Int?, value: RawJSON?, now: Instant) {
        if outcome == .unhandled && event.post.launchesApp { return retainLaunchPayload(event, now: now) }
        if configuration.persistsState {
            let result = OnceOutcome.result(resultBytes(event, outcome, by: by, value: value, retained: false))
            return beginWrite(
                nil, .keysOnly, once: [onceRecord(event.post.onceEntry, outcome: result, now: now)], then: .ended(event, outcome, result),
                now: now)
        }
        // Encoded as the reply, and its result copied out of it: one copy, no second encoding.
        let (frame, result) = encodePostReply(event, outcome, by: by, value: value)
        if sessions.contains(event.post.poster) { emit(to: event.post.poster, frame) }
        // Recorded from where the reply holds it: copied into the table, and out of the
        // output store first when repeats are answered from it (which may move the store).
        let entry = event.post.onceEntry, wall = wallMs(now)
        if once.isAwaited(entry) {
            let waiters = output.withBytes(of: result) { once.end(entry, isError: false, outcome: $0, wallMs: wall) }
            output.bytes(of: result).withUnsafeBytes { answerRepeats(waiters, isError: false, $0) }
        } else {
            output.withBytes(of: result) { once.endUnawaited(entry, isError: false, outcome: $0, wallMs: wall) }
        }
        events.recycle(event)
    }

    /// A post's reply, encoded from its record, and the range of its result. Apart from
    /// `finishAside`, which mutates the broker and would retain and release the output store
    /// around the encoding (chain3-once: 47 instructions per post).
    func encodePostReply(_ event: RunningEvent, _ outcome: EventOutcome, by: Int?, value: RawJSON?) -> (reply: OutputRange, result: OutputRange) {
        event.trace.withUnsafeBufferPointer { trace in
            PostReply.encodeReplyAndResult(
                event.post.requestID, event: event.post.event, outcome: outcome, by: by, value: value, retained: false, trace: trace,
                into: output)
        }
    }

    /// The result of a post, as its reply carries it.
    func resultBytes(_ event: RunningEvent, _ outcome: EventOutcome, by: Int?, value: RawJSON?, retained: Bool) -> RawJSON {
        event.trace.withUnsafeBufferPointer { trace in
            PostReply.resultBytes(event: event.post.event, outcome: outcome, by: by, value: value, retained: retained, trace: trace)
        }
    }

    /// A keyed post's outcome is known (and, with `--state-dir`, on disk or failed to be):
    /// its poster and its waiting repeats are answered.
    mutating func endPost(_ event: RunningEvent, _ outcome: OnceOutcome, now: Instant) {
        if sessions.contains(event.post.poster), case .result(let bytes) = outcome {
            send(.reply(event.post.requestID, .value(bytes)), to: event.post.poster)
        }
        endKey(event.post.onceEntry, outcome, now: now)
    }

    /// A keyed post whose "ended" record failed and whose event no observer was sent (no
    /// chain, or only observers passed over): nothing happened and nothing of it is on disk,
    /// so it is refused `storage_failed` like a request whose write failed, and not counted.
    /// True when it was.
    mutating func refuseUnseen(_ event: RunningEvent, _ outcome: EventOutcome, now: Instant) -> Bool {
        guard !event.trace.contains(where: { $0.reply != .skipped }) else { return false }
        counters.posted -= 1
        switch outcome {
        case .completed: counters.completed -= 1
        case .stopped: counters.stopped -= 1
        case .unhandled: counters.unhandled -= 1
        }
        refuse(event.post.poster, event.post.requestID, .storageFailed, now: now)
        forgetKey(of: event.post, refusal: .storageFailed, now: now)
        return true
    }

    /// The outcome of a keyed post that ends `unhandled` and retains its payload.
    func retentionOutcome(_ event: RunningEvent, retained: Bool) -> OnceOutcome? {
        guard event.post.onceEntry >= 0 else { return nil }
        return .result(resultBytes(event, .unhandled, by: nil, value: nil, retained: retained))
    }

    /// A launch retention's write ended: the slot holds the payload if it was written; the
    /// post's result says so.
    mutating func answerRetention(_ event: RunningEvent, written: Bool, now: Instant) {
        guard event.post.onceEntry >= 0, let outcome = retentionOutcome(event, retained: written) else {
            return sendPostResult(event, .unhandled, by: nil, value: nil, retained: written)
        }
        if !written && refuseUnseen(event, .unhandled, now: now) { return }
        endPost(event, outcome, now: now)
    }

    // MARK: setCategories

    mutating func setCategories(_ set: CategorySet, once key: String?, rid: RequestID, from client: ClientRecord, now: Instant) {
        let c = client.id
        var ticket: OnceTicket? = nil
        if let key {
            let fingerprint = Broker.fingerprint(target: "", raw: set.raw)
            guard admitOnce(key, .setCategories, fingerprint, rid: rid, from: c, now: now) else { return }
            let entry = once.insert(key, op: .setCategories, fingerprint: fingerprint, wallMs: wallMs(now))
            ticket = OnceTicket(entry: entry, outcome: .result(ReplyResult.categoryCount(set.categories.count).resultBytes))
        }
        beginWrite(.categories, .categories(set.raw), once: records(ticket, now: now), then: .categories(c, rid, set, once: ticket), now: now)
    }

    /// The journal records of the keys a write holds.
    func records(_ tickets: OnceTicket?..., now: Instant) -> [OnceRecord] {
        tickets.compactMap { $0 }.map { onceRecord($0.entry, outcome: $0.outcome, now: now) }
    }

    /// Answers a keyed write's request once its write ended: recorded and answered with its
    /// outcome if written, forgotten and refused `storage_failed` if not.
    mutating func answerKeyed(_ c: ConnectionID, _ rid: RequestID, _ written: Bool, _ ticket: OnceTicket, now: Instant) {
        if written {
            endKey(ticket.entry, ticket.outcome, now: now)
        } else {
            dropKey(ticket.entry, refusal: .storageFailed, now: now)
        }
        guard sessions.contains(c) else { return }
        guard written else { return refuse(c, rid, .storageFailed, now: now) }
        if case .result(let bytes) = ticket.outcome { send(.reply(rid, .value(bytes)), to: c) }
    }

    // MARK: Takes

    /// A keyed take recorded its value: the takes still waiting on `slot` with the same key
    /// (repeats sent while the first waited) get it too.
    mutating func answerWaitingRepeats(slot: String, key: String, _ outcome: OnceOutcome) {
        for id in slots.waiterIDs(slot) {
            guard let waiter = slots.waiter(id), !waiter.held, waiter.once == key, let taker = removeTakeWaiter(id) else { continue }
            send(.repeated(taker.requestID, outcome), to: taker.client)
        }
    }

    /// Gives `value` to the oldest ready take waiting on `slot`, for `source` (a put or a
    /// launch retention), and answers both; false when no take waits. A waiting take whose
    /// key is held meanwhile is answered from the table and the value goes on to the next.
    /// With `--state-dir`, when either side has a key, the keys are written first, in a
    /// record of the slot left empty and both are answered once that is done; should the write fail,
    /// both are refused `storage_failed` (a retention says `"retained":null`) and nothing
    /// changed.
    mutating func handOver(slot: String, value: RawJSON, from source: HandOver.Source, now: Instant) -> Bool {
        while let id = slots.firstReadyWaiter(slot), let taker = removeTakeWaiter(id) {
            var takerOnce: OnceTicket? = nil
            if let key = taker.once {
                let fingerprint = Broker.fingerprint(target: slot, body: nil)
                guard admitOnce(key, .take, fingerprint, rid: taker.requestID, from: taker.client, now: now) else { continue }
                let entry = once.insert(key, op: .take, fingerprint: fingerprint, wallMs: wallMs(now))
                takerOnce = OnceTicket(entry: entry, outcome: .result(value))
            }
            var sourceOnce: OnceTicket? = nil
            switch source {
            case .put(_, _, let ticket): sourceOnce = ticket
            case .retention(let event, let outcome):
                if let outcome { sourceOnce = OnceTicket(entry: event.post.onceEntry, outcome: outcome) }
            }
            let handOver = HandOver(taker: taker, takerOnce: takerOnce, value: value, source: source)
            if configuration.persistsState && (takerOnce != nil || sourceOnce != nil) {
                // The slot stays empty on disk: its record says so, beside the keys.
                beginWrite(
                    .slot(slot), .slot(name: slot, value: nil), once: records(takerOnce, sourceOnce, now: now), then: .handOver(handOver),
                    now: now)
            } else {
                handedOver(handOver, written: true, wrote: false, now: now)
            }
            return true
        }
        return false
    }

    /// A hand-over's keys were written (`wrote`), or there were none to write, or the write
    /// failed. After a write the put is answered first (its reply is the one the write
    /// acknowledges, and comes first on its connection, decision 29), then the taker; without
    /// one, the taker first, as a value handed over always was.
    mutating func handedOver(_ h: HandOver, written: Bool, wrote: Bool, now: Instant) {
        if wrote { answerSource(h, written: written, wrote: wrote, now: now) }
        let slot = h.taker.slot
        if written {
            if let ticket = h.takerOnce, let key = h.taker.once {
                endKey(ticket.entry, ticket.outcome, now: now)
                replyValue(to: h.taker.client, h.taker.requestID, h.value)
                answerWaitingRepeats(slot: slot, key: key, ticket.outcome)
            } else if sessions[h.taker.client] != nil {
                replyValue(to: h.taker.client, h.taker.requestID, h.value)
            } else if wrote {
                // Its taker left while the putter's key was written: the value must not be lost.
                handBack(slot, h.value, now: now)
            }
        } else {
            if let ticket = h.takerOnce { dropKey(ticket.entry, refusal: .storageFailed, now: now) }
            refuse(h.taker.client, h.taker.requestID, .storageFailed, now: now)
        }
        if !wrote { answerSource(h, written: written, wrote: wrote, now: now) }
    }

    /// The put or the launch retention that handed a value over is answered.
    mutating func answerSource(_ h: HandOver, written: Bool, wrote: Bool, now: Instant) {
        switch h.source {
        case .put(let c, let rid, let ticket?):
            answerKeyed(c, rid, written, ticket, now: now)
        case .put(let c, let rid, nil):
            if written {
                if sessions[c] != nil { send(.reply(rid, .put(replaced: false, delivered: true)), to: c) }
            } else {
                refuse(c, rid, .storageFailed, now: now)
            }
        case .retention(let event, _):
            answerRetention(event, written: written, now: now)
        }
    }
}
