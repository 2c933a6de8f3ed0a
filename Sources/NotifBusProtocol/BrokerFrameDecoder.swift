// Reads the frames the broker writes — replies, error frames, `event`, `call`, `evicted`,
// `seen` — from a byte stream into typed values, for clients. User data (results, payloads,
// arguments, details, mirrored frames) stays as validated raw bytes of any depth; no tree is
// built here. It does no I/O and holds no state beyond the bytes not yet framed.

/// A frame the broker sent, decoded.
public enum BrokerFrame: Sendable, Equatable {
    /// The answer to request `id`, or an error frame (`"id": null`, always with an error).
    case reply(Reply)
    /// One hop of a chain for an observer of this connection.
    case event(Event)
    /// A method call for a handler of this connection.
    case call(Call)
    /// An observer or handler of this connection was replaced.
    case evicted(Evicted)
    /// A frame of another connection, mirrored to a monitor.
    case seen(Seen)

    /// A request id as the broker echoes it.
    public enum ID: Sendable, Hashable {
        /// An integer id, as this package's clients send.
        case integer(Int64)
        /// The id's decoded text.
        case string(String)
    }

    /// A `reply` frame.
    public struct Reply: Sendable, Equatable {
        /// The request answered; nil for an error frame, which answers none.
        public let id: ID?
        /// The `result`, or the `error`.
        public let outcome: Outcome
        /// `"repeat": true`: the stored outcome of an earlier request with the same `once` key.
        public let isRepeat: Bool

        /// A reply to `id` (nil: an error frame).
        public init(id: ID?, outcome: Outcome, isRepeat: Bool = false) {
            self.id = id
            self.outcome = outcome
            self.isRepeat = isRepeat
        }
    }

    /// What a reply carries: exactly one of `result` and `error`.
    public enum Outcome: Sendable, Equatable {
        /// The `result` member's bytes (`null` included).
        case result(RawJSON)
        /// The `error` member.
        case error(Failure)
    }

    /// The `error` member of a reply.
    public struct Failure: Sendable, Equatable {
        /// The wire code; a handler's own codes pass through.
        public let code: String
        /// What went wrong, for a person.
        public let message: String
        /// nil when `details` was absent; the bytes `null` when it was null.
        public let details: RawJSON?

        /// An error with its members.
        public init(code: String, message: String, details: RawJSON?) {
            self.code = code
            self.message = message
            self.details = details
        }
    }

    /// An `event` frame.
    public struct Event: Sendable, Equatable {
        /// The broker's event id, to answer with.
        public let event: Int64
        /// The observer this hop is for (`"o4"`).
        public let observer: String
        /// The event's name, as posted.
        public let name: String
        /// The poster's payload, byte for byte (`null` when it sent none).
        public let payload: RawJSON

        /// An event with its members.
        public init(event: Int64, observer: String, name: String, payload: RawJSON) {
            self.event = event
            self.observer = observer
            self.name = name
            self.payload = payload
        }
    }

    /// A `call` frame.
    public struct Call: Sendable, Equatable {
        /// The broker's call id, to return with.
        public let call: Int64
        /// The handler called (`"h2"`).
        public let handler: String
        /// The channel invoked on.
        public let channel: String
        /// The method invoked.
        public let method: String
        /// The invoker's arguments, byte for byte (`null` when it sent none).
        public let arguments: RawJSON
        /// The invoking client (`"c9"`).
        public let from: String

        /// A call with its members.
        public init(call: Int64, handler: String, channel: String, method: String, arguments: RawJSON, from: String) {
            self.call = call
            self.handler = handler
            self.channel = channel
            self.method = method
            self.arguments = arguments
            self.from = from
        }
    }

    /// An `evicted` frame: whose registration went, and to whom.
    public enum Evicted: Sendable, Equatable {
        /// Observer (id) lost its key to observer `by`.
        case observer(String, by: String)
        /// Handler (id) was replaced by handler `by`.
        case handler(String, by: String)
    }

