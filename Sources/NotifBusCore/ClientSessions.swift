// The connections the broker knows: each one's record (greeting, what it holds, its share
// of the queue, its held-back requests), the greeting deadlines, and the monitors. It keeps
// records only; refusing and closing are the broker's part.
import NotifBusProtocol

/// One connection's state. A class, so that the per-frame updates (calls in flight,
/// observers held) change it in place instead of copying it out of the dictionary and back;
/// the broker that holds these is owned by one transport and never copied.
final class ClientRecord {
    let id: ConnectionID
    let credentials: PeerCredentials
    var greeted = false
    var name: String? = nil
    var observers: [Int] = []
    var handlers: [Int] = []
    var monitoring = false
    /// Set when one of its hops timed out, cleared by the next frame it sends: meanwhile its
    /// observers get no event and are traced `skipped` (decision 30).
    var unresponsive = false
    /// The time its hops in event `hopsEvent` took together; a connection whose hops in one
    /// event reach the hop timeout gets no further hop in that event. Kept here under the
    /// event's id, so that nothing is emptied when an event ends: a later event finds an
    /// older id and counts from zero.
    private(set) var hopsEvent: Int64 = 0
    private(set) var hopsTime: UInt64 = 0
    /// Its posts waiting in the queue (not the running one), and their payload bytes.
    var queuedPosts = 0
    var queuedBytes = 0
    /// Calls delivered to this connection and not yet returned (ChannelRouter holds them),
    /// and calls it made that are not answered yet: changed only by `callStarted` and
    /// `callEnded`.
    private(set) var callsReceived = 0
    private(set) var callsInvoked = 0
    var takes: Set<Int> = []
    /// Durable writes this connection asked for whose outcome is not known yet.
    var writesInFlight = 0
    /// Its repeats waiting for the outcome of a keyed post still queued or running.
    var repeatsWaiting = 0
    /// Requests held back, in arrival order, until the writes they depend on are done; each
    /// with its place in the broker-wide order of arrival.
    var waiting = FIFO<(input: WaitingInput, arrival: Int)>()

    init(id: ConnectionID, credentials: PeerCredentials) {
        self.id = id
        self.credentials = credentials
    }

    /// A call from `invoker` went to `handler`: one side of `ClientSessions.callStarted`.
    @inline(__always)
    fileprivate func callSent() { callsInvoked &+= 1 }
    @inline(__always)
    fileprivate func callDelivered() { callsReceived &+= 1 }

    /// A call ended (returned, timed out, or its handler gone); either side may have gone.
    /// With `callStarted`, the only places the two counts change.
    @inline(__always)
    static func callEnded(invoker: ClientRecord?, handler: ClientRecord?) {
        invoker?.callsInvoked &-= 1
        handler?.callsReceived &-= 1
    }

    /// The time its hops in `event` took together so far.
    @inline(__always)
    func hopTime(in event: Int64) -> UInt64 { hopsEvent == event ? hopsTime : 0 }

    /// Charges a hop of `event` that took `time`.
    @inline(__always)
    func charge(_ time: UInt64, in event: Int64) {
        if hopsEvent != event {
            hopsEvent = event
            hopsTime = 0
        }
        hopsTime &+= time
    }
}

/// Connections by id, greeting deadlines in accept order, and monitors.
struct ClientSessions {
    private(set) var records = IDTable<ClientRecord>()
    /// Greeting deadlines in accept order (one timeout for all keeps them sorted).
    private var helloDeadlines = FIFO<(deadline: Instant, connection: ConnectionID)>()
    /// Connections that asked to `monitor`, in that order.
    private(set) var monitors: [ConnectionID] = []

    subscript(c: ConnectionID) -> ClientRecord? { records[c] }

    /// Whether `c` may get a hop of `event`: it is not unresponsive, and its hops in the
    /// event took less than `budget` together. Read without retaining its record.
    @inline(__always)
    func mayTakeHop(_ c: ConnectionID, of event: Int64, budget: UInt64) -> Bool {
        records.read(c) { !$0.unresponsive && $0.hopTime(in: event) < budget } ?? (budget > 0)
    }

    /// Runs `body` on `c`'s record, lent rather than retained (the per-frame counters are
    /// changed through it); false when `c` is not known.
    @inline(__always) @discardableResult
    func update(_ c: ConnectionID, _ body: (ClientRecord) -> Void) -> Bool {
        records.read(c) { record in
            body(record)
            return true
        } ?? false
    }

    /// A call from `invoker` went to the connection `handler`, whose record is read without
    /// retaining it.
    @inline(__always)
    func callStarted(invoker: ClientRecord, handler: ConnectionID) {
        invoker.callSent()
        _ = update(handler) { $0.callDelivered() }
    }

    /// Whether `c` is known, tested without retaining its record.
    @inline(__always)
    func contains(_ c: ConnectionID) -> Bool { records.contains(c) }

    var count: Int { records.count }
    var isEmpty: Bool { records.isEmpty }

    /// Registers an accepted connection that must greet by `helloDeadline`.
    mutating func add(_ c: ConnectionID, credentials: PeerCredentials, helloDeadline: Instant) {
        records.insert(c, ClientRecord(id: c, credentials: credentials))
        helloDeadlines.append((helloDeadline, c))
    }

    /// Forgets a connection (and its monitoring); its record is returned for cleaning up.
    mutating func remove(_ c: ConnectionID) -> ClientRecord? {
        guard let record = records.removeValue(forKey: c) else { return nil }
        if record.monitoring { monitors.removeAll { $0 == c } }
        return record
    }

    /// `c` mirrors every frame from now on.
    mutating func startMonitoring(_ c: ConnectionID) {
        guard let record = records[c], !record.monitoring else { return }
        record.monitoring = true
        monitors.append(c)
    }

    /// A connection whose greeting time ended at or before `now` without `hello`; its
    /// deadline is popped.
    mutating func popUngreeted(now: Instant) -> ConnectionID? {
        while let front = helloDeadlines.first, front.deadline <= now {
            _ = helloDeadlines.popFirst()
            if let record = records[front.connection], !record.greeted { return front.connection }
        }
        return nil
    }

    var nextHelloDeadline: Instant? { helloDeadlines.first?.deadline }

    mutating func dropHelloDeadlines() { helloDeadlines.removeAll() }
}
