// Every frame the broker writes, as typed values, and their one encoder: replies and their
// results, error replies and frames, `event`, `call`, `evicted` and `seen`. User data
// (payloads, arguments, values, handler results and errors) is copied in byte for byte as
// raw JSON and never re-encoded; the encoder writes straight into the broker's output store
// (or, for tests and tools, into an array of its own).

/// A frame the broker sends to one connection.
public enum OutboundFrame {
    /// `{"op":"reply","id":…,"result":…}`.
    case reply(RequestID, ReplyResult)
    /// An error reply (`id` given) or error frame (`id` nil).
    case error(RequestID?, ErrorCode, message: String)
    /// `superseded`, whose `details.by` names the registration that holds the key or route.
    case superseded(RequestID, message: String, by: String)
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

    /// The length-prefixed frame, as one array of its own (tests, tools).
    public func encoded() -> [UInt8] {
        var f = FrameBuilder()
        write(into: &f)
        return f.finish()
    }

    /// The length-prefixed frame, encoded at the end of `store`.
    @inline(__always)
    public func encode(into store: OutputStore) -> OutputRange {
        var f = FrameBuilder(appendingTo: store)
        write(into: &f)
        return f.finish(into: store)
    }

    /// Writes the frame's JSON into `f`, which reserved its length prefix.
    func write(into f: inout FrameBuilder) {
        switch self {
        case .reply(let rid, let result):
            f.literal("{\"op\":\"reply\",\"id\":")
            f.requestID(rid)
            f.literal(",\"result\":")
            result.write(into: &f)
            f.byte(UInt8(ascii: "}"))
        case .error(let rid, let code, let message):
            OutboundFrame.errorHead(&f, rid, code.rawValue, message)
            f.literal("}}")
        case .superseded(let rid, let message, let holder):
            OutboundFrame.errorHead(&f, rid, ErrorCode.superseded.rawValue, message)
            f.literal(",\"details\":{\"by\":")
            f.string(holder)
            f.literal("}}}")
        case .handlerError(let rid, let error):
            f.literal("{\"op\":\"reply\",\"id\":")
            f.requestID(rid)
            f.literal(",\"error\":")
            error.withUnsafeBytes { f.raw($0) }
            f.byte(UInt8(ascii: "}"))
        case .event(let event, let observer, let name, let payload):
            f.literal("{\"op\":\"event\",\"event\":")
            f.int(event)
            f.literal(",\"observer\":")
            f.taggedID("o", observer)
            f.literal(",\"name\":")
            f.string(name)
            f.literal(",\"payload\":")
            f.optionalRaw(payload)
            f.byte(UInt8(ascii: "}"))
        case .call(let call, let handler, let channel, let method, let arguments, let from):
            f.literal("{\"op\":\"call\",\"call\":")
            f.int(call)
            f.literal(",\"handler\":")
            f.taggedID("h", handler)
            f.literal(",\"channel\":")
            f.name(channel)
            f.literal(",\"method\":")
            f.name(method)
            f.literal(",\"arguments\":")
            if let arguments { arguments.withUnsafeBytes { f.raw($0) } } else { f.literal("null") }
            f.literal(",\"from\":")
            f.taggedID("c", from)
            f.byte(UInt8(ascii: "}"))
        case .observerEvicted(let old, let by):
            OutboundFrame.evicted(&f, "{\"op\":\"evicted\",\"observer\":", tag: "o", old, by: by)
        case .handlerEvicted(let old, let by):
            OutboundFrame.evicted(&f, "{\"op\":\"evicted\",\"handler\":", tag: "h", old, by: by)
        }
    }

    /// `evicted`: `head` opens the frame up to the member naming the registration that
    /// went (`observer` or `handler`), whose ids, and its successor's, carry `tag`.
    static func evicted(_ f: inout FrameBuilder, _ head: StaticString, tag: Unicode.Scalar, _ old: Int, by: Int) {
        f.literal(head)
        f.taggedID(tag, old)
        f.literal(",\"by\":")
        f.taggedID(tag, by)
        f.byte(UInt8(ascii: "}"))
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

    /// `{"op":"reply","id":…,"error":{"code":…,"message":…` — the caller closes it.
    static func errorHead(_ f: inout FrameBuilder, _ rid: RequestID?, _ code: String, _ message: String) {
        f.literal("{\"op\":\"reply\",\"id\":")
        f.requestID(rid)
        f.literal(",\"error\":{\"code\":")
        f.string(code)
        f.literal(",\"message\":")
        f.string(message)
    }
}

/// The `result` of a successful reply, one case per shape of §5.
public enum ReplyResult {
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

