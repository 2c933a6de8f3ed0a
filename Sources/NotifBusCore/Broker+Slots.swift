// Retained slots, composed: take-once mailboxes that outlive connections (SlotStore keeps
// values and waiting takes). A `take` may wait for a `put`; waiting takers are served oldest
// first. Every change goes through a durable write (Broker+Writes.swift) and is applied and
// answered only once that is done.
import NotifBusProtocol

extension Broker {
    /// The slot that launch retention fills.
    static let launchSlot = "launch"

    /// A put with a key (`once`) is answered from the key table when the key is held
    /// (Broker+Once.swift); otherwise its key is written in the same record as its change.
    mutating func put(slot: String, value: RawJSON?, once key: String?, rid: RequestID, from c: ConnectionID, now: Instant) {
        var ticket: OnceTicket? = nil
        var fingerprint: UInt64 = 0
        if let key {
            fingerprint = Broker.fingerprint(target: slot, raw: value)
            guard admitOnce(key, .put, fingerprint, rid: rid, from: c, now: now) else { return }
        }
        /// The key's entry, held from now until the write's outcome is known.
        func hold(_ result: ReplyResult) -> OnceTicket? {
            guard let key else { return nil }
            let entry = once.insert(key, op: .put, fingerprint: fingerprint, wallMs: wallMs(now))
            return OnceTicket(entry: entry, outcome: .result(result.resultBytes))
        }
        guard let value else {
            let replaced = slots[slot] != nil
            // An empty slot stays empty: nothing to write, unless the key must be.
            guard replaced || key != nil else { return send(.reply(rid, .put(replaced: false, delivered: false)), to: c) }
            ticket = hold(.put(replaced: replaced, delivered: false))
            return beginWrite(
                .slot(slot), .slot(name: slot, value: nil), once: records(ticket, now: now),
                then: .empty(c, rid, slot: slot, replaced: replaced, once: ticket), now: now)
        }
        // The slot is empty while takers wait, on disk too: handing the value over changes nothing there.
        if slots.firstReadyWaiter(slot) != nil {
            if key != nil { ticket = hold(.put(replaced: false, delivered: true)) }
            if handOver(slot: slot, value: value, from: .put(c, rid, once: ticket), now: now) { return }
            // Every waiting take was answered from its key: the value goes into the slot.
            if let held = ticket { once.remove(held.entry) }
            ticket = nil
        }
        if let refusal = slots.limitError(slot, value, maxSlots: configuration.maxSlots, maxBytes: configuration.maxSlotBytes) {
            return refuse(c, rid, .slot(refusal), now: now)
        }
        let oldSize = slots[slot]?.count
        ticket = hold(.put(replaced: oldSize != nil, delivered: false))
        beginWrite(
            .slot(slot), .slot(name: slot, value: value), once: records(ticket, now: now),
            then: .put(c, rid, slot: slot, value: value, replaced: oldSize != nil, once: ticket),
            reservedSlots: oldSize == nil ? 1 : 0, reservedBytes: Swift.max(0, value.count - (oldSize ?? 0)), now: now)
    }

    /// A value found in the slot is answered once its removal is on disk; until then it
    /// stays. A keyed take that finds nothing records nothing; one that waits is recorded
    /// when a value is handed to it.
    mutating func take(slot: String, waitMs: Int64?, once key: String?, rid: RequestID, from c: ConnectionID, now: Instant) {
        if let key {
            guard admitOnce(key, .take, Broker.fingerprint(target: slot, body: nil), rid: rid, from: c, now: now) else { return }
        }
        if let value = slots[slot] {
            var ticket: OnceTicket? = nil
            if let key {
                let entry = once.insert(key, op: .take, fingerprint: Broker.fingerprint(target: slot, body: nil), wallMs: wallMs(now))
                ticket = OnceTicket(entry: entry, outcome: .result(value))
            }
            return beginWrite(
                .slot(slot), .slot(name: slot, value: nil), once: records(ticket, now: now), then: .take(c, rid, slot: slot, once: ticket),
                now: now)
        }
        guard let waitMs, waitMs > 0 else { return replyValue(to: c, rid, nil) }
        if shuttingDown { return refuse(c, rid, .session(.shuttingDown), now: now) }
        guard (sessions[c]?.takes.count ?? 0) < configuration.maxTakesPerConnection else {
            return refuse(c, rid, .slot(.tooManyTakes(max: configuration.maxTakesPerConnection)), now: now)
        }
        let id = slots.addWaiter(
            TakeWaiter(client: c, requestID: rid, slot: slot, held: false, arrival: 0, once: key),
            deadline: now &+ UInt64(waitMs) * 1_000_000)
        sessions[c]?.takes.insert(id)
    }

    /// Launch retention counts as a put: a waiting taker gets the payload first. Otherwise
    /// the payload is written to `launch`, and the event's poster is answered once the
    /// write's outcome is known (`"retained":null` if it failed).
    mutating func retainLaunchPayload(_ event: RunningEvent, now: Instant) {
        guard !held.hasRetentions && canRetain else { return held.holdRetention(event) }
        startRetention(event, now: now)
    }

    /// Whether a retention may go ahead: `launch` is not being written, and its oldest
    /// waiting taker is not one still held behind its connection's requests.
    var canRetain: Bool { !writes.isBusy(.slot(Broker.launchSlot)) && !slots.oldestTakerIsHeld(Broker.launchSlot, before: Int.max) }

    mutating func startRetention(_ event: RunningEvent, now: Instant) {
        let value = event.post.payload ?? RawJSON.null
        let outcome = retentionOutcome(event, retained: true)
        if handOver(slot: Broker.launchSlot, value: value, from: .retention(event, outcome), now: now) { return }
        beginWrite(
            .slot(Broker.launchSlot), .slot(name: Broker.launchSlot, value: value),
            once: outcome.map { [onceRecord(event.post.onceEntry, outcome: $0, now: now)] } ?? [], then: .retention(event, outcome),
            now: now)
    }

    /// Forgets a waiting take; its deadline entry, if still in the heap, is skipped later.
    mutating func removeTakeWaiter(_ id: Int) -> TakeWaiter? {
        guard let waiter = slots.removeWaiter(id) else { return nil }
        sessions[waiter.client]?.takes.remove(id)
        return waiter
    }
}
