// The retained slots and the takes waiting on them: values with their byte count, places
// and bytes held for puts in flight, and the waiting takers of each slot, oldest first,
// with their deadlines. It keeps records only; replies and durable writes are the broker's.
import NotifBusProtocol

struct TakeWaiter {
    let client: ConnectionID
    let requestID: RequestID
    let slot: String
    /// Still held behind its connection's earlier requests: it keeps its place, but no
    /// value may be handed to it or past it until it starts.
    var held: Bool
    /// When a held take arrived (`HeldRequests.arrivals`): a value arriving later waits for it.
    let arrival: Int
    /// Its idempotency key, if any: recorded only once a value is handed to it.
    var once: String? = nil
}

/// Slot values and waiting takes.
struct SlotStore {
    private(set) var values: [String: RawJSON] = [:]
    /// Bytes of all values.
    private(set) var bytes = 0
    /// Slot places and bytes held for puts in flight, so that writes in flight together
    /// cannot pass the slot limits.
    private(set) var reservedSlots = 0
    private(set) var reservedBytes = 0
    private var waiters: [Int: TakeWaiter] = [:]
    /// Per slot, its waiting takes in arrival order.
    private var queues: [String: [Int]] = [:]
    private var deadlines = DeadlineHeap()
    private var nextTakeID = 1

    init(restoring restored: [String: RawJSON] = [:]) {
        for (name, value) in restored { set(name, value) }
    }

    subscript(slot: String) -> RawJSON? { values[slot] }

    var count: Int { values.count }

    mutating func set(_ slot: String, _ value: RawJSON) {
        bytes += value.count - (values[slot]?.count ?? 0)
        values[slot] = value
    }

    /// Empties a slot; false when it was empty.
    mutating func remove(_ slot: String) -> Bool {
        guard let old = values.removeValue(forKey: slot) else { return false }
        bytes -= old.count
        return true
    }

    /// Why putting `value` into `slot` would pass a limit, counting the puts in flight.
    func limitError(_ slot: String, _ value: RawJSON, maxSlots: Int, maxBytes: Int) -> SlotError? {
        let oldSize = values[slot]?.count
        if oldSize == nil && values.count + reservedSlots >= maxSlots { return .tooManySlots(max: maxSlots) }
        if bytes + reservedBytes - (oldSize ?? 0) + value.count > maxBytes { return .tooManyBytes(max: maxBytes) }
        return nil
    }

    mutating func reserve(slots: Int, bytes: Int) {
        reservedSlots += slots
        reservedBytes += bytes
    }

    // MARK: Waiting takes

    /// Adds a waiting take at the end of `slot`'s queue and returns its id. A take not held
    /// starts its wait now, until `deadline`.
    mutating func addWaiter(_ waiter: TakeWaiter, deadline: Instant?) -> Int {
        let id = nextTakeID
        nextTakeID += 1
        waiters[id] = waiter
        queues[waiter.slot, default: []].append(id)
        if let deadline { deadlines.push(deadline, id) }
        return id
    }

    /// A held take starts its wait, in the place it has held since it arrived.
    mutating func startWaiting(_ id: Int, deadline: Instant) {
        waiters[id]?.held = false
        deadlines.push(deadline, id)
    }

    func waiter(_ id: Int) -> TakeWaiter? { waiters[id] }

    /// Whether any take waits on `slot`.
    func hasWaiters(_ slot: String) -> Bool { queues[slot] != nil }

    /// Whether the oldest taker waiting on `slot` is one still held behind its connection's
    /// requests that arrived before `arrival` (and is not `place` itself).
    func oldestTakerIsHeld(_ slot: String, before arrival: Int, except place: Int? = nil) -> Bool {
        guard let first = queues[slot]?.first, first != place, let waiter = waiters[first] else { return false }
        return waiter.held && waiter.arrival < arrival
    }

    /// Forgets a waiting take; its deadline entry, if still in the heap, is skipped later.
    mutating func removeWaiter(_ id: Int) -> TakeWaiter? {
        guard let waiter = waiters.removeValue(forKey: id) else { return nil }
        if var q = queues.removeValue(forKey: waiter.slot) {
            q.removeAll { $0 == id }
            if !q.isEmpty { queues[waiter.slot] = q }
        }
        if waiters.isEmpty { deadlines = DeadlineHeap() }  // drop stale deadlines at once
        return waiter
    }

    /// The takes waiting on `slot`, oldest first.
    func waiterIDs(_ slot: String) -> [Int] { queues[slot] ?? [] }

    /// The oldest take on `slot` that is not held, with its id.
    func firstReadyWaiter(_ slot: String) -> Int? {
        queues[slot]?.first { waiters[$0]?.held == false }
    }

    /// The id of a take whose wait ended at or before `now`, its deadline popped.
    mutating func popExpiredWaiter(now: Instant) -> Int? {
        while let top = deadlines.min, top.deadline <= now {
            _ = deadlines.popMin()
            if waiters[top.id] != nil { return top.id }
        }
        return nil
    }

    var nextDeadline: Instant? { deadlines.min?.deadline }

    /// Every waiting take in arrival order, removed.
    mutating func removeAllWaiters() -> [TakeWaiter] {
        let all = waiters.sorted { $0.key < $1.key }.map(\.value)
        waiters.removeAll()
        queues.removeAll()
        deadlines = DeadlineHeap()
        return all
    }
}
