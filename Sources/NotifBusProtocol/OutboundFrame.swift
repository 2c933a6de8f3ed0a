// Every frame the broker writes, as typed values, and their encoders: replies and their
// results, error replies and frames, `event`, `call`, `evicted` and `seen`. User data
// (payloads, arguments, values, handler results and errors) is copied in byte for byte as
// raw JSON and never re-encoded. Each shape of frame has one encoder, which writes straight
// into the broker's output store; tests and tools get the same bytes copied out of one.

/// A frame the broker sends to one connection.
public enum OutboundFrame: ~Escapable {
    /// `{"op":"reply","id":…,"result":…}`.
    case reply(RequestID, ReplyResult)
    /// An error reply (`id` given) or error frame (`id` nil).
    case error(RequestID?, ErrorCode, message: String)
    /// `superseded`, whose `details.by` names the registration that holds the key or route.
    case superseded(RequestID, message: String, by: String)
    /// `once_conflict`, whose `details.op` names the op the idempotency key was first used with.
    case onceConflict(RequestID, message: String, op: String)
    /// The reply to a repeat of a keyed request: the first outcome, byte for byte, marked
    /// `"repeat":true` (§3.8).
    case repeated(RequestID, OnceOutcome)
    /// A handler's `return` with an error, relayed to the invoker as it was written.
    case handlerError(RequestID, JSONBytes)
    /// One hop of a chain: the event sent to an observer.
    case event(event: Int64, observer: Int, name: String, payload: RawJSON?)
    /// A method call routed to a handler; `from` is the invoker's connection.
    case call(call: Int64, handler: Int, channel: JSONName, method: JSONName, arguments: JSONBytes?, from: Int)
    /// The observer lost its unique key to a newer subscription.
    case observerEvicted(Int, by: Int)
    /// The handler lost its route to a newer registration.
    case handlerEvicted(Int, by: Int)

    /// The length-prefixed frame, as one array of its own (tests, tools): encoded in an
    /// output store of its own and copied out, so that it is byte for byte what
    /// `encode(into:)` writes.
    public func encoded() -> [UInt8] {
        let store = OutputStore()
        return store.bytes(of: encode(into: store))
    }

    /// The length-prefixed frame, encoded at the end of `store`. Each shape of frame has an
    /// encoder of its own, which makes room for the whole frame once and writes it through a
    /// cursor; inlined, so that where the frame is made in place (`send(.reply(rid, .empty))`)
    /// that encoder is called with the case's values, and no enum is built or taken apart.
    @inlinable @inline(__always)
    public func encode(into store: OutputStore) -> OutputRange {
        switch self {
        case .reply(let rid, let result):
            return result.encodeReply(rid, into: store)
        case .error(let rid, let code, let message):
            return OutboundFrame.encodeError(rid, code, message, details: nil, into: store)
        case .superseded(let rid, let message, let by):
            return OutboundFrame.encodeError(rid, .superseded, message, details: ("{\"by\":", by), into: store)
        case .onceConflict(let rid, let message, let op):
            return OutboundFrame.encodeError(rid, .onceConflict, message, details: ("{\"op\":", op), into: store)
        case .repeated(let rid, let outcome):
            return OutboundFrame.encodeRepeat(rid, outcome, into: store)
        case .handlerError(let rid, let error):
            return error.withUnsafeBytes { OutboundFrame.encodeHandlerError(rid, $0, into: store) }
        case .event(let event, let observer, let name, let payload):
            return OutboundFrame.encodeEvent(event: event, observer: observer, name: name, payload: payload, into: store)
        case .call(let call, let handler, let channel, let method, let arguments, let from):
            return OutboundFrame.encodeCall(
                call: call, handler: handler, channel: channel, method: method, arguments: arguments, from: from, into: store)
        case .observerEvicted(let old, let by):
            return OutboundFrame.encodeEvicted(handler: false, old, by: by, into: store)
        case .handlerEvicted(let old, let by):
            return OutboundFrame.encodeEvicted(handler: true, old, by: by, into: store)
        }
    }

