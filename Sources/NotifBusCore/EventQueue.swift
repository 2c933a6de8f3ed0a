// The single broker-wide queue of posts and the one event running down its chain. It
// keeps each post's record (its frames made once, when accepted), the running event's state
// and trace, and encodes the event frame of each hop; which observer gets the next hop, and
// every other frame, are decided by the broker (Broker+Chain.swift). The chain's state:
//
//                             nextInChain, skip
//                                 ┌─────┐
//         begin(event, chain)     ▼     │      awaitHop(hop)
//   idle ─────────────────────▶ between ┴─────────────────────▶ awaiting
//    ▲  ▲                         │  ▲                             │  │
//    │  └────── finish() ─────────┘  └────── endHop(reply) ────────┘  │
//    └──────────────────────── finish() (shutdown) ───────────────────┘
//
// `between`: the event runs and no answer is awaited; the broker walks the chain
// (`nextInChain`, `skip`) to the next live observer, or finishes the event as unhandled.
// `awaiting`: one observer's answer is awaited until its hop deadline; `endHop` records
// how the hop ended and goes back to `between`. A keyed post's event, with `--state-dir`,
// first awaits the journal (`awaitRecord`): its "running" record is written before any
// observer sees it, and `endRecordWait` goes back to `between` (§3.8).
import NotifBusProtocol

/// What was posted. Its fields are set once, where the post is accepted (field by field when
/// an ended event's record is reused, so that its frames stay where they are).
struct QueuedPost {
    fileprivate(set) var event: Int64
    fileprivate(set) var poster: ConnectionID
    fileprivate(set) var requestID: RequestID
    fileprivate(set) var name: String
    /// Its `event` frames, the payload among their bytes.
    fileprivate(set) var frame: EventFrame
    fileprivate(set) var isWillPresent: Bool
    /// Its idempotency key's entry in the broker's key table, or -1 without a key.
    fileprivate(set) var onceEntry: Int32
    /// The outcomes (`EventOutcome.bit`) after which the event does not simply answer its
    /// poster: `unhandled` when it launches the app (a launch retention), every outcome when
    /// it has a key; and `QueuedPost.launches` when it launches the app. One test where the
    /// event ends, as `launchesApp` alone was, and one field.
    fileprivate(set) var endsAside: UInt8

    /// Whether the app is launched when it ends unhandled. Decided when posted, against the
    /// categories in force then.
    var launchesApp: Bool { endsAside & QueuedPost.launches != 0 }

    static let launches: UInt8 = 8

    init(
        event: Int64, poster: ConnectionID, requestID: RequestID, name: String, frame: EventFrame, isWillPresent: Bool,
        launchesApp: Bool, onceEntry: Int32 = -1
    ) {
        self.event = event
        self.poster = poster
        self.requestID = requestID
        self.name = name
        self.frame = frame
        self.isWillPresent = isWillPresent
        self.onceEntry = onceEntry
        endsAside = QueuedPost.endsAside(launchesApp: launchesApp, onceEntry: onceEntry)
    }

    @inline(__always)
    static func endsAside(launchesApp: Bool, onceEntry: Int32) -> UInt8 {
        (onceEntry >= 0 ? 0b111 : 0) | (launchesApp ? EventOutcome.unhandled.bit | launches : 0)
    }

    /// A post with frames of its own made from `payload` (tests).
    init(event: Int64, poster: ConnectionID, requestID: RequestID, name: String, payload: RawJSON?, isWillPresent: Bool, launchesApp: Bool) {
        let frame = payload.map { EventFrame(event: event, name: name, payload: JSONBytes($0)) } ?? EventFrame(event: event, name: name, payload: nil)
        self.init(
            event: event, poster: poster, requestID: requestID, name: name, frame: frame, isWillPresent: isWillPresent,
            launchesApp: launchesApp)
    }

    /// The payload, copied out of the frames (nil when there is none).
    var payload: RawJSON? { frame.payload }

    /// How many bytes the payload has: what it counts against the queue's limits.
    var payloadCount: Int { frame.payloadCount }
}

/// A post from its acceptance to its poster's reply: it waits in the queue, then walks its
/// chain as the running event. A class, so that one reference moves from the queue to the
/// chain's state (and to a launch retention), the post is written into it once, and the
/// trace and the time spent grow in place on every hop instead of being moved in and out
/// of the state with each transition. Once an event has ended and nothing else holds its
/// record, the queue reuses the record, the trace's storage and the frames' memory for a
/// later post.
final class RunningEvent {
    fileprivate(set) var post: QueuedPost
    /// The observers of its name when it started, in chain order (empty while it waits).
    private(set) var chain: [Int]
    var nextIndex = 0
    var trace: [TraceHop] = []

