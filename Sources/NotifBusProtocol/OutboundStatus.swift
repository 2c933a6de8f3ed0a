// The encoder of a `status` reply page and the figures it reports (the counters the core
// keeps, the buffers the transport keeps): the broker lists items one at a time, in the
// order of §5 (clients, observers, handlers, slots), watching `byteCount` against its page
// budget; this writer only encodes. It decides nothing about paging.

/// The figures a `status` page reports, current on every page.
public struct StatusFigures: Sendable, Equatable {
    /// Posts waiting in the broker's queue.
    public var pending = 0
    /// The running event, if any.
    public var current: Int64? = nil
    /// How many queued posts one client may hold: its share of the queue.
    public var maxPerClient = 0
    /// The transport's buffers, as it last reported them.
    public var buffers = BufferFigures()
    /// The broker-wide counters.
    public var counters = BrokerCounters()
    /// The idempotency keys held, and their window.
    public var once = OnceFigures()

    /// All zero, no running event.
    public init() {}

    /// The figures of one page, each given.
    public init(pending: Int, current: Int64?, maxPerClient: Int, buffers: BufferFigures, counters: BrokerCounters) {
        self.pending = pending
        self.current = current
        self.maxPerClient = maxPerClient
        self.buffers = buffers
        self.counters = counters
    }
}

/// Broker-wide counters as `status` reports them: the core counts into one of these and
/// hands it to the writer as it is.
public struct BrokerCounters: Sendable, Equatable {
    /// Posts accepted into the queue.
    public var posted = 0
    /// Events that ended `completed`.
    public var completed = 0
    /// Events that ended `stopped`.
    public var stopped = 0
    /// Events that ended `unhandled`: no observer completed or stopped them.
    public var unhandled = 0
    /// Hops whose observer did not answer within the hop timeout.
    public var hopTimeouts = 0
    /// Hops whose observer went away (unsubscribed or disconnected) before answering.
    public var gone = 0
    /// `willPresent` completions refused as invalid, each ending its hop.
    public var invalid = 0
    /// Observers passed over because their connection had used up its time in the event,
    /// or was unresponsive.
    public var skipped = 0
    /// Invokes accepted (routed to a handler or not).
    public var invokes = 0
    /// Calls whose handler did not return within the call timeout.
    public var callTimeouts = 0

    /// All zero.
    public init() {}
}

/// The idempotency keys the broker holds and the bounds of their window, as `status`
/// reports them (§3.8).
public struct OnceFigures: Sendable, Equatable {
    /// Keys held now, those of posts still queued or running included.
    public var keys = 0
    /// Bytes of the keys and outcomes held (what `--once-bytes` bounds).
    public var bytes = 0
    public var maxKeys = 0
    public var maxAgeMs: Int64 = 0
    public var maxBytes = 0

    /// All zero.
    public init() {}

    public init(keys: Int, bytes: Int, maxKeys: Int, maxAgeMs: Int64, maxBytes: Int) {
        self.keys = keys
        self.bytes = bytes
        self.maxKeys = maxKeys
        self.maxAgeMs = maxAgeMs
        self.maxBytes = maxBytes
    }
}

/// The transport's input and output buffers across all connections, as `status` reports
/// them. The transport keeps these current; the core and this writer only report them.
public struct BufferFigures: Sendable, Equatable {
    /// Bytes buffered now: incomplete frames read plus output not yet written.
    public var bytes = 0
    /// The broker-wide cap (`--max-buffered-bytes`); 0 when the transport sets none.
    public var max = 0
    /// Connections cut off because the cap was exceeded.
    public var cutOff = 0

    /// All zero.
    public init() {}
}

/// Writes one `status` reply frame. Call the list openers in order
/// (`beginObservers`, `beginHandlers`, `beginSlots`), each list's items after its opener,
/// then `finish`.
public struct StatusPageWriter: ~Copyable {
    private var f: FrameBuilder
    private var first = true

    /// Starts the reply to `rid` with the server's name and uptime, and opens `clients`, in
    /// memory of its own that reserves `capacity` bytes at first.
    public init(_ rid: RequestID, server: String, uptimeMs: Int64, capacity: Int) {
        f = FrameBuilder(capacity: capacity)
        head(rid, server: server, uptimeMs: uptimeMs)
    }

    /// The same, written at the end of `store`: end it with `finish(next:figures:into:)`.
    public init(_ rid: RequestID, server: String, uptimeMs: Int64, appendingTo store: OutputStore) {
        f = FrameBuilder(appendingTo: store)
        head(rid, server: server, uptimeMs: uptimeMs)
    }

    private mutating func head(_ rid: RequestID, server: String, uptimeMs: Int64) {
        f.literal("{\"op\":\"reply\",\"id\":")
        f.requestID(rid)
        f.literal(",\"result\":{\"server\":")
        f.string(server)
        f.literal(",\"uptimeMs\":")
        f.int(uptimeMs)
        f.literal(",\"clients\":[")
    }