    /// `{"op":"reply","id":…,"error":{"code":…,"message":…}}`, or with `details` (`superseded`,
    /// `once_conflict`) `…,"details":{"<member>":…}}}`, the member's opening given as a
    /// literal with its brace.
    @usableFromInline
    static func encodeError(
        _ rid: RequestID?, _ code: ErrorCode, _ message: String, details: (opening: StaticString, value: String)?,
        into store: OutputStore
    ) -> OutputRange {
        let code = code.rawValue
        @inline(__always) func shape<W: FrameWriter>(_ w: inout W) {
            w.literal("{\"op\":\"reply\",\"id\":")
            if let rid { w.requestID(rid) } else { w.literal("null") }
            w.literal(",\"error\":{\"code\":")
            w.string(code)
            w.literal(",\"message\":")
            w.string(message)
            if let details {
                w.literal(",\"details\":")
                w.literal(details.opening)
                w.string(details.value)
                w.literal("}}}")
            } else {
                w.literal("}}")
            }
        }
        return store.frame(upTo: FrameRoom.of(shape)) { shape(&$0) }
    }

    /// A repeat's reply: `{"op":"reply","id":…,"result":…,"repeat":true}`, or with `error`.
    @usableFromInline
    static func encodeRepeat(_ rid: RequestID, _ outcome: OnceOutcome, into store: OutputStore) -> OutputRange {
        outcome.withBytes { isError, bytes in repeatReply(rid, isError: isError, bytes, into: store) }
    }

    /// A repeat's reply made from the first outcome's bytes where they lie (`bytes` are not
    /// memory of `store`).
    public static func repeatReply(_ rid: RequestID, isError: Bool, _ bytes: UnsafeRawBufferPointer, into store: OutputStore) -> OutputRange {
        @inline(__always) func shape<W: FrameWriter>(_ w: inout W) {
            w.literal("{\"op\":\"reply\",\"id\":")
            w.requestID(rid)
            if isError { w.literal(",\"error\":") } else { w.literal(",\"result\":") }
            w.raw(bytes)
            w.literal(",\"repeat\":true}")
        }
        return store.frame(upTo: FrameRoom.of(shape)) { shape(&$0) }
    }

    /// A handler's error relayed: `{"op":"reply","id":…,"error":…}`.
    @usableFromInline
    static func encodeHandlerError(_ rid: RequestID, _ error: UnsafeRawBufferPointer, into store: OutputStore) -> OutputRange {
        @inline(__always) func shape<W: FrameWriter>(_ w: inout W) {
            w.literal("{\"op\":\"reply\",\"id\":")
            w.requestID(rid)
            w.literal(",\"error\":")
            w.raw(error)
            w.byte(UInt8(ascii: "}"))
        }
        return store.frame(upTo: FrameRoom.of(shape)) { shape(&$0) }
    }

    /// An event frame made whole; the broker writes a post's frames from its `EventFrame`,
    /// with the same head and tail.
    @usableFromInline
    static func encodeEvent(event: Int64, observer: Int, name: String, payload: RawJSON?, into store: OutputStore) -> OutputRange {
        func encode(_ payload: UnsafeRawBufferPointer?) -> OutputRange {
            @inline(__always) func shape<W: FrameWriter>(_ w: inout W) {
                EventFrame.head(event: event, &w)
                w.int(Int64(observer))
                EventFrame.tail(name: name, payload: payload, &w)
            }
            return store.frame(upTo: FrameRoom.of(shape)) { shape(&$0) }
        }
        guard let payload else { return encode(nil) }
        return payload.withUnsafeBytes { encode($0) }
    }

    @usableFromInline
    static func encodeCall(
        call: Int64, handler: Int, channel: JSONName, method: JSONName, arguments: JSONBytes?, from: Int, into store: OutputStore
    ) -> OutputRange {
        @inline(__always) func shape<W: FrameWriter>(_ w: inout W) {
            w.literal("{\"op\":\"call\",\"call\":")
            w.int(call)
            w.literal(",\"handler\":")
            w.taggedID("h", handler)
            w.literal(",\"channel\":")
            w.name(channel)
            w.literal(",\"method\":")
            w.name(method)
            w.literal(",\"arguments\":")
            if let arguments { arguments.withUnsafeBytes { w.raw($0) } } else { w.literal("null") }
            w.literal(",\"from\":")
            w.taggedID("c", from)
            w.byte(UInt8(ascii: "}"))
        }
        return store.frame(upTo: FrameRoom.of(shape)) { shape(&$0) }
    }

