// The method-channel calls in flight, by call id: where each return goes and by when. It
// stores records only; ids and frames are the channel router's and the broker's part.
import NotifBusProtocol

/// Calls by id. The router hands ids out in sequence and most calls end soon after they
/// start, so a call is kept in a ring of slots at its id's low bits: starting and ending
/// one is an index, a compare and a store, with nothing hashed and nothing reference
/// counted for an integer request id. A call whose slot an older call still holds (many
/// calls in flight at once, or one that waits long) goes to an `IDTable` beside the ring.
struct CallTable {
    /// One slot of the ring: plain integers. `id` 0 is an empty slot (ids start at 1). A
    /// string request id's text is in `stringIDs` under the call's id.
    struct Slot {
        var id: Int64 = 0
        var invoker: ConnectionID = 0
        var handlerClient: ConnectionID = 0
        /// The integer request id, when `hasStringID` is false.
        var request: Int64 = 0
        var hasStringID = false
        var deadline: Instant = 0
    }

    /// A call beside the ring.
    struct Entry {
        let call: PendingCall
        let deadline: Instant
    }

    /// Slots in the ring: calls in flight at once up to this many, started in sequence, each
    /// find their own slot (256 × 48 bytes, made on the first call).
    static let ringSize = 256
    private var ring: [Slot] = []
    private var stringIDs = IDTable<String>()
    private var overflow = IDTable<Entry>()
    /// Calls held, in the ring and beside it.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    @inline(__always)
    private static func slot(_ id: Int64) -> Int { Int(truncatingIfNeeded: id) & (ringSize - 1) }

    /// Records `call` under `id`, which must not be held already (ids are never reused), to
    /// time out at `deadline`.
    mutating func insert(_ id: Int64, _ call: PendingCall, deadline: Instant) {
        if ring.isEmpty { ring = Array(repeating: Slot(), count: CallTable.ringSize) }
        count += 1
        let i = CallTable.slot(id)
        guard ring[i].id == 0 else {
            overflow.insert(Int(id), Entry(call: call, deadline: deadline))
            return
        }
        switch call.requestID {
        case .integer(let n):
            ring[i] = Slot(
                id: id, invoker: call.invoker, handlerClient: call.handlerClient, request: n, hasStringID: false, deadline: deadline)
        case .string(let text):
            ring[i] = Slot(
                id: id, invoker: call.invoker, handlerClient: call.handlerClient, request: 0, hasStringID: true, deadline: deadline)
            stringIDs.insert(Int(id), text)
        }
    }

    /// The connection that must return call `id`, or nil when no such call is in flight.
    @inline(__always)
    func handlerClient(of id: Int64) -> ConnectionID? {
        if !ring.isEmpty {
            let i = CallTable.slot(id)
            if ring[i].id == id && id != 0 { return ring[i].handlerClient }
        }
        return overflow.isEmpty ? nil : overflow.read(Int(id)) { $0.call.handlerClient }
    }

    /// The deadline of call `id`, or nil when no such call is in flight.
    @inline(__always)
    func deadline(of id: Int64) -> Instant? {
        if !ring.isEmpty {
            let i = CallTable.slot(id)
            if ring[i].id == id && id != 0 { return ring[i].deadline }
        }
        return overflow.isEmpty ? nil : overflow.read(Int(id)) { $0.deadline }
    }

    /// Removes call `id` and returns it, or nil when no such call is in flight.
    @discardableResult
    mutating func removeValue(forKey id: Int64) -> PendingCall? {
        if !ring.isEmpty {
            let i = CallTable.slot(id)
            if ring[i].id == id && id != 0 {
                let slot = ring[i]
                ring[i].id = 0
                count -= 1
                let requestID: RequestID = slot.hasStringID ? .string(stringIDs.removeValue(forKey: Int(id)) ?? "") : .integer(slot.request)
                return PendingCall(invoker: slot.invoker, requestID: requestID, handlerClient: slot.handlerClient)
            }
        }
        guard !overflow.isEmpty, let entry = overflow.removeValue(forKey: Int(id)) else { return nil }
        count -= 1
        return entry.call
    }

    /// The smallest id held, from every slot of the ring and every call beside it.
    var oldestID: Int64? {
        var oldest: Int64? = nil
        for slot in ring where slot.id != 0 && slot.id < oldest ?? .max { oldest = slot.id }
        if let beside = overflow.keys.min(), Int64(beside) < oldest ?? .max { oldest = Int64(beside) }
        return oldest
    }

    /// Every call held, ordered by id.
    var sortedEntries: [(key: Int64, value: PendingCall)] {
        var all: [(key: Int64, value: PendingCall)] = []
        all.reserveCapacity(count)
        for slot in ring where slot.id != 0 {
            let requestID: RequestID = slot.hasStringID ? .string(stringIDs[Int(slot.id)] ?? "") : .integer(slot.request)
            all.append((slot.id, PendingCall(invoker: slot.invoker, requestID: requestID, handlerClient: slot.handlerClient)))
        }
        for entry in overflow.sortedEntries { all.append((Int64(entry.key), entry.value.call)) }
        return all.sorted { $0.key < $1.key }
    }

    /// Empties the table and frees its storage.
    mutating func removeAll() {
        ring = []
        stringIDs.removeAll()
        overflow.removeAll()
        count = 0
    }
}
