// Emitting the frames the broker sends, as typed `OutboundFrame`s encoded by
// NotifBusProtocol into the output store (no JSON is written here): replies, error frames,
// status pages (paged here, encoded there) and the `seen` mirror for monitors. Every
// outgoing frame passes through `emit`; none is encoded before it is emitted.
import NotifBusProtocol

extension Broker {
    /// Encodes `frame` into the output store and queues it for `c`. Inlined, so that the
    /// encoder of the frame's shape is called directly where the frame is made.
    @inline(__always)
    mutating func send(_ frame: OutboundFrame, to c: ConnectionID) {
        emit(to: c, frame.encode(into: output))
    }

    /// Queues a frame of the output store for `c` and mirrors it to every other monitor.
    /// Inlined (the mirrors apart), so that queueing a frame is an append where it is sent.
    @inline(__always)
    mutating func emit(to c: ConnectionID, _ frame: OutputRange) {
        if !sessions.monitors.isEmpty { mirror(frame, sentTo: c) }
        actions.append(.send(c, frame))
    }

    /// Mirrors a frame sent to `c` to every other monitor: one `seen` frame, encoded once
    /// and queued for each of them, so that a large frame costs its size once in the output
    /// store however many monitors there are.
    mutating func mirror(_ frame: OutputRange, sentTo c: ConnectionID) {
        if sessions.monitors.count == 1 {
            let m = sessions.monitors[0]
            if m != c { actions.append(.send(m, OutboundFrame.seen(sent: frame, client: c, into: output))) }
            return
        }
        var seen: OutputRange? = nil
        for m in sessions.monitors where m != c {
            if seen == nil { seen = OutboundFrame.seen(sent: frame, client: c, into: output) }
            actions.append(.send(m, seen!))
        }
    }

    /// Mirrors a frame `c` sent (its body, in the read buffer) to every other monitor, as
    /// one `seen` frame queued for each. Only JSON objects can be embedded in `seen`: the
    /// caller passes no other.
    @inline(never)
    mutating func mirrorInbound(_ body: UnsafeRawBufferPointer, from c: ConnectionID) {
        if sessions.monitors.count == 1 {
            let m = sessions.monitors[0]
            if m != c { actions.append(.send(m, OutboundFrame.seen(inbound: true, client: c, frame: body, into: output))) }
            return
        }
        var seen: OutputRange? = nil
        for m in sessions.monitors where m != c {
            if seen == nil { seen = OutboundFrame.seen(inbound: true, client: c, frame: body, into: output) }
            actions.append(.send(m, seen!))
        }
    }

    /// A reply whose result is raw JSON, or null, sent only while `c` is connected.
    mutating func replyValue(to c: ConnectionID, _ rid: RequestID, _ value: RawJSON?) {
        guard sessions[c] != nil else { return }
        send(.reply(rid, .value(value)), to: c)
    }

    /// Answers `rid` (nil: with an error frame) with `error`, while `c` is connected; an
    /// error whose code closes the connection (`ErrorCode.closesConnection`) is sent even
    /// before `c` is registered (a refusal at connect), and then `c` is closed.
    mutating func refuse(_ c: ConnectionID, _ rid: RequestID?, _ error: BrokerError, now: Instant) {
        let closes = error.code.closesConnection
        guard closes || sessions[c] != nil else { return }
        send(error.frame(rid), to: c)
        if closes { close(c, now: now) }
    }

    /// One line for the log (SIGUSR1): the sizes and counters `status` would report.
    public var summary: String {
        "\(sessions.records.values.filter(\.greeted).count) greeted (\(sessions.records.values.filter(\.unresponsive).count) unresponsive), "
            + "\(observers.count) observer(s), \(channels.handlers.count) handler(s), "
            + "\(events.count) post(s) waiting, running event \(events.running.map { String($0.post.event) } ?? "none"), "
            + "\(slots.count) slot(s); posted \(counters.posted), completed \(counters.completed), stopped \(counters.stopped), "
            + "unhandled \(counters.unhandled), hop timeouts \(counters.hopTimeouts), skipped \(counters.skipped), "
            + "gone \(counters.gone), invalid \(counters.invalid), invokes \(counters.invokes), call timeouts \(counters.callTimeouts)"
    }