    /// `evicted`: the registration that went (an observer, or with `handler` a handler),
    /// and its successor, both ids carrying the registration's tag.
    @usableFromInline
    static func encodeEvicted(handler: Bool, _ old: Int, by: Int, into store: OutputStore) -> OutputRange {
        @inline(__always) func shape<W: FrameWriter>(_ w: inout W) {
            let tag: Unicode.Scalar = handler ? "h" : "o"
            if handler { w.literal("{\"op\":\"evicted\",\"handler\":") } else { w.literal("{\"op\":\"evicted\",\"observer\":") }
            w.taggedID(tag, old)
            w.literal(",\"by\":")
            w.taggedID(tag, by)
            w.byte(UInt8(ascii: "}"))
        }
        return store.frame(upTo: FrameRoom.of(shape)) { shape(&$0) }
    }

    /// The `seen` mirror of one frame (its body, without the length prefix) that `client`
    /// sent (`inbound`) or was sent, for a monitor. `frame` must be one JSON object.
    public static func seen(inbound: Bool, client: Int, frame: UnsafeRawBufferPointer) -> [UInt8] {
        var f = FrameBuilder(capacity: frame.count + 64)
        seenHead(&f, inbound: inbound, client: client)
        f.raw(frame)
        f.byte(UInt8(ascii: "}"))
        return f.finish()
    }

    /// The same mirror, encoded at the end of `store`. `frame` is not memory of `store`.
    public static func seen(inbound: Bool, client: Int, frame: UnsafeRawBufferPointer, into store: OutputStore) -> OutputRange {
        var f = FrameBuilder(appendingTo: store)
        seenHead(&f, inbound: inbound, client: client)
        f.raw(frame)
        f.byte(UInt8(ascii: "}"))
        return f.finish(into: store)
    }

    /// The mirror of a frame `store` already holds (`sent`, length prefix included), sent to
    /// `client`, encoded at the end of `store`: its bytes are read once the builder is made,
    /// which is where the store's memory may last move.
    public static func seen(sent: OutputRange, client: Int, into store: OutputStore) -> OutputRange {
        var f = FrameBuilder(appendingTo: store)
        seenHead(&f, inbound: false, client: client)
        store.withBytes(of: sent) { f.raw(UnsafeRawBufferPointer(rebasing: $0[Limits.headerBytes...])) }
        f.byte(UInt8(ascii: "}"))
        return f.finish(into: store)
    }

    static func seenHead(_ f: inout FrameBuilder, inbound: Bool, client: Int) {
        f.literal(inbound ? "{\"op\":\"seen\",\"dir\":\"in\",\"client\":" : "{\"op\":\"seen\",\"dir\":\"out\",\"client\":")
        f.taggedID("c", client)
        f.literal(",\"frame\":")
    }
}

/// The `result` of a successful reply, one case per shape of §5.
public enum ReplyResult: ~Escapable {
    /// `hello`: the protocol spoken, the server's name, the connection's id and `--max-frame`.
    case hello(server: String, client: Int, maxFrame: Int)
    /// `{}`: `ping` and `monitor`.
    case empty
    /// `subscribe`: the new observer and the one whose key it took, if any.
    case subscribed(observer: Int, replaced: Int?)
    /// `unsubscribe`.
    case observerRemoved(Int)
    /// `handle`: the new handler and the one whose route it took, if any.
    case handled(handler: Int, replaced: Int?)
    /// `unhandle`.
    case handlerRemoved(Int)
    /// The end of a posted event.
    case posted(PostReply)
    /// `put`: whether a value was replaced, and whether a waiting taker got it at once.
    case put(replaced: Bool, delivered: Bool)
    /// Raw JSON, or null: a slot's value (`take`, `peek`), a handler's result (`invoke`).
    case value(RawJSON?)
    /// A handler's result, relayed as it was written.
    case relayed(JSONBytes)
    /// `getCategories`: the category set as it was stored.
    case categories(RawJSON)
    /// `setCategories`: how many categories are now in force.
    case categoryCount(Int)

