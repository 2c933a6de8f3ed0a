// The durable writes in flight: each one's key (a slot, or the categories), what to do once
// its outcome is known, and the slot places and bytes it holds. It keeps records only;
// asking for the write and answering for it are the broker's part (Broker+Writes.swift).
import NotifBusProtocol

/// What a durable write must change on disk before others may read or change it.
enum StateKey: Hashable {
    case slot(String)
    case categories
}

/// What to do once a durable write's outcome is known: apply the change and answer, or
/// answer `storage_failed` (the post of a launch retention says `"retained":null`).
enum WriteCompletion {
    case put(ConnectionID, RequestID, slot: String, value: RawJSON, replaced: Bool)
    case empty(ConnectionID, RequestID, slot: String)
    case take(ConnectionID, RequestID, slot: String)
    case categories(ConnectionID, RequestID, CategorySet)
    case retention(RunningEvent)
    /// A taken value whose taker left before the answer: written back into its slot.
    case restore(slot: String, value: RawJSON)
}

struct PendingWrite {
    let key: StateKey
    let completion: WriteCompletion
    /// What the transport writes, and the request it answers.
    let record: PendingWriteRecord
    /// Slot places and bytes held for a `put` until it is done, so that writes in flight
    /// together cannot pass the slot limits.
    let reservedSlots: Int
    let reservedBytes: Int
}

/// Writes asked of the transport and not yet reported, and the keys they make busy.
struct WriteLedger {
    private var pending: [WriteID: PendingWrite] = [:]
    private var busy: Set<StateKey> = []
    private var nextID: WriteID = 1

    var isEmpty: Bool { pending.isEmpty }

    /// Whether a write in flight changes `key`: nothing may read or change it meanwhile.
    func isBusy(_ key: StateKey) -> Bool { busy.contains(key) }

    /// The write `id`, while it is in flight.
    func write(_ id: WriteID) -> PendingWrite? { pending[id] }

    /// Records a write and returns its id.
    mutating func begin(_ write: PendingWrite) -> WriteID {
        let id = nextID
        nextID += 1
        pending[id] = write
        busy.insert(write.key)
        return id
    }

    /// The write `id` was reported: it is removed, and its key is free again. Nil for an id
    /// not in flight (reported twice, or never asked for).
    mutating func finish(_ id: WriteID) -> PendingWrite? {
        guard let write = pending.removeValue(forKey: id) else { return nil }
        busy.remove(write.key)
        return write
    }
}
