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
/// answer `storage_failed` (the post of a launch retention says `"retained":null`). A
/// request's idempotency key, when it has one, is recorded (or, if the write failed,
/// forgotten) with it.
enum WriteCompletion {
    case put(ConnectionID, RequestID, slot: String, value: RawJSON, replaced: Bool, once: OnceTicket?)
    /// A slot emptied by a put of null; `replaced` false: it was empty already (a keyed put
    /// of null writes its key even so).
    case empty(ConnectionID, RequestID, slot: String, replaced: Bool, once: OnceTicket?)
    case take(ConnectionID, RequestID, slot: String, once: OnceTicket?)
    case categories(ConnectionID, RequestID, CategorySet, once: OnceTicket?)
    /// A launch retention; with the outcome of its post when the post has a key.
    case retention(RunningEvent, OnceOutcome?)
    /// A taken value whose taker left before the answer: written back into its slot.
    case restore(slot: String, value: RawJSON)
    /// A keyed post's event starts down its chain once its "running" record is written.
    case running(RunningEvent)
    /// A keyed post's event ended without a launch retention: answered once its outcome is written.
    case ended(RunningEvent, EventOutcome, OnceOutcome)
    /// A value handed to a waiting take, with a key on either side.
    case handOver(HandOver)
}

/// A keyed request's entry in the key table and the outcome its write records.
struct OnceTicket {
    let entry: Int32
    let outcome: OnceOutcome
}

/// A value given straight to a waiting take, by a put or a launch retention, whose keys are
/// written before either is answered.
struct HandOver {
    enum Source {
        case put(ConnectionID, RequestID, once: OnceTicket?)
        case retention(RunningEvent, OnceOutcome?)
    }

    let taker: TakeWaiter
    let takerOnce: OnceTicket?
    let value: RawJSON
    let source: Source
}

struct PendingWrite {
    /// What the write makes busy; nil for a record of keys that nothing else reads.
    let key: StateKey?
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
        if let key = write.key { busy.insert(key) }
        return id
    }

    /// The write `id` was reported: it is removed, and its key is free again. Nil for an id
    /// not in flight (reported twice, or never asked for).
    mutating func finish(_ id: WriteID) -> PendingWrite? {
        guard let write = pending.removeValue(forKey: id) else { return nil }
        if let key = write.key { busy.remove(key) }
        return write
    }
}