    /// `{"op":"reply","id":…,"result":…}` at the end of `store`, by the encoder of this
    /// result's shape (inlined into `OutboundFrame.encode(into:)`, for the same reason).
    @inlinable @inline(__always)
    func encodeReply(_ rid: RequestID, into store: OutputStore) -> OutputRange {
        switch self {
        case .empty: return ReplyResult.encodeEmpty(rid, into: store)
        case .value(let raw?): return raw.withUnsafeBytes { ReplyResult.encodeRaw(rid, $0, into: store) }
        case .relayed(let raw): return raw.withUnsafeBytes { ReplyResult.encodeRaw(rid, $0, into: store) }
        case .posted(let post): return post.encodeReply(rid, into: store)
        default: return encodeRegistration(rid, into: store)
        }
    }

    /// `{}`: a ping's or a monitor's reply.
    @usableFromInline
    static func encodeEmpty(_ rid: RequestID, into store: OutputStore) -> OutputRange {
        @inline(__always) func shape<W: FrameWriter>(_ w: inout W) {
            w.literal("{\"op\":\"reply\",\"id\":")
            w.requestID(rid)
            w.literal(",\"result\":{}}")
        }
        return store.frame(upTo: FrameRoom.of(shape)) { shape(&$0) }
    }

    /// Raw JSON as the result: a slot's value, a handler's result.
    @usableFromInline
    static func encodeRaw(_ rid: RequestID, _ raw: UnsafeRawBufferPointer, into store: OutputStore) -> OutputRange {
        @inline(__always) func shape<W: FrameWriter>(_ w: inout W) {
            w.literal("{\"op\":\"reply\",\"id\":")
            w.requestID(rid)
            w.literal(",\"result\":")
            w.raw(raw)
            w.byte(UInt8(ascii: "}"))
        }
        return store.frame(upTo: FrameRoom.of(shape)) { shape(&$0) }
    }

    /// The results of the requests made once per connection or registration (`hello`,
    /// `subscribe`, `handle`, `put`, the categories, a missing value), and any other.
    @usableFromInline
    func encodeRegistration(_ rid: RequestID, into store: OutputStore) -> OutputRange {
        @inline(__always) func shape<W: FrameWriter>(_ w: inout W) {
            w.literal("{\"op\":\"reply\",\"id\":")
            w.requestID(rid)
            w.literal(",\"result\":")
            write(&w)
            w.byte(UInt8(ascii: "}"))
        }
        return store.frame(upTo: FrameRoom.of(shape)) { shape(&$0) }
    }

    /// The result's JSON.
    func write<W: FrameWriter>(_ w: inout W) {
        switch self {
        case .hello(let server, let client, let maxFrame):
            w.literal("{\"protocol\":")
            w.int(protocolVersion)
            w.literal(",\"server\":")
            w.string(server)
            w.literal(",\"client\":")
            w.taggedID("c", client)
            w.literal(",\"maxFrame\":")
            w.int(Int64(maxFrame))
            w.byte(UInt8(ascii: "}"))
        case .empty:
            w.literal("{}")
        case .subscribed(let observer, let replaced):
            w.literal("{\"observer\":")
            w.taggedID("o", observer)
            w.literal(",\"replaced\":[")
            if let replaced { w.taggedID("o", replaced) }
            w.literal("]}")
        case .observerRemoved(let id):
            w.literal("{\"removed\":[")
            w.taggedID("o", id)
            w.literal("]}")
        case .handled(let handler, let replaced):
            w.literal("{\"handler\":")
            w.taggedID("h", handler)
            w.literal(",\"replaced\":")
            if let replaced { w.taggedID("h", replaced) } else { w.literal("null") }
            w.byte(UInt8(ascii: "}"))
        case .handlerRemoved(let id):
            w.literal("{\"removed\":[")
            w.taggedID("h", id)
            w.literal("]}")
        case .posted(let post):
            post.trace.withUnsafeBufferPointer { trace in
                PostReply.write(
                    event: post.event, outcome: post.outcome, by: post.by, value: post.value, retained: post.retained, trace: trace,
                    &w)
            }
        case .put(let replaced, let delivered):
            if replaced { w.literal("{\"replaced\":true,\"delivered\":") } else { w.literal("{\"replaced\":false,\"delivered\":") }
            if delivered { w.literal("true}") } else { w.literal("false}") }
        case .value(let raw):
            w.optionalRaw(raw)
        case .relayed(let raw):
            raw.withUnsafeBytes { w.raw($0) }
        case .categories(let raw):
            w.literal("{\"categories\":")
            raw.withUnsafeBytes { w.raw($0) }
            w.byte(UInt8(ascii: "}"))
        case .categoryCount(let count):
            w.literal("{\"count\":")
            w.int(Int64(count))
            w.byte(UInt8(ascii: "}"))
        }
    }
}

