// The inputs, outputs and configuration of the broker's state machine, the records of its
// durable writes, and the small containers the registries share (FIFO, DeadlineHeap).
// Plain values: nothing here performs I/O or reads a clock.
import NotifBusProtocol

/// The transport's name for one accepted socket; never reused within a broker's life.
public typealias ConnectionID = Int

/// Monotonic time in nanoseconds, supplied by the caller with every input.
public typealias Instant = UInt64

/// What `SO_PEERCRED` said about a peer.
public struct PeerCredentials: Sendable, Equatable {
    public let pid: Int32
    public let uid: UInt32
    public let gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

/// Settings of one broker, from its command line.
public struct BrokerConfiguration: Sendable {
    public var serverName = "notifbus/0.1.0"
    public var hopTimeoutMs = Limits.defaultHopTimeoutMs
    public var callTimeoutMs = Limits.defaultCallTimeoutMs
    public var maxFrame = Limits.defaultMaxFrame
    public var maxQueue = Limits.defaultMaxQueue
    public var maxClients = Limits.defaultMaxClients
    /// The broker's own uid; it, root and `allowedUIDs` may connect.
    public var brokerUID: UInt32 = 0
    public var allowedUIDs: Set<UInt32> = []
    /// Non-empty slots at most, so that one client cannot grow the broker without bound.
    public var maxSlots = 4096
    /// Bytes of slot values at most (64 MiB), for the same reason.
    public var maxSlotBytes = 64 << 20
    /// Calls one connection may have in flight as invoker (a client that floods invokes
    /// at a handler that never answers would otherwise hold memory for a call timeout).
    public var maxCallsPerConnection = 65_536
    /// A connection must send `hello` within this time (10 s), or it is closed with
    /// `hello_required`: otherwise silent sockets could hold every `--max-clients` place.
    public var helloTimeoutMs: Int64 = 10_000
    /// Waiting `take`s one connection may hold.
    public var maxTakesPerConnection = 1024
    /// Payload bytes of posts waiting in the queue (64 MiB): `--max-queue` counts posts,
    /// and without this one client could park max-queue × max-frame bytes.
    public var maxQueueBytes = 64 << 20
    /// Posts of one connection that may wait in the queue (`--max-queue-per-client`); nil:
    /// an eighth of `maxQueue` (at least 1). Without a share one poster could fill the
    /// whole queue and every other client would get `queue_full` (decision 41).
    public var maxQueuePerClient: Int? = nil
    /// Payload bytes one connection's waiting posts may hold: an eighth of `maxQueueBytes`,
    /// for the same reason.
    public var maxQueueBytesPerClient: Int? = nil

    /// The share in force: `maxQueuePerClient`, or an eighth of `maxQueue`, at least 1.
    public var queueShare: Int { maxQueuePerClient ?? Swift.max(1, maxQueue / 8) }
    /// The byte share in force: `maxQueueBytesPerClient`, or an eighth of `maxQueueBytes`.
    public var queueByteShare: Int { maxQueueBytesPerClient ?? maxQueueBytes / 8 }
    /// Whether slots and categories are kept on disk (`--state-dir`). Each change is then
    /// a `.persist` action, and takes effect and is answered only when the transport reports
    /// its record written (`Broker.persisted`); without it changes take effect at once.
    public var persistsState = false
    /// Requests of one connection held back behind durable writes at most before the
    /// transport stops reading it (`Broker.wantsInput`): one 256 KiB read can carry
    /// thousands of requests, and each waits for a sync of the journal. 64 keeps a
    /// pipelining client busy while a few kilobytes of them wait in memory.
    public var maxHeldBackPerConnection = 64

    /// A `status` reply stops listing items once it holds this many bytes (256 KiB) and
    /// names where the next page starts: a reply of every observer could be tens of
    /// megabytes, beyond `--max-output`, and building it would hold up every client.
    public var statusPageBytes = 256 << 10

    /// The window of idempotency keys (`--once-keys`, `--once-age`, `--once-bytes`).
    public var once = OnceLimits()
    /// Repeats one connection may have waiting for the outcome of a post still queued or
    /// running; one more is refused, so that repeats cannot grow the broker without bound.
    public var maxRepeatsWaitingPerConnection = 1024
    /// The seed of the key table's hash, chosen by the transport for each run, so that keys
    /// cannot be picked to collide.
    public var onceSeed: UInt64 = 0