    init(post: QueuedPost, chain: [Int] = []) {
        self.post = post
        self.chain = chain
        trace.reserveCapacity(chain.count)
    }

    /// Starts the post down `chain`.
    fileprivate func start(_ chain: [Int]) {
        self.chain = chain
        nextIndex = 0
        trace.reserveCapacity(chain.count)
    }

    /// Lets go of the chain and empties the trace (keeping its storage), for reuse.
    fileprivate func clear() {
        chain = []
        trace.removeAll(keepingCapacity: true)
    }
}

/// The hop whose answer is awaited.
struct AwaitedHop: Equatable {
    let observer: Int
    let client: ConnectionID
    let deadline: Instant
    let startedAt: Instant

    /// The time from the hop's start to `now`; none when the clock reads earlier.
    func duration(until now: Instant) -> UInt64 { now >= startedAt ? now - startedAt : 0 }

    /// The client of no connection: what a keyed event awaits while its "running" record is
    /// written. No answer comes from it; its deadline only wakes the broker to wait on.
    static let journal: ConnectionID = -1

    /// The wait for the journal, until `deadline`.
    static func journalRecord(until deadline: Instant, now: Instant) -> AwaitedHop {
        AwaitedHop(observer: -1, client: journal, deadline: deadline, startedAt: now)
    }
}

enum ChainState {
    case idle
    case between(RunningEvent)
    case awaiting(RunningEvent, AwaitedHop)
}

/// Waiting posts in arrival order, and the running event.
struct EventQueue {
    private var waiting = FIFO<RunningEvent>()
    /// Payload bytes of the waiting posts.
    private(set) var waitingBytes = 0
    private var nextEventID: Int64 = 1
    /// The state is kept as these two fields (`state` puts them together): nil `running` is
    /// idle; with `running`, nil `awaited` is between hops. A hop's transitions then set a
    /// plain value, instead of rebuilding an enum that holds the event's reference (a retain
    /// and a release each).
    /// The running event, if any.
    private(set) var running: RunningEvent? = nil
    /// The hop whose answer is awaited, if any.
    private(set) var awaited: AwaitedHop? = nil
    /// The record of an ended event that nothing else holds, with its frames, for the next
    /// post accepted to reuse.
    private var spare: RunningEvent? = nil
    /// Records whose trace is longer than this are not kept for reuse.
    static let maxSpareTrace = 64
    /// Nor those whose frames hold more than this, so that an idle broker holds no large
    /// payload.
    static let maxSpareFrame = 4096

    /// Posts waiting (not the running one).
    var count: Int { waiting.count }

    var isRunning: Bool { running != nil }

    /// The event id of the running event, if any.
    var runningEvent: Int64? { running?.post.event }

    /// Whether the running event is a `willPresent` (false when none runs).
    var runningIsWillPresent: Bool { running?.post.isWillPresent ?? false }

    /// The chain's state, as drawn above.
    var state: ChainState {
        guard let running else { return .idle }
        if let awaited { return .awaiting(running, awaited) }
        return .between(running)
    }

    /// Queues a post and returns its event id. The payload is copied (into the post's
    /// frames), so it may be a view of the frame it came in.
    mutating func enqueue(
        poster: ConnectionID, requestID: RequestID, name: String, payload: JSONBytes?,
        isWillPresent: Bool, launchesApp: Bool, onceEntry: Int32 = -1
    ) -> Int64 {
        let event = nextEventID
        nextEventID += 1
        waitingBytes += payload?.count ?? 0
        waiting.append(
            record(
                event: event, poster: poster, requestID: requestID, name: name, payload: payload, isWillPresent: isWillPresent,
                launchesApp: launchesApp, onceEntry: onceEntry))
        return event
    }

    /// idle → between, with no post waiting: a post starts down `chain` without passing
    /// through the queue (it gets the event id it would have had there).
    mutating func startNow(
        poster: ConnectionID, requestID: RequestID, name: String, payload: JSONBytes?,
        isWillPresent: Bool, launchesApp: Bool, onceEntry: Int32 = -1, chain: [Int]
    ) {
        guard waiting.count == 0 else { preconditionFailure("a post started ahead of the waiting ones") }
        let event = nextEventID
        nextEventID += 1
        begin(
            record(
                event: event, poster: poster, requestID: requestID, name: name, payload: payload, isWillPresent: isWillPresent,
                launchesApp: launchesApp, onceEntry: onceEntry),
            chain: chain)
    }

