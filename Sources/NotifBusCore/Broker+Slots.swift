// Retained slots, composed: take-once mailboxes that outlive connections (SlotStore keeps
// values and waiting takes). A `take` may wait for a `put`; waiting takers are served oldest
// first. Every change goes through a durable write (Broker+Writes.swift) and is applied and
// answered only once that is done.
import NotifBusProtocol

extension Broker {
    /// The slot that launch retention fills.
    static let launchSlot = "launch"

    mutating func put(slot: String, value: RawJSON?, rid: RequestID, from c: ConnectionID, now: Instant) {
        guard let value else {
            guard slots[slot] != nil else { return send(.reply(rid, .put(replaced: false, delivered: false)), to: c) }
            return beginWrite(.slot(slot), .slot(name: slot, value: nil), then: .empty(c, rid, slot: slot), now: now)
        }
        // The slot is empty while takers wait, on disk too: handing the value over changes nothing there.
        if deliverToWaiter(slot: slot, value: value) {
            return send(.reply(rid, .put(replaced: false, delivered: true)), to: c)
        }
        if let refusal = slots.limitError(slot, value, maxSlots: configuration.maxSlots, maxBytes: configuration.maxSlotBytes) {
            return refuse(c, rid, .slot(refusal), now: now)
        }
        let oldSize = slots[slot]?.count
        beginWrite(
            .slot(slot), .slot(name: slot, value: value),
            then: .put(c, rid, slot: slot, value: value, replaced: oldSize != nil),
            reservedSlots: oldSize == nil ? 1 : 0, reservedBytes: Swift.max(0, value.count - (oldSize ?? 0)), now: now)
    }

    /// A value found in the slot is answered once its removal is on disk; until then it stays.
    mutating func take(slot: String, waitMs: Int64?, rid: RequestID, from c: ConnectionID, now: Instant) {
        if slots[slot] != nil {
            return beginWrite(.slot(slot), .slot(name: slot, value: nil), then: .take(c, rid, slot: slot), now: now)
        }
        guard let waitMs, waitMs > 0 else { return replyValue(to: c, rid, nil) }
        if shuttingDown { return refuse(c, rid, .session(.shuttingDown), now: now) }
        guard (sessions[c]?.takes.count ?? 0) < configuration.maxTakesPerConnection else {
            return refuse(c, rid, .slot(.tooManyTakes(max: configuration.maxTakesPerConnection)), now: now)
        }
        let id = slots.addWaiter(
            TakeWaiter(client: c, requestID: rid, slot: slot, held: false, arrival: 0),
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
        if deliverToWaiter(slot: Broker.launchSlot, value: value) {
            return sendPostResult(event, .unhandled, by: nil, value: nil, retained: true)
        }
        beginWrite(.slot(Broker.launchSlot), .slot(name: Broker.launchSlot, value: value), then: .retention(event), now: now)
    }

    /// Hands `value` to the oldest taker waiting on `slot`, if there is one; takers still
    /// held behind their connection's requests arrived after this value, and are passed.
    mutating func deliverToWaiter(slot: String, value: RawJSON) -> Bool {
        guard let id = slots.firstReadyWaiter(slot), let waiter = removeTakeWaiter(id) else { return false }
        replyValue(to: waiter.client, waiter.requestID, value)
        return true
    }

    /// Forgets a waiting take; its deadline entry, if still in the heap, is skipped later.
    mutating func removeTakeWaiter(_ id: Int) -> TakeWaiter? {
        guard let waiter = slots.removeWaiter(id) else { return nil }
        sessions[waiter.client]?.takes.remove(id)
        return waiter
    }
}