    /// A `seen` frame.
    public struct Seen: Sendable, Equatable {
        /// Whether the broker read the frame (`in`) or wrote it (`out`).
        public enum Direction: String, Sendable {
            /// The broker read it from the other connection.
            case inbound = "in"
            /// The broker wrote it to the other connection.
            case outbound = "out"
        }

        /// Which way the frame went.
        public let direction: Direction
        /// The other connection (`"c7"`).
        public let client: String
        /// The mirrored frame's bytes: always a JSON object.
        public let frame: RawJSON

        /// A mirrored frame with its members.
        public init(direction: Direction, client: String, frame: RawJSON) {
            self.direction = direction
            self.client = client
            self.frame = frame
        }
    }
}

/// Why bytes from the broker are not a frame of protocol v1. A client that gets one cannot
/// trust the stream any more and closes the connection (PROTOCOL.md §13).
public enum BrokerFrameError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A length prefix of 0: the contract's frames are 1 byte or more.
    case zeroLength
    /// The body is not UTF-8 JSON.
    case badJSON(JSONError)
    /// The body is JSON but not an object.
    case notAnObject
    /// No `op` member, or one that is not a string.
    case missingOp
    /// An `op` the broker never writes.
    case unknownOp(String)
    /// A member the contract does not list for this op.
    case unknownMember(op: String, member: String)
    /// A member given twice.
    case duplicateMember(op: String, member: String)
    /// A required member is absent.
    case missingMember(op: String, member: String)
    /// A member of the wrong type or out of range; `expected` says what it must be.
    case invalidMember(op: String, member: String, expected: String)
    /// Members that exclude each other, or of which one is required, are both or neither there.
    case conflictingMembers(op: String, members: String)

    /// What was wrong, to end "the broker sent ..." with.
    public var description: String {
        switch self {
        case .zeroLength: return "a frame of length 0"
        case .badJSON(let e): return "a frame that is not JSON (\(e))"
        case .notAnObject: return "a frame that is not a JSON object"
        case .missingOp: return "a frame without a string 'op'"
        case .unknownOp(let op): return "a frame with unknown op '\(op)'"
        case .unknownMember(let op, let m): return "a '\(op)' frame with unknown member '\(m)'"
        case .duplicateMember(let op, let m): return "a '\(op)' frame with member '\(m)' twice"
        case .missingMember(let op, let m): return "a '\(op)' frame without '\(m)'"
        case .invalidMember(let op, let m, let expected): return "a '\(op)' frame whose '\(m)' is not \(expected)"
        case .conflictingMembers(let op, let ms): return "a '\(op)' frame with \(ms)"
        }
    }
}

/// Splits the broker's byte stream into frames and decodes each. The broker's frames may
/// be longer than its own `maxFrame` (a `seen` wraps another frame), so no upper limit is
/// applied; the only impossible length is 0.
public struct BrokerFrameDecoder: Sendable {
    private var framer = FrameDecoder()

    /// A decoder at the start of a stream.
    public init() {}

    /// Bytes received but not yet returned as frames.
    public var pendingByteCount: Int { framer.pendingByteCount }

    /// Takes bytes read from the broker.
    public mutating func append(_ bytes: some Sequence<UInt8>) { framer.append(bytes) }

    /// Takes bytes read from the broker, from a borrowed buffer.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) { framer.append(bytes) }

    /// The next whole frame, or nil when more bytes are needed. After an error the stream
    /// is out of step (or the peer is not a v1 broker): stop reading it.
    public mutating func next() throws(BrokerFrameError) -> BrokerFrame? {
        let body: [UInt8]?
        do {
            body = try framer.next()
        } catch {
            throw .zeroLength
        }
        guard let body else { return nil }
        return try BrokerFrameDecoder.decode(body)
    }