    func write(into f: inout FrameBuilder) {
        switch self {
        case .hello(let server, let client, let maxFrame):
            f.literal("{\"protocol\":")
            f.int(protocolVersion)
            f.literal(",\"server\":")
            f.string(server)
            f.literal(",\"client\":")
            f.taggedID("c", client)
            f.literal(",\"maxFrame\":")
            f.int(Int64(maxFrame))
            f.byte(UInt8(ascii: "}"))
        case .empty:
            f.literal("{}")
        case .subscribed(let observer, let replaced):
            f.literal("{\"observer\":")
            f.taggedID("o", observer)
            f.literal(",\"replaced\":[")
            if let replaced { f.taggedID("o", replaced) }
            f.literal("]}")
        case .observerRemoved(let id):
            f.literal("{\"removed\":[")
            f.taggedID("o", id)
            f.literal("]}")
        case .handled(let handler, let replaced):
            f.literal("{\"handler\":")
            f.taggedID("h", handler)
            f.literal(",\"replaced\":")
            if let replaced { f.taggedID("h", replaced) } else { f.literal("null") }
            f.byte(UInt8(ascii: "}"))
        case .handlerRemoved(let id):
            f.literal("{\"removed\":[")
            f.taggedID("h", id)
            f.literal("]}")
        case .posted(let post):
            post.write(into: &f)
        case .put(let replaced, let delivered):
            f.literal(replaced ? "{\"replaced\":true,\"delivered\":" : "{\"replaced\":false,\"delivered\":")
            f.literal(delivered ? "true}" : "false}")
        case .value(let raw):
            f.optionalRaw(raw)
        case .relayed(let raw):
            raw.withUnsafeBytes { f.raw($0) }
        case .categories(let raw):
            f.literal("{\"categories\":")
            f.raw(raw)
            f.byte(UInt8(ascii: "}"))
        case .categoryCount(let count):
            f.literal("{\"count\":")
            f.int(Int64(count))
            f.byte(UInt8(ascii: "}"))
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
public enum HopReply: String, Sendable {
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

    func write(into f: inout FrameBuilder) {
        f.literal("{\"event\":")
        f.int(event)
        switch outcome {
        case .completed: f.literal(",\"outcome\":\"completed\",\"by\":")
        case .stopped: f.literal(",\"outcome\":\"stopped\",\"by\":")
        case .unhandled: f.literal(",\"outcome\":\"unhandled\",\"by\":")
        }
        if let by { f.taggedID("o", by) } else { f.literal("null") }
        f.literal(",\"value\":")
        f.optionalRaw(value)
        f.literal(retained ? ",\"retained\":\"launch\",\"trace\":[" : ",\"retained\":null,\"trace\":[")
        for (i, hop) in trace.enumerated() {
            f.literal(i == 0 ? "{\"observer\":" : ",{\"observer\":")
            f.taggedID("o", hop.observer)
            switch hop.reply {
            case .next: f.literal(",\"reply\":\"next\"}")
            case .complete: f.literal(",\"reply\":\"complete\"}")
            case .stop: f.literal(",\"reply\":\"stop\"}")
            case .gone: f.literal(",\"reply\":\"gone\"}")
            case .timeout: f.literal(",\"reply\":\"timeout\"}")
            case .invalid: f.literal(",\"reply\":\"invalid\"}")
            case .skipped: f.literal(",\"reply\":\"skipped\"}")
            }
        }
        f.literal("]}")
    }
}

extension Array where Element == UInt8 {
    /// The raw JSON `null`: what an empty slot or a post without payload hands over as a value.
    public static var null: RawJSON { [0x6E, 0x75, 0x6C, 0x6C] }
}

extension FrameBuilder {
    /// A name as a JSON string: in place, its bytes hold no escape and nothing that needs
    /// one (the frame it came in was valid JSON), so they are copied between quotes as they
    /// are, which is what `string` writes for the same text.
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
}
