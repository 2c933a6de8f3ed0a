// Building and emitting the frames the broker sends: replies, error frames, status (one
// bounded page at a time), and the `seen` mirror for monitors. Every outgoing frame passes
// through `emit`.
import NotifBusProtocol

extension Broker {
    /// Queues a frame for `c` and mirrors it to every other monitor.
    mutating func emit(to c: ConnectionID, _ frame: [UInt8]) {
        if !monitors.isEmpty {
            frame.withUnsafeBytes { bytes in
                mirror(UnsafeRawBufferPointer(rebasing: bytes[Limits.headerBytes...]), client: c, inbound: false)
            }
        }
        actions.append(.send(c, frame))
    }

    mutating func mirrorInbound(_ body: UnsafeRawBufferPointer, from c: ConnectionID, _ decoded: DecodeResult) {
        if case .badJSON = decoded { return }  // only JSON objects can be embedded in `seen`
        mirror(body, client: c, inbound: true)
    }

    mutating func mirror(_ body: UnsafeRawBufferPointer, client c: ConnectionID, inbound: Bool) {
        for m in monitors where m != c {
            var f = FrameBuilder(capacity: body.count + 48)
            f.literal(inbound ? "{\"op\":\"seen\",\"dir\":\"in\",\"client\":\"c" : "{\"op\":\"seen\",\"dir\":\"out\",\"client\":\"c")
            f.int(Int64(c))
            f.literal("\",\"frame\":")
            f.raw(body)
            f.literal("}")
            actions.append(.send(m, f.finish()))
        }
    }

    /// `{"op":"reply","id":<id>,"result":` — the caller writes the result and `}`.
    static func replyHead(_ rid: RequestID, capacity: Int = 96) -> FrameBuilder {
        var f = FrameBuilder(capacity: capacity)
        f.literal("{\"op\":\"reply\",\"id\":")
        f.requestID(rid)
        f.literal(",\"result\":")
        return f
    }

    mutating func replyLiteral(to c: ConnectionID, _ rid: RequestID, _ result: StaticString) {
        var f = Broker.replyHead(rid, capacity: 48 + result.utf8CodeUnitCount)
        f.literal(result)
        f.literal("}")
        emit(to: c, f.finish())
    }

    /// A reply whose result is raw JSON, or null.
    mutating func replyRaw(to c: ConnectionID, _ rid: RequestID, result: RawJSON?) {
        guard clients[c] != nil else { return }
        var f = Broker.replyHead(rid, capacity: 40 + (result?.count ?? 4))
        f.optionalRaw(result)
        f.literal("}")
        emit(to: c, f.finish())
    }

    /// An error reply to a request, sent only while `c` is connected.
    mutating func reply(to c: ConnectionID, _ rid: RequestID?, error code: ErrorCode, _ message: String) {
        guard clients[c] != nil else { return }
        emit(to: c, Broker.errorFrame(rid, code: code, message: message))
    }

    /// The refusal of a resumed `subscribe` or `handle` whose key or route a live
    /// registration holds: `details.by` names that holder, so the client can report it.
    mutating func replySuperseded(to c: ConnectionID, _ rid: RequestID, what: String, by holder: String) {
        let message = "\(what) is held by \(holder), registered since; the resumed registration yields"
        var f = FrameBuilder(capacity: 96 + message.utf8.count)
        f.literal("{\"op\":\"reply\",\"id\":")
        f.requestID(rid)
        f.literal(",\"error\":{\"code\":")
        f.string(ErrorCode.superseded.rawValue)
        f.literal(",\"message\":")
        f.string(message)
        f.literal(",\"details\":{\"by\":")
        f.string(holder)
        f.literal("}}}")
        emit(to: c, f.finish())
    }

    /// An error frame (`"id": null`); also used before a connection is registered.
    mutating func sendErrorFrame(to c: ConnectionID, code: ErrorCode, message: String) {
        emit(to: c, Broker.errorFrame(nil, code: code, message: message))
    }

    static func errorFrame(_ rid: RequestID?, code: ErrorCode, message: String) -> [UInt8] {
        code.frame(rid, message: message)
    }