    /// The record of a post just accepted, its frames made: the spare one (an ended event's,
    /// its frames' memory written over) when there is one.
    private mutating func record(
        event: Int64, poster: ConnectionID, requestID: RequestID, name: String, payload: JSONBytes?,
        isWillPresent: Bool, launchesApp: Bool, onceEntry: Int32
    ) -> RunningEvent {
        guard let record = spare.take() else {
            return RunningEvent(
                post: QueuedPost(
                    event: event, poster: poster, requestID: requestID, name: name,
                    frame: EventFrame(event: event, name: name, payload: payload), isWillPresent: isWillPresent,
                    launchesApp: launchesApp, onceEntry: onceEntry))
        }
        record.post.frame.reset(event: event, name: name, payload: payload)
        record.post.event = event
        record.post.poster = poster
        record.post.requestID = requestID
        record.post.name = name
        record.post.isWillPresent = isWillPresent
        record.post.onceEntry = onceEntry
        record.post.endsAside = QueuedPost.endsAside(launchesApp: launchesApp, onceEntry: onceEntry)
        return record
    }

    /// The oldest waiting post, off the queue.
    mutating func dequeue() -> RunningEvent? {
        guard let event = waiting.popFirst() else { return nil }
        waitingBytes -= event.post.payloadCount
        return event
    }

    /// idle → between: `event`, a post taken off the queue, starts down `chain`.
    mutating func begin(_ event: RunningEvent, chain: [Int]) {
        guard running == nil else { preconditionFailure("an event started while another runs") }
        event.start(chain)
        running = event
        awaited = nil
    }

    /// The next observer of the chain, moving past it; nil at the chain's end or when no
    /// event is between hops.
    mutating func nextInChain() -> Int? {
        guard awaited == nil, let event = running, event.nextIndex < event.chain.count else { return nil }
        event.nextIndex += 1
        return event.chain[event.nextIndex - 1]
    }

    /// Traces `observer` as `skipped` (between hops only).
    mutating func skip(_ observer: Int) {
        guard awaited == nil, let event = running else { return }
        event.trace.append(TraceHop(observer: observer, reply: .skipped))
    }

    /// between → awaiting: the event is sent to `hop.observer`. Returns the `event` frame
    /// for it, encoded at the end of `store` from the running event's frames.
    mutating func awaitHop(_ hop: AwaitedHop, encodingInto store: OutputStore) -> OutputRange {
        guard awaited == nil, running != nil else { preconditionFailure("a hop started with no event between hops") }
        awaited = hop
        // The running event holds its frames throughout, and the encoder (which only writes
        // into the store) cannot end it: the frames are lent without a retain.
        return Unmanaged.passUnretained(running.unsafelyUnwrapped.post.frame)._withUnsafeGuaranteedRef {
            $0.encode(observer: hop.observer, into: store)
        }
    }

    /// between → awaiting the journal: the running event's "running" record is being written.
    mutating func awaitRecord(until deadline: Instant, now: Instant) {
        guard awaited == nil, running != nil else { preconditionFailure("a record awaited with no event between hops") }
        awaited = AwaitedHop.journalRecord(until: deadline, now: now)
    }

    /// Whether the running event awaits the journal rather than an observer.
    var isAwaitingRecord: Bool { awaited?.client == AwaitedHop.journal }

    /// awaiting the journal → between: the record is written (or failed).
    mutating func endRecordWait() {
        guard isAwaitingRecord else { return }
        awaited = nil
    }

    /// awaiting → between: the awaited hop ended with `reply`. Returns it (the broker charges
    /// its time to its connection), or nil when no answer was awaited.
    mutating func endHop(_ reply: HopReply) -> AwaitedHop? {
        guard let hop = awaited, running != nil else { return nil }
        // The queue holds the running event throughout: it is lent to the append unretained.
        Unmanaged.passUnretained(running.unsafelyUnwrapped)._withUnsafeGuaranteedRef {
            $0.trace.append(TraceHop(observer: hop.observer, reply: reply))
        }
        awaited = nil
        return hop
    }

    /// An ended event's record, given back when the broker is done with it: kept for the
    /// next post if nothing else holds it or its frames (a launch retention may), its trace
    /// is short and its frames small.
    mutating func recycle(_ event: consuming RunningEvent) {
        var event = event
        guard isKnownUniquelyReferenced(&event), isKnownUniquelyReferenced(&event.post.frame),
            event.trace.capacity <= EventQueue.maxSpareTrace, event.post.frame.capacity <= EventQueue.maxSpareFrame
        else { return }
        event.clear()
        spare = consume event
    }

    /// between or awaiting → idle: the running event ends and is returned.
    mutating func finish() -> RunningEvent? {
        let event = running
        running = nil
        awaited = nil
        return event
    }
}

extension EventOutcome {
    /// One bit per outcome, for `QueuedPost.endsAside`.
    @inline(__always)
    var bit: UInt8 {
        switch self {
        case .completed: 1
        case .stopped: 2
        case .unhandled: 4
        }
    }
}