/// How a whole event ended.
public enum EventOutcome: String, Sendable {
    case completed, stopped, unhandled
}

/// How one hop of a chain ended, as the trace names it. `skipped` is an observer that was
/// not sent the event because its connection had used up its time in this event, or is
/// unresponsive (decision 30 in Protocol/PROTOCOL.md §13).
public enum HopReply: String, Sendable, CaseIterable {
    case next, complete, stop, gone, timeout, invalid, skipped
}

/// One entry of a post's trace: an observer and how its hop ended.
public struct TraceHop: Sendable, Equatable {
    public let observer: Int
    public let reply: HopReply

    public init(observer: Int, reply: HopReply) {
        self.observer = observer
        self.reply = reply
    }
}

/// The poster's answer once its event has ended.
public struct PostReply {
    public var event: Int64
    public var outcome: EventOutcome
    /// The observer that completed or stopped it.
    public var by: Int?
    /// A completion's value, as the observer wrote it.
    public var value: RawJSON?
    /// Whether the payload was kept in the `launch` slot (launch retention).
    public var retained: Bool
    public var trace: [TraceHop]

    public init(event: Int64, outcome: EventOutcome, by: Int?, value: RawJSON?, retained: Bool, trace: [TraceHop]) {
        self.event = event
        self.outcome = outcome
        self.by = by
        self.value = value
        self.retained = retained
        self.trace = trace
    }

    /// The poster's reply, `{"op":"reply","id":…,"result":{"event":…,…}}`.
    @usableFromInline
    func encodeReply(_ rid: RequestID, into store: OutputStore) -> OutputRange {
        trace.withUnsafeBufferPointer { trace in
            PostReply.encodeReply(
                rid, event: event, outcome: outcome, by: by, value: value, retained: retained, trace: trace, into: store)
        }
    }

    /// The same reply made from its parts, as an ended event's record holds them (the
    /// broker's path: no `PostReply` is built, and the trace is lent where it lies).
    public static func encodeReply(
        _ rid: RequestID, event: Int64, outcome: EventOutcome, by: Int?, value: RawJSON?, retained: Bool,
        trace: UnsafeBufferPointer<TraceHop>, into store: OutputStore
    ) -> OutputRange {
        encode(rid, event: event, outcome: outcome, by: by, value: value, retained: retained, trace: trace, into: store).reply
    }

    /// `encodeReply`, and the range of its `result` in `store`: what a keyed post records as
    /// its outcome, read where the reply holds it rather than found in it again.
    public static func encodeReplyAndResult(
        _ rid: RequestID, event: Int64, outcome: EventOutcome, by: Int?, value: RawJSON?, retained: Bool,
        trace: UnsafeBufferPointer<TraceHop>, into store: OutputStore
    ) -> (reply: OutputRange, result: OutputRange) {
        encode(rid, event: event, outcome: outcome, by: by, value: value, retained: retained, trace: trace, into: store)
    }

