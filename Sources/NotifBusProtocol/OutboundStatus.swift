// The encoder of a `status` reply page: the broker lists items one at a time, in the
// order of §5 (clients, observers, handlers, slots), watching `byteCount` against its page
// budget; this writer only encodes. It decides nothing about paging.

/// The figures a `status` page reports, current on every page.
public struct StatusFigures: Sendable, Equatable {
    public var pending = 0
    /// The running event, if any.
    public var current: Int64? = nil
    public var maxPerClient = 0
    public var bufferBytes = 0
    public var bufferMax = 0
    public var cutOff = 0
    public var posted = 0
    public var completed = 0
    public var stopped = 0
    public var unhandled = 0
    public var hopTimeouts = 0
    public var gone = 0
    public var invalid = 0
    public var skipped = 0
    public var invokes = 0
    public var callTimeouts = 0

    public init() {}
}

/// Writes one `status` reply frame. Call the list openers in order
/// (`beginObservers`, `beginHandlers`, `beginSlots`), each list's items after its opener,
/// then `finish`.
public struct StatusPageWriter: ~Copyable {
    private var f: FrameBuilder
    private var first = true

    /// Starts the reply to `rid` with the server's name and uptime, and opens `clients`.
    public init(_ rid: RequestID, server: String, uptimeMs: Int64, capacity: Int) {
        f = FrameBuilder(capacity: capacity)
        f.literal("{\"op\":\"reply\",\"id\":")
        f.requestID(rid)
        f.literal(",\"result\":{\"server\":")
        f.string(server)
        f.literal(",\"uptimeMs\":")
        f.int(uptimeMs)
        f.literal(",\"clients\":[")
    }

    /// Bytes written so far, the length prefix included.
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
        f.literal("],\"next\":")
        if let next { f.string(next.cursor) } else { f.literal("null") }
        f.literal(",\"queue\":{\"pending\":")
        f.int(Int64(s.pending))
        f.literal(",\"current\":")
        if let current = s.current { f.int(current) } else { f.literal("null") }
        f.literal(",\"maxPerClient\":")
        f.int(Int64(s.maxPerClient))
        f.literal("},\"buffers\":{\"bytes\":")
        f.int(Int64(s.bufferBytes))
        f.literal(",\"max\":")
        f.int(Int64(s.bufferMax))
        f.literal(",\"cutOff\":")
        f.int(Int64(s.cutOff))
        f.literal("},\"counters\":{\"posted\":")
        f.int(Int64(s.posted))
        f.literal(",\"completed\":")
        f.int(Int64(s.completed))
        f.literal(",\"stopped\":")
        f.int(Int64(s.stopped))
        f.literal(",\"unhandled\":")
        f.int(Int64(s.unhandled))
        f.literal(",\"hopTimeouts\":")
        f.int(Int64(s.hopTimeouts))
        f.literal(",\"gone\":")
        f.int(Int64(s.gone))
        f.literal(",\"invalid\":")
        f.int(Int64(s.invalid))
        f.literal(",\"skipped\":")
        f.int(Int64(s.skipped))
        f.literal(",\"invokes\":")
        f.int(Int64(s.invokes))
        f.literal(",\"callTimeouts\":")
        f.int(Int64(s.callTimeouts))
        f.literal("}}}")
        return f.finish()
    }
}