    /// One line for the log (SIGUSR1): the sizes and counters `status` would report.
    public var summary: String {
        "\(clients.values.filter(\.greeted).count) greeted (\(clients.values.filter(\.unresponsive).count) unresponsive), "
            + "\(observers.count) observer(s), \(handlers.count) handler(s), "
            + "\(queue.count) post(s) waiting, running event \(current.map { String($0.post.event) } ?? "none"), "
            + "\(slots.count) slot(s); posted \(counters.posted), completed \(counters.completed), stopped \(counters.stopped), "
            + "unhandled \(counters.unhandled), hop timeouts \(counters.hopTimeouts), skipped \(counters.skipped), "
            + "gone \(counters.gone), invalid \(counters.invalid), invokes \(counters.invokes), call timeouts \(counters.callTimeouts)"
    }

    /// One page of `status`: the four lists, in order, from just after `page`, until the
    /// reply holds `statusPageBytes` (at least one item is listed, so paging always moves
    /// on); `next` names where the following page starts, or is null on the last page.
    /// The figures (queue, counters, buffers) are current on every page.
    func statusReply(_ rid: RequestID, page: StatusPage?, now: Instant) -> [UInt8] {
        let budget = configuration.statusPageBytes
        var f = Broker.replyHead(rid, capacity: 1024 + Swift.min(budget, clients.count * 100 + observers.count * 96))
        f.literal("{\"server\":")
        f.string(configuration.serverName)
        f.literal(",\"uptimeMs\":")
        f.int(Int64((now &- startedAt) / 1_000_000))
        let section = page?.section ?? 0
        var next: StatusPage? = nil
        var listed = 0
        /// The last item listed on this page: where the next page starts when this one is full.
        var lastListed: StatusPage? = nil

        f.literal(",\"clients\":[")
        if section == 0 {
            var after = -1
            if case .client(let n)? = page { after = n }
            for id in clients.keys.sorted() where id > after {
                let c = clients[id]!
                guard c.greeted else { continue }
                if listed > 0 && f.byteCount >= budget {
                    next = lastListed
                    break
                }
                f.literal(listed == 0 ? "{\"client\":\"c" : ",{\"client\":\"c")
                listed += 1
                lastListed = .client(id)
                f.int(Int64(id))
                f.literal("\",\"name\":")
                f.optionalString(c.name)
                f.literal(",\"pid\":")
                f.int(Int64(c.credentials.pid))
                f.literal(",\"uid\":")
                f.int(Int64(c.credentials.uid))
                f.literal(",\"queued\":")
                f.int(Int64(c.queuedPosts))
                f.literal(c.unresponsive ? ",\"unresponsive\":true}" : ",\"unresponsive\":false}")
            }
        }
        f.literal("],\"observers\":[")
        if next == nil && section <= 1 {
            var after: ChainPosition? = nil
            if case .observer(let p, let n)? = page { after = ChainPosition(priority: p, id: n) }
            let positions = observers.values.lazy.map { ChainPosition(priority: $0.priority, id: $0.id) }
            var first = true
            let picked = Broker.smallest(positions, after: after, count: Broker.statusItemsPerPage(budget))
            for position in picked {
                let o = observers[position.id]!
                if listed > 0 && f.byteCount >= budget {
                    next = lastListed
                    break
                }
                f.literal(first ? "{\"observer\":\"o" : ",{\"observer\":\"o")
                first = false
                listed += 1
                lastListed = .observer(priority: o.priority, id: o.id)
                f.int(Int64(o.id))
                f.literal("\",\"client\":\"c")
                f.int(Int64(o.client))
                f.literal("\",\"events\":[")
                for (j, e) in o.events.enumerated() {
                    if j > 0 { f.literal(",") }
                    f.string(e)
                }
                f.literal("],\"priority\":")
                f.int(Int64(o.priority))
                f.literal(",\"key\":")
                f.optionalString(o.key)
                f.literal("}")
            }
            // All picked fitted: there may be more beyond them, on the next page.
            if next == nil && picked.count == Broker.statusItemsPerPage(budget) { next = lastListed }
        }
        f.literal("],\"handlers\":[")
        if next == nil && section <= 2 {
            var after = -1
            if case .handler(let n)? = page { after = n }
            var first = true
            let picked = Broker.smallest(handlers.keys, after: after, count: Broker.statusItemsPerPage(budget))
            for id in picked {
                let h = handlers[id]!
                if listed > 0 && f.byteCount >= budget {
                    next = lastListed
                    break
                }
                f.literal(first ? "{\"handler\":\"h" : ",{\"handler\":\"h")
                first = false
                listed += 1
                lastListed = .handler(h.id)
                f.int(Int64(h.id))
                f.literal("\",\"client\":\"c")
                f.int(Int64(h.client))
                f.literal("\",\"channel\":")
                f.string(h.key.channel)
                f.literal(",\"method\":")
                f.optionalString(h.key.method)
                f.literal("}")
            }
            if next == nil && picked.count == Broker.statusItemsPerPage(budget) { next = lastListed }
        }
        f.literal("],\"slots\":[")
        if next == nil {
            var after: String? = nil
            if case .slot(let name)? = page { after = name }
            var first = true
            for name in slots.keys.sorted() where after.map({ name > $0 }) ?? true {
                if listed > 0 && f.byteCount >= budget {
                    next = lastListed
                    break
                }
                if !first { f.literal(",") }
                first = false
                listed += 1
                lastListed = .slot(name)
                f.string(name)
            }
        }
        f.literal("],\"next\":")
        if let next { f.string(next.cursor) } else { f.literal("null") }
        f.literal(",\"queue\":{\"pending\":")
        f.int(Int64(queue.count))
        f.literal(",\"current\":")
        if let cur = current { f.int(cur.post.event) } else { f.literal("null") }
        f.literal(",\"maxPerClient\":")
        f.int(Int64(configuration.queueShare))
        f.literal("},\"buffers\":{\"bytes\":")
        f.int(Int64(buffers.bytes))
        f.literal(",\"max\":")
        f.int(Int64(buffers.max))
        f.literal(",\"cutOff\":")
        f.int(Int64(buffers.cutOff))
        f.literal("},\"counters\":{\"posted\":")
        f.int(Int64(counters.posted))
        f.literal(",\"completed\":")
        f.int(Int64(counters.completed))
        f.literal(",\"stopped\":")
        f.int(Int64(counters.stopped))
        f.literal(",\"unhandled\":")
        f.int(Int64(counters.unhandled))
        f.literal(",\"hopTimeouts\":")
        f.int(Int64(counters.hopTimeouts))
        f.literal(",\"gone\":")
        f.int(Int64(counters.gone))
        f.literal(",\"invalid\":")
        f.int(Int64(counters.invalid))
        f.literal(",\"skipped\":")
        f.int(Int64(counters.skipped))
        f.literal(",\"invokes\":")
        f.int(Int64(counters.invokes))
        f.literal(",\"callTimeouts\":")
        f.int(Int64(counters.callTimeouts))
        f.literal("}}}")
        return f.finish()
    }