    /// Bytes of this reply written so far, the length prefix included.
    public var byteCount: Int { f.byteCount }

    private mutating func item(_ head: StaticString, _ nextHead: StaticString) {
        f.literal(first ? head : nextHead)
        first = false
    }

    public mutating func client(id: Int, name: String?, pid: Int32, uid: UInt32, queued: Int, unresponsive: Bool) {
        item("{\"client\":", ",{\"client\":")
        f.taggedID("c", id)
        f.literal(",\"name\":")
        f.optionalString(name)
        f.literal(",\"pid\":")
        f.int(Int64(pid))
        f.literal(",\"uid\":")
        f.int(Int64(uid))
        f.literal(",\"queued\":")
        f.int(Int64(queued))
        f.literal(unresponsive ? ",\"unresponsive\":true}" : ",\"unresponsive\":false}")
    }

    public mutating func beginObservers() {
        f.literal("],\"observers\":[")
        first = true
    }

    public mutating func observer(id: Int, client: Int, events: [String], priority: Int32, key: String?) {
        item("{\"observer\":", ",{\"observer\":")
        f.taggedID("o", id)
        f.literal(",\"client\":")
        f.taggedID("c", client)
        f.literal(",\"events\":[")
        for (j, e) in events.enumerated() {
            if j > 0 { f.byte(UInt8(ascii: ",")) }
            f.string(e)
        }
        f.literal("],\"priority\":")
        f.int(Int64(priority))
        f.literal(",\"key\":")
        f.optionalString(key)
        f.byte(UInt8(ascii: "}"))
    }

    public mutating func beginHandlers() {
        f.literal("],\"handlers\":[")
        first = true
    }

    public mutating func handler(id: Int, client: Int, channel: String, method: String?) {
        item("{\"handler\":", ",{\"handler\":")
        f.taggedID("h", id)
        f.literal(",\"client\":")
        f.taggedID("c", client)
        f.literal(",\"channel\":")
        f.string(channel)
        f.literal(",\"method\":")
        f.optionalString(method)
        f.byte(UInt8(ascii: "}"))
    }

    public mutating func beginSlots() {
        f.literal("],\"slots\":[")
        first = true
    }

    public mutating func slot(_ name: String) {
        if !first { f.byte(UInt8(ascii: ",")) }
        first = false
        f.string(name)
    }

    /// Closes the lists, names where the next page starts (nil: this is the last) and
    /// writes the figures.
    public consuming func finish(next: StatusPage?, figures s: StatusFigures) -> [UInt8] {
        tail(next: next, figures: s)
        return f.finish()
    }

    /// The same, for a reply begun with `init(_:server:uptimeMs:appendingTo:)`.
    public consuming func finish(next: StatusPage?, figures s: StatusFigures, into store: OutputStore) -> OutputRange {
        tail(next: next, figures: s)
        return f.finish(into: store)
    }

    private mutating func tail(next: StatusPage?, figures s: StatusFigures) {
        f.literal("],\"next\":")
        if let next { f.string(next.cursor) } else { f.literal("null") }
        f.literal(",\"queue\":{\"pending\":")
        f.int(Int64(s.pending))
        f.literal(",\"current\":")
        if let current = s.current { f.int(current) } else { f.literal("null") }
        f.literal(",\"maxPerClient\":")
        f.int(Int64(s.maxPerClient))
        f.literal("},\"buffers\":{\"bytes\":")
        f.int(Int64(s.buffers.bytes))
        f.literal(",\"max\":")
        f.int(Int64(s.buffers.max))
        f.literal(",\"cutOff\":")
        f.int(Int64(s.buffers.cutOff))
        f.literal("},\"once\":{\"keys\":")
        f.int(Int64(s.once.keys))
        f.literal(",\"bytes\":")
        f.int(Int64(s.once.bytes))
        f.literal(",\"maxKeys\":")
        f.int(Int64(s.once.maxKeys))
        f.literal(",\"maxAgeMs\":")
        f.int(s.once.maxAgeMs)
        f.literal(",\"maxBytes\":")
        f.int(Int64(s.once.maxBytes))
        f.literal("},\"counters\":{\"posted\":")
        f.int(Int64(s.counters.posted))
        f.literal(",\"completed\":")
        f.int(Int64(s.counters.completed))
        f.literal(",\"stopped\":")
        f.int(Int64(s.counters.stopped))
        f.literal(",\"unhandled\":")
        f.int(Int64(s.counters.unhandled))
        f.literal(",\"hopTimeouts\":")
        f.int(Int64(s.counters.hopTimeouts))
        f.literal(",\"gone\":")
        f.int(Int64(s.counters.gone))
        f.literal(",\"invalid\":")
        f.int(Int64(s.counters.invalid))
        f.literal(",\"skipped\":")
        f.int(Int64(s.counters.skipped))
        f.literal(",\"invokes\":")
        f.int(Int64(s.counters.invokes))
        f.literal(",\"callTimeouts\":")
        f.int(Int64(s.counters.callTimeouts))
        f.literal("}}}")
    }
}