    /// The reply and its result's range, the result's start noted as the cursor passes it.
    @inline(__always)
    private static func encode(
        _ rid: RequestID, event: Int64, outcome: EventOutcome, by: Int?, value: RawJSON?, retained: Bool,
        trace: UnsafeBufferPointer<TraceHop>, into store: OutputStore
    ) -> (reply: OutputRange, result: OutputRange) {
        @inline(__always) func head<W: FrameWriter>(_ w: inout W) {
            w.literal("{\"op\":\"reply\",\"id\":")
            w.requestID(rid)
            w.literal(",\"result\":")
        }
        @inline(__always) func result<W: FrameWriter>(_ w: inout W) {
            write(event: event, outcome: outcome, by: by, value: value, retained: retained, trace: trace, &w)
        }
        @inline(__always) func shape<W: FrameWriter>(_ w: inout W) {
            head(&w)
            result(&w)
            w.byte(UInt8(ascii: "}"))
        }
        // From the length prefix to the result's first byte.
        var resultAt = 0
        let reply = store.frame(upTo: FrameRoom.of(shape)) { c in
            let start = c.p
            head(&c)
            resultAt = Limits.headerBytes &+ start.distance(to: c.p)
            result(&c)
            c.byte(UInt8(ascii: "}"))
        }
        let result = OutputRange(offset: reply.offset &+ resultAt, count: reply.count &- resultAt &- 1, generation: reply.generation)
        return (reply, result)
    }

    /// The result's JSON. Inlined, so that the cursor stays in a register.
    @inline(__always)
    static func write<W: FrameWriter>(
        event: Int64, outcome: EventOutcome, by: Int?, value: RawJSON?, retained: Bool, trace: UnsafeBufferPointer<TraceHop>,
        _ w: inout W
    ) {
        w.literal("{\"event\":")
        w.int(event)
        switch outcome {
        case .completed: w.literal(",\"outcome\":\"completed\",\"by\":")
        case .stopped: w.literal(",\"outcome\":\"stopped\",\"by\":")
        case .unhandled: w.literal(",\"outcome\":\"unhandled\",\"by\":")
        }
        if let by { w.taggedID("o", by) } else { w.literal("null") }
        w.literal(",\"value\":")
        w.optionalRaw(value)
        // Literals of either length, chosen by branches rather than picked by a condition:
        // each is then a copy of a known length, a few stores instead of a call to memcpy.
        if retained {
            w.literal(",\"retained\":\"launch\",\"trace\":[")
        } else {
            w.literal(",\"retained\":null,\"trace\":[")
        }
        w.trace(trace)
        w.literal("]}")
    }

    /// The room of a trace entry at its longest (`FrameRoom.trace`): with the comma before
    /// it, the longest observer number and the longest reply, `complete`
    /// (`OutboundFrameTests` holds it to every reply's). Made from constants only, so that
    /// the compiler counts it.
    @inline(__always)
    static var traceEntryRoom: Int {
        FrameRoom.of { $0.traceEntry(TraceHop(observer: .max, reply: .complete), first: false) }
    }
}

extension FrameWriter {
    /// One entry of a post's trace, `{"observer":"o…","reply":…}`, after a comma unless it
    /// is the first.
    @inline(__always)
    mutating func traceEntry(_ hop: TraceHop, first: Bool) {
        if !first { byte(UInt8(ascii: ",")) }
        literal("{\"observer\":")
        taggedID("o", hop.observer)
        switch hop.reply {
        case .next: literal(",\"reply\":\"next\"}")
        case .complete: literal(",\"reply\":\"complete\"}")
        case .stop: literal(",\"reply\":\"stop\"}")
        case .gone: literal(",\"reply\":\"gone\"}")
        case .timeout: literal(",\"reply\":\"timeout\"}")
        case .invalid: literal(",\"reply\":\"invalid\"}")
        case .skipped: literal(",\"reply\":\"skipped\"}")
        }
    }
}

extension FrameCursor {
    /// A post's trace entries, one after another.
    @inline(__always)
    mutating func trace(_ trace: UnsafeBufferPointer<TraceHop>) {
        for (i, hop) in trace.enumerated() { traceEntry(hop, first: i == 0) }
    }
}

extension FrameRoom {
    /// A post's trace: its entries at the longest (`PostReply.traceEntryRoom`), counted
    /// without a walk over them.
    @inline(__always)
    mutating func trace(_ trace: UnsafeBufferPointer<TraceHop>) {
        reserve(trace.count &* PostReply.traceEntryRoom)
    }
}

extension Array where Element == UInt8 {
    /// The raw JSON `null`: what an empty slot or a post without payload hands over as a value.
    public static var null: RawJSON { [0x6E, 0x75, 0x6C, 0x6C] }
}