    public init() {}
}

/// The request a durable write answers. Its reply is held in the core until the write's
/// outcome is reported: the result once it is on disk, `storage_failed` if it is not.
public struct Acknowledgement: Sendable, Equatable {
    public let connection: ConnectionID
    public let requestID: RequestID
}

/// Names one durable write from `.persist` to `Broker.persisted`; never reused.
public typealias WriteID = Int64

/// One change to the state kept on disk.
public enum StateRecord: Sendable, Equatable {
    /// A slot's new value; nil: the slot is emptied.
    case slot(name: String, value: RawJSON?)
    /// The whole category set.
    case categories(RawJSON)
    /// No change to slots or categories: the record carries idempotency keys only.
    case keysOnly
}

/// What the transport must do, in order.
public enum BrokerAction: Sendable {
    /// Queue this length-prefixed frame for the connection: its bytes are `range` of the
    /// broker's `output` store, valid until `Broker.outputTaken()` (read them with
    /// `Broker.withOutput` or `Broker.outputBytes`).
    case send(ConnectionID, OutputRange)
    /// Stop reading, flush what was queued, then close.
    case close(ConnectionID)
    /// Write the record of this write (`Broker.pendingWrite`), durably where it says so,
    /// then report `Broker.persisted(id, written:)`: the change takes effect only then. The
    /// record is not carried here, so that every action is plain data that needs no destroying.
    case persist(WriteID)
}

/// A durable write in flight: the record to write, the idempotency keys written in the same
/// record (§3.8), and the request it answers (nil for a launch retention, a value handed
/// back to its slot, or a post's keys), for logs and tests; the transport sends nothing for it.
public struct PendingWriteRecord: Sendable {
    public let record: StateRecord
    public let once: [OnceRecord]
    public let acknowledges: Acknowledgement?
    /// Whether it is reported only once on disk (synced), as every change is; false for a
    /// keyed post's "running" record, reported once written: a broker that stops still finds
    /// it, and the post's outcome record, synced, makes it durable with it (decision 43).
    public let durable: Bool

    public init(record: StateRecord, once: [OnceRecord], acknowledges: Acknowledgement?, durable: Bool = true) {
        self.record = record
        self.once = once
        self.acknowledges = acknowledges
        self.durable = durable
    }
}

/// A request (or a refusal of one) that waits behind a durable write (Broker+Writes.swift).
enum WaitingInput {
    /// A request, kept as its frame's body and decoded again when it is asked about or
    /// starts (`Broker.withHeld`): its user data were views of the frame it came in.
    case request(RequestID, frame: [UInt8])
    case rejected(RequestID?, BrokerError)
    /// A `take` that may wait, holding its `place` among the slot's waiting takers (its
    /// idempotency key is kept with its place).
    case heldTake(RequestID, slot: String, waitMs: Int64, place: Int)
}

/// A FIFO with amortized O(1) pops and no per-element shifting.
struct FIFO<Element> {
    private var storage: [Element] = []
    private var head = 0

    var count: Int { storage.count - head }
    var isEmpty: Bool { head == storage.count }
    var first: Element? { isEmpty ? nil : storage[head] }

    mutating func append(_ e: Element) { storage.append(e) }

    mutating func popFirst() -> Element? {
        guard head < storage.count else { return nil }
        let e = storage[head]
        head += 1
        if head == storage.count {
            // The one element of a queue that holds one at a time (a post that waits for no
            // other), dropped without the generic path of `removeAll`.
            if head == 1 {
                storage.removeLast()
            } else {
                storage.removeAll(keepingCapacity: storage.count < 4096)
            }
            head = 0
        } else if head >= 1024 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return e
    }

    mutating func removeAll() {
        storage.removeAll()
        head = 0
    }

}

/// A binary min-heap of deadlines with ids; stale entries are skipped by the owner.
struct DeadlineHeap {
    private var items: [(deadline: Instant, id: Int)] = []

    var isEmpty: Bool { items.isEmpty }
    var min: (deadline: Instant, id: Int)? { items.first }

    mutating func push(_ deadline: Instant, _ id: Int) {
        items.append((deadline, id))
        var i = items.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard items[i].deadline < items[parent].deadline else { break }
            items.swapAt(i, parent)
            i = parent
        }
    }

    mutating func popMin() -> (deadline: Instant, id: Int)? {
        guard !items.isEmpty else { return nil }
        let top = items[0]
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var i = 0
            while true {
                let l = 2 * i + 1, r = l + 1
                var m = i
                if l < items.count && items[l].deadline < items[m].deadline { m = l }
                if r < items.count && items[r].deadline < items[m].deadline { m = r }
                if m == i { break }
                items.swapAt(i, m)
                i = m
            }
        }
        return top
    }
}
