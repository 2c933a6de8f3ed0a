// Retained slots: take-once mailboxes that outlive connections. A `take` may wait for a
// `put`; waiting takers are served oldest first. Every change is persisted before its reply.
import NotifBusProtocol

extension Broker {
    /// The slot that launch retention fills.
    static let launchSlot = "launch"

    mutating func put(slot: String, value: RawJSON?, rid: RequestID, from c: ConnectionID) {
        guard let value else {
            let old = removeSlot(slot)
            if old { actions.append(.persistSlot(name: slot, value: nil, acknowledges: Acknowledgement(connection: c, requestID: rid))) }
            return replyLiteral(to: c, rid, old ? "{\"replaced\":true,\"delivered\":false}" : "{\"replaced\":false,\"delivered\":false}")
        }
        if deliverToWaiter(slot: slot, value: value) {
            return replyLiteral(to: c, rid, "{\"replaced\":false,\"delivered\":true}")
        }
        let oldSize = slots[slot]?.count
        if oldSize == nil && slots.count >= configuration.maxSlots {
            return reply(to: c, rid, error: .badRequest, "the broker holds at most \(configuration.maxSlots) non-empty slots")
        }
        if slotBytes - (oldSize ?? 0) + value.count > configuration.maxSlotBytes {
            return reply(to: c, rid, error: .badRequest, "slot values may take at most \(configuration.maxSlotBytes) bytes in all")
        }
        storeSlot(slot, value, acknowledges: Acknowledgement(connection: c, requestID: rid))
        replyLiteral(to: c, rid, oldSize != nil ? "{\"replaced\":true,\"delivered\":false}" : "{\"replaced\":false,\"delivered\":false}")
    }

    mutating func take(slot: String, waitMs: Int64?, rid: RequestID, from c: ConnectionID, now: Instant) {
        if let value = slots[slot] {
            _ = removeSlot(slot)
            actions.append(.persistSlot(name: slot, value: nil, acknowledges: nil))
            return replyRaw(to: c, rid, result: value)
        }
        guard let waitMs, waitMs > 0 else { return replyRaw(to: c, rid, result: nil) }
        if shuttingDown { return reply(to: c, rid, error: .shuttingDown, "the broker is shutting down") }
        guard (clients[c]?.takes.count ?? 0) < configuration.maxTakesPerConnection else {
            return reply(to: c, rid, error: .badRequest, "a connection may have at most \(configuration.maxTakesPerConnection) waiting takes")
        }
        let id = nextTakeID
        nextTakeID += 1
        takeWaiters[id] = TakeWaiter(client: c, requestID: rid, slot: slot)
        takeQueues[slot, default: []].append(id)
        clients[c]?.takes.insert(id)
        takeDeadlines.push(now &+ UInt64(waitMs) * 1_000_000, id)
    }

    /// Launch retention counts as a put: a waiting taker gets the payload first.
    mutating func storeLaunchPayload(_ payload: RawJSON?) {
        let value = payload ?? Array("null".utf8)
        if deliverToWaiter(slot: Broker.launchSlot, value: value) { return }
        storeSlot(Broker.launchSlot, value, acknowledges: nil)
    }

    mutating func storeSlot(_ slot: String, _ value: RawJSON, acknowledges: Acknowledgement?) {
        slotBytes += value.count - (slots[slot]?.count ?? 0)
        slots[slot] = value
        actions.append(.persistSlot(name: slot, value: value, acknowledges: acknowledges))
    }

    mutating func removeSlot(_ slot: String) -> Bool {
        guard let old = slots.removeValue(forKey: slot) else { return false }
        slotBytes -= old.count
        return true
    }

    /// Hands `value` to the oldest taker waiting on `slot`, if there is one.
    mutating func deliverToWaiter(slot: String, value: RawJSON) -> Bool {
        guard let id = takeQueues[slot]?.first, let waiter = removeTakeWaiter(id) else { return false }
        replyRaw(to: waiter.client, waiter.requestID, result: value)
        return true
    }

    /// Forgets a waiting take; its deadline entry, if still in the heap, is skipped later.
    mutating func removeTakeWaiter(_ id: Int) -> TakeWaiter? {
        guard let waiter = takeWaiters.removeValue(forKey: id) else { return nil }
        if var q = takeQueues.removeValue(forKey: waiter.slot) {
            q.removeAll { $0 == id }
            if !q.isEmpty { takeQueues[waiter.slot] = q }
        }
        clients[waiter.client]?.takes.remove(id)
        if takeWaiters.isEmpty { takeDeadlines = DeadlineHeap() }  // drop stale deadlines at once
        return waiter
    }
}