extension FrameBuilder {
    /// A broker-assigned id as the wire writes it (`FrameCursor.taggedID`).
    mutating func taggedID(_ tag: Unicode.Scalar, _ n: Int) {
        reserving(FrameRoom.of { $0.taggedID(tag, n) }) { $0.taggedID(tag, n) }
    }
}

extension FrameWriter {
    /// A name as a JSON string: in place, its
    /// bytes hold no escape and nothing that needs one (the frame it came in was valid
    /// JSON), so they are copied between quotes as they are, which is what `string` writes
    /// for the same text.
    @inline(__always)
    mutating func name(_ name: JSONName) {
        switch name.storage {
        case .inPlace(let utf8):
            byte(UInt8(ascii: "\""))
            raw(utf8)
            byte(UInt8(ascii: "\""))
        case .owned(let text):
            string(text)
        }
    }

    /// A broker-assigned id as the wire writes it: a JSON string of a one-letter tag and a
    /// number (`"c7"`, `"o12"`, `"h3"`).
    @inline(__always)
    mutating func taggedID(_ tag: Unicode.Scalar, _ n: Int) {
        byte(UInt8(ascii: "\""))
        byte(UInt8(ascii: tag))
        int(Int64(n))
        byte(UInt8(ascii: "\""))
    }

    /// Raw JSON, or `null` for nil.
    @inline(__always)
    mutating func optionalRaw(_ value: [UInt8]?) {
        if let value { value.withUnsafeBytes { raw($0) } } else { literal("null") }
    }
}

/// The first outcome of a keyed request, as its reply carried it: the `result` value, or
/// the `error` object, in bytes. A repeat is answered with exactly these bytes (§3.8).
public enum OnceOutcome: Sendable, Equatable {
    case result(RawJSON)
    case error(RawJSON)

    /// The error object `{"code":…,"message":…}` of a broker error, as a reply writes it.
    public static func error(_ code: ErrorCode, message: String) -> OnceOutcome {
        var f = FrameBuilder(capacity: 64 &+ message.utf8.count, lengthPrefix: false)
        f.literal("{\"code\":")
        f.string(code.rawValue)
        f.literal(",\"message\":")
        f.string(message)
        f.byte(UInt8(ascii: "}"))
        return .error(f.finish())
    }

    /// Whether it is an error, and its bytes.
    @inlinable
    public func withBytes<R>(_ body: (Bool, UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch self {
        case .result(let raw): return try raw.withUnsafeBytes { try body(false, $0) }
        case .error(let raw): return try raw.withUnsafeBytes { try body(true, $0) }
        }
    }

    /// How many bytes it holds.
    public var count: Int {
        switch self {
        case .result(let raw), .error(let raw): raw.count
        }
    }
}

extension ReplyResult {
    /// The result's JSON alone, as the reply to a request writes it: what a keyed request
    /// remembers as its outcome.
    public var resultBytes: RawJSON {
        switch self {
        case .value(let raw): return raw ?? .null
        case .relayed(let raw): return raw.bytes
        case .posted(let post):
            return post.trace.withUnsafeBufferPointer { trace in
                PostReply.resultBytes(
                    event: post.event, outcome: post.outcome, by: post.by, value: post.value, retained: post.retained, trace: trace)
            }
        default:
            let room = FrameRoom.of { write(&$0) }
            var f = FrameBuilder(capacity: room, lengthPrefix: false)
            f.reserving(room) { write(&$0) }
            return f.finish()
        }
    }
}

extension PostReply {
    /// A post's result JSON alone, made from its parts as an ended event's record holds them.
    public static func resultBytes(
        event: Int64, outcome: EventOutcome, by: Int?, value: RawJSON?, retained: Bool, trace: UnsafeBufferPointer<TraceHop>
    ) -> RawJSON {
        @inline(__always) func shape<W: FrameWriter>(_ w: inout W) {
            write(event: event, outcome: outcome, by: by, value: value, retained: retained, trace: trace, &w)
        }
        let room = FrameRoom.of(shape)
        var f = FrameBuilder(capacity: room, lengthPrefix: false)
        f.reserving(room) { shape(&$0) }
        return f.finish()
    }
}