    /// Decodes one frame body.
    public static func decode(_ body: [UInt8]) throws(BrokerFrameError) -> BrokerFrame {
        let result: Result<BrokerFrame, BrokerFrameError> = body.withUnsafeBytes { buffer in
            do throws(BrokerFrameError) { return .success(try decode(buffer)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Decodes one frame body over borrowed bytes.
    public static func decode(_ body: UnsafeRawBufferPointer) throws(BrokerFrameError) -> BrokerFrame {
        var scanner = JSONScanner(body)
        let fields: [JSONField]
        do {
            fields = try scanner.scanTopLevelObject()
        } catch {
            // scanTopLevelObject reports a well-formed non-object at offset 0 with this reason.
            if error.offset == 0 && JSONScanner.isValidDocument(Array(body)) { throw .notAnObject }
            throw .badJSON(error)
        }
        let opFields = fields.filter { scanner.keyIs($0, "op") }
        guard let opField = opFields.first, let op = scanner.string(of: opField) else { throw .missingOp }
        switch op {
        case Op.reply: return .reply(try reply(BrokerFrameMembers(scanner, fields, op: op, names: replyMembers)))
        case Op.event: return .event(try event(BrokerFrameMembers(scanner, fields, op: op, names: eventMembers)))
        case Op.call: return .call(try call(BrokerFrameMembers(scanner, fields, op: op, names: callMembers)))
        case Op.evicted: return .evicted(try evicted(BrokerFrameMembers(scanner, fields, op: op, names: evictedMembers)))
        case Op.seen: return .seen(try seen(BrokerFrameMembers(scanner, fields, op: op, names: seenMembers)))
        default: throw .unknownOp(op)
        }
    }

    // The members each op carries (§3: exactly these), `op` first.
    static let replyMembers: [StaticString] = ["op", "id", "result", "error", "repeat"]
    static let errorMembers: [StaticString] = ["code", "message", "details"]
    static let eventMembers: [StaticString] = ["op", "event", "observer", "name", "payload"]
    static let callMembers: [StaticString] = ["op", "call", "handler", "channel", "method", "arguments", "from"]
    static let evictedMembers: [StaticString] = ["op", "observer", "handler", "by"]
    static let seenMembers: [StaticString] = ["op", "dir", "client", "frame"]

    static func reply(_ m: BrokerFrameMembers) throws(BrokerFrameError) -> BrokerFrame.Reply {
        let id: BrokerFrame.ID?
        switch m.field(1)?.kind {
        case .null?: id = nil
        case .string?: id = .string(try m.string(1))
        case .number?:
            guard let i = m.scanner.integer(of: m.field(1)!), i >= 0, i < Limits.maxIntegerID else {
                throw .invalidMember(op: m.op, member: "id", expected: "an integer from 0 to 2^53-1, a string or null")
            }
            id = .integer(i)
        case nil: throw .missingMember(op: m.op, member: "id")
        default: throw .invalidMember(op: m.op, member: "id", expected: "an integer from 0 to 2^53-1, a string or null")
        }
        var isRepeat = false
        if let field = m.field(4) {
            guard field.kind == .bool, id != nil else {
                throw .invalidMember(op: m.op, member: "repeat", expected: "true or false, in a reply to a request")
            }
            isRepeat = m.scanner.bytes[field.start] == UInt8(ascii: "t")
        }
        switch (m.field(2), m.field(3)) {
        case (let result?, nil):
            guard id != nil else { throw .conflictingMembers(op: m.op, members: "'id' null and a 'result'") }
            return BrokerFrame.Reply(id: id, outcome: .result(m.scanner.raw(of: result)), isRepeat: isRepeat)
        case (nil, let error?):
            guard let members = m.scanner.members(of: error) else {
                throw .invalidMember(op: m.op, member: "error", expected: "an object")
            }
            let e = try BrokerFrameMembers(m.scanner, members, op: "reply error", names: errorMembers)
            let failure = BrokerFrame.Failure(
                code: try e.string(0), message: try e.string(1),
                details: e.field(2).map { e.scanner.raw(of: $0) })
            return BrokerFrame.Reply(id: id, outcome: .error(failure), isRepeat: isRepeat)
        case (nil, nil): throw .conflictingMembers(op: m.op, members: "neither 'result' nor 'error'")
        case (_?, _?): throw .conflictingMembers(op: m.op, members: "both 'result' and 'error'")
        }
    }

    static func event(_ m: BrokerFrameMembers) throws(BrokerFrameError) -> BrokerFrame.Event {
        BrokerFrame.Event(event: try m.integer(1), observer: try m.string(2), name: try m.string(3), payload: try m.raw(4))
    }

    static func call(_ m: BrokerFrameMembers) throws(BrokerFrameError) -> BrokerFrame.Call {
        BrokerFrame.Call(
            call: try m.integer(1), handler: try m.string(2), channel: try m.string(3), method: try m.string(4),
            arguments: try m.raw(5), from: try m.string(6))
    }

    static func evicted(_ m: BrokerFrameMembers) throws(BrokerFrameError) -> BrokerFrame.Evicted {
        let by = try m.string(3)
        switch (m.field(1), m.field(2)) {
        case (_?, nil): return .observer(try m.string(1), by: by)
        case (nil, _?): return .handler(try m.string(2), by: by)
        case (nil, nil): throw .conflictingMembers(op: m.op, members: "neither 'observer' nor 'handler'")
        case (_?, _?): throw .conflictingMembers(op: m.op, members: "both 'observer' and 'handler'")
        }
    }

    static func seen(_ m: BrokerFrameMembers) throws(BrokerFrameError) -> BrokerFrame.Seen {
        guard let direction = BrokerFrame.Seen.Direction(rawValue: try m.string(1)) else {
            throw .invalidMember(op: m.op, member: "dir", expected: "\"in\" or \"out\"")
        }
        let client = try m.string(2)
        guard let frame = m.field(3) else { throw .missingMember(op: m.op, member: "frame") }
        guard frame.kind == .object else { throw .invalidMember(op: m.op, member: "frame", expected: "an object") }
        return BrokerFrame.Seen(direction: direction, client: client, frame: m.scanner.raw(of: frame))
    }
}

/// The members of one object matched against the names its op allows: unknown and repeated
/// members are refused as they are met; `field(i)` is the member named `names[i]`, if given.
struct BrokerFrameMembers {
    let scanner: JSONScanner
    let op: String
    let names: [StaticString]
    private var found: [JSONField?]

    init(_ scanner: JSONScanner, _ fields: [JSONField], op: String, names: [StaticString]) throws(BrokerFrameError) {
        self.scanner = scanner
        self.op = op
        self.names = names
        found = Array(repeating: nil, count: names.count)
        for field in fields {
            guard let index = names.firstIndex(where: { scanner.keyIs(field, $0) }) else {
                throw .unknownMember(op: op, member: scanner.key(of: field))
            }
            guard found[index] == nil else { throw .duplicateMember(op: op, member: names[index].description) }
            found[index] = field
        }
    }

    func field(_ index: Int) -> JSONField? { found[index] }

    func string(_ index: Int) throws(BrokerFrameError) -> String {
        guard let field = found[index] else { throw .missingMember(op: op, member: names[index].description) }
        guard let text = scanner.string(of: field) else {
            throw .invalidMember(op: op, member: names[index].description, expected: "a string")
        }
        return text
    }

    func integer(_ index: Int) throws(BrokerFrameError) -> Int64 {
        guard let field = found[index] else { throw .missingMember(op: op, member: names[index].description) }
        guard let value = scanner.integer(of: field) else {
            throw .invalidMember(op: op, member: names[index].description, expected: "an integer")
        }
        return value
    }

    func raw(_ index: Int) throws(BrokerFrameError) -> RawJSON {
        guard let field = found[index] else { throw .missingMember(op: op, member: names[index].description) }
        return scanner.raw(of: field)
    }
}
