// Building and emitting the frames the broker sends: replies, error frames, status, and
// the `seen` mirror for monitors. Every outgoing frame passes through `emit`.
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

    func statusReply(_ rid: RequestID, now: Instant) -> [UInt8] {
        var f = Broker.replyHead(rid, capacity: 512 + clients.count * 64 + observers.count * 96)
        f.literal("{\"server\":")
        f.string(configuration.serverName)
        f.literal(",\"uptimeMs\":")
        f.int(Int64((now &- startedAt) / 1_000_000))
        f.literal(",\"clients\":[")
        var first = true
        for id in clients.keys.sorted() {
            let c = clients[id]!
            guard c.greeted else { continue }
            f.literal(first ? "{\"client\":\"c" : ",{\"client\":\"c")
            first = false
            f.int(Int64(id))
            f.literal("\",\"name\":")
            f.optionalString(c.name)
            f.literal(",\"pid\":")
            f.int(Int64(c.credentials.pid))
            f.literal(",\"uid\":")
            f.int(Int64(c.credentials.uid))
            f.literal("}")
        }
        f.literal("],\"observers\":[")
        let ordered = observers.values.sorted { ($0.priority, $0.id) < ($1.priority, $1.id) }
        for (i, o) in ordered.enumerated() {
            f.literal(i == 0 ? "{\"observer\":\"o" : ",{\"observer\":\"o")
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
        f.literal("],\"handlers\":[")
        for (i, h) in handlers.values.sorted(by: { $0.id < $1.id }).enumerated() {
            f.literal(i == 0 ? "{\"handler\":\"h" : ",{\"handler\":\"h")
            f.int(Int64(h.id))
            f.literal("\",\"client\":\"c")
            f.int(Int64(h.client))
            f.literal("\",\"channel\":")
            f.string(h.key.channel)
            f.literal(",\"method\":")
            f.optionalString(h.key.method)
            f.literal("}")
        }
        f.literal("],\"queue\":{\"pending\":")
        f.int(Int64(queue.count))
        f.literal(",\"current\":")
        if let cur = current { f.int(cur.post.event) } else { f.literal("null") }
        f.literal("},\"slots\":[")
        for (i, name) in slots.keys.sorted().enumerated() {
            if i > 0 { f.literal(",") }
            f.string(name)
        }
        f.literal("],\"counters\":{\"posted\":")
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
        f.literal(",\"invokes\":")
        f.int(Int64(counters.invokes))
        f.literal(",\"callTimeouts\":")
        f.int(Int64(counters.callTimeouts))
        f.literal("}}}")
        return f.finish()
    }
}