    /// One page of `status`: the four lists, in order, from just after `page`, until the
    /// reply holds `statusPageBytes` (at least one item is listed, so paging always moves
    /// on); `next` names where the following page starts, or is null on the last page.
    /// The figures (queue, counters, buffers) are current on every page.
    /// The page is encoded into the output store.
    func statusReply(_ rid: RequestID, page: StatusPage?, now: Instant) -> OutputRange {
        let budget = configuration.statusPageBytes
        var w = StatusPageWriter(
            rid, server: configuration.serverName, uptimeMs: Int64((now &- startedAt) / 1_000_000), appendingTo: output)
        let section = page?.section ?? 0
        var next: StatusPage? = nil
        var listed = 0
        /// The last item listed on this page: where the next page starts when this one is full.
        var lastListed: StatusPage? = nil

        if section == 0 {
            var after = -1
            if case .client(let n)? = page { after = n }
            for (id, c) in sessions.records.sortedEntries where id > after {
                guard c.greeted else { continue }
                if listed > 0 && w.byteCount >= budget {
                    next = lastListed
                    break
                }
                listed += 1
                lastListed = .client(id)
                w.client(
                    id: id, name: c.name, pid: c.credentials.pid, uid: c.credentials.uid, queued: c.queuedPosts,
                    unresponsive: c.unresponsive)
            }
        }
        w.beginObservers()
        if next == nil && section <= 1 {
            var after: ChainPosition? = nil
            if case .observer(let p, let n)? = page { after = ChainPosition(priority: p, id: n) }
            let positions = observers.records.values.lazy.map { ChainPosition(priority: $0.priority, id: $0.id) }
            let picked = Broker.smallest(positions, after: after, count: Broker.statusItemsPerPage(budget))
            for position in picked {
                guard let o = observers[position.id] else { continue }
                if listed > 0 && w.byteCount >= budget {
                    next = lastListed
                    break
                }
                listed += 1
                lastListed = .observer(priority: o.priority, id: o.id)
                w.observer(id: o.id, client: o.client, events: o.events, priority: o.priority, key: o.key)
            }
            // All picked fitted: there may be more beyond them, on the next page.
            if next == nil && picked.count == Broker.statusItemsPerPage(budget) { next = lastListed }
        }
        w.beginHandlers()
        if next == nil && section <= 2 {
            var after = -1
            if case .handler(let n)? = page { after = n }
            let picked = Broker.smallest(channels.handlers.keys, after: after, count: Broker.statusItemsPerPage(budget))
            for id in picked {
                guard let h = channels.handlers[id] else { continue }
                if listed > 0 && w.byteCount >= budget {
                    next = lastListed
                    break
                }
                listed += 1
                lastListed = .handler(h.id)
                w.handler(id: h.id, client: h.client, channel: h.key.channel, method: h.key.method)
            }
            if next == nil && picked.count == Broker.statusItemsPerPage(budget) { next = lastListed }
        }
        w.beginSlots()
        if next == nil {
            var after: String? = nil
            if case .slot(let name)? = page { after = name }
            for name in slots.values.keys.sorted() where after.map({ name > $0 }) ?? true {
                if listed > 0 && w.byteCount >= budget {
                    next = lastListed
                    break
                }
                listed += 1
                lastListed = .slot(name)
                w.slot(name)
            }
        }
        var figures = StatusFigures(
            pending: events.count, current: events.running?.post.event, maxPerClient: configuration.queueShare,
            buffers: buffers, counters: counters)
        figures.once = OnceFigures(
            keys: once.count, bytes: once.bytes, maxKeys: configuration.once.maxKeys, maxAgeMs: configuration.once.maxAgeMs,
            maxBytes: configuration.once.maxBytes)
        return w.finish(next: next, figures: figures, into: output)
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