    /// At most this many observers or handlers are picked for one page, about as many as
    /// fit in `budget` (an observer's entry takes at least 70 bytes, a handler's at least
    /// 58). When the pick runs out before the budget, the page ends there and `next` goes
    /// on after its last item.
    static func statusItemsPerPage(_ budget: Int) -> Int { Swift.max(1, budget / 64) + 1 }

    /// The `count` smallest keys above `after`, in order: O(n log count) with a bounded
    /// max-heap, so that a page of a status with a million observers does not sort them all.
    static func smallest<Key: Comparable>(_ keys: some Sequence<Key>, after: Key?, count: Int) -> [Key] {
        var heap: [Key] = []  // a max-heap of the smallest keys seen so far
        heap.reserveCapacity(Swift.min(count, 1024))
        for key in keys {
            if let after, key <= after { continue }
            if heap.count < count {
                heap.append(key)
                var i = heap.count - 1
                while i > 0 {
                    let parent = (i - 1) / 2
                    guard heap[parent] < heap[i] else { break }
                    heap.swapAt(parent, i)
                    i = parent
                }
            } else if key < heap[0] {
                heap[0] = key
                var i = 0
                while true {
                    let l = 2 * i + 1, r = l + 1
                    var m = i
                    if l < heap.count && heap[m] < heap[l] { m = l }
                    if r < heap.count && heap[m] < heap[r] { m = r }
                    if m == i { break }
                    heap.swapAt(i, m)
                    i = m
                }
            }
        }
        return heap.sorted()
    }
}

/// An observer's place in chain order: priority, then subscription order.
struct ChainPosition: Comparable {
    let priority: Int32
    let id: Int

    static func < (a: ChainPosition, b: ChainPosition) -> Bool { (a.priority, a.id) < (b.priority, b.id) }
}
