// The decoder's direct path: the frames of the per-event path (ping, invoke, post, return,
// next, stop, complete), their own members written compactly, decoded in one scan straight
// into their typed message, with no table of fields. A frame in the clients' order is
// matched key by key against literals first (`decodeInOrder`); any other order goes through
// a loop over its members. It decodes only what it can decode whole and declines everything
// else (another op, whitespace between members, a string id, escapes in a key, an op or a
// name, an unknown, repeated or disallowed field, a profile event, an error return, a JSON
// error): the full decoder then takes the frame from its start and words the outcome.
// Wherever it decodes, both give the same result.

/// A frame the direct path decoded: the ops of the per-event path with their fields, user
/// data and names as views of the frame body (valid only while it is), ids and numbers read.
/// Nothing in it is reference counted, so it is made and taken apart without retains or
/// value witnesses; the broker acts on it without a `DecodeResult`.
package enum DirectFrame {
    case ping(id: Int64)
    /// `arguments` nil: absent or null.
    case invoke(id: Int64, channel: UnsafeRawBufferPointer, method: UnsafeRawBufferPointer, arguments: UnsafeRawBufferPointer?)
    /// A post of a name that is not one of the notification profile's. `payload` nil: absent or
    /// null. `once`: the idempotency key's text (written without escapes), empty when there is
    /// none (a key has at least one byte); not optional, so that this case is no larger than
    /// `invoke` (the optional last) and the frame no larger than before keys.
    case post(id: Int64, name: UnsafeRawBufferPointer, once: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer?)
    case callReturn(call: Int64, result: UnsafeRawBufferPointer)
    case next(event: Int64)
    case stop(event: Int64)
    /// `value` nil: absent or null.
    case complete(event: Int64, value: UnsafeRawBufferPointer?)

    /// The same outcome as the full decoder gives, its user data in place. It depends on
    /// nothing as far as the compiler knows: `MessageDecoder.decodeDirect` ties it to the body.
    package var decodeResult: DecodeResult {
        @_lifetime(immortal) get {
            switch self {
            case .ping(let id): .decoded(.request(id: .integer(id), .ping), isHello: false)
            case .invoke(let id, let channel, let method, let arguments):
                .decoded(
                    .request(
                        id: .integer(id),
                        .invoke(
                            channel: JSONName(unboundInPlace: channel), method: JSONName(unboundInPlace: method),
                            arguments: DirectFrame.bytes(arguments))),
                    isHello: false)
            case .post(let id, let name, let once, let payload):
                .decoded(.request(id: .integer(id), DirectFrame.post(name: name, once: once, payload: payload)), isHello: false)
            case .callReturn(let call, let result):
                .decoded(.callReturn(CallReturn(call: call, body: .result(JSONBytes(unboundInPlace: result)))), isHello: false)
            case .next(let event): .decoded(.answer(.next(event: event)), isHello: false)
            case .stop(let event): .decoded(.answer(.stop(event: event)), isHello: false)
            case .complete(let event, let value): .decoded(.answer(.complete(event: event, value: value.map { RawJSON($0) })), isHello: false)
            }
        }
    }

    /// Optional bytes in place, depending on nothing (`decodeResult`).
    @_lifetime(immortal)
    static func bytes(_ bytes: UnsafeRawBufferPointer?) -> JSONBytes? {
        guard let bytes else { return nil }
        return JSONBytes(unboundInPlace: bytes)
    }
}

/// The keys the direct path reads, packed as it reads them: the key's bytes and its closing
/// quote, the first byte lowest (`PackedName`'s order), zeros above. `arguments` is nine
/// bytes, too long for one word: `argument` is its first eight, without the quote.
/// `NameTableTests` holds each to the packing of its text.
enum DirectKey {
    static let op: UInt64 = 0x0022_706f
    static let id: UInt64 = 0x0022_6469
    static let channel: UInt64 = 0x226c_656e_6e61_6863
    static let method: UInt64 = 0x0022_646f_6874_656d
    static let name: UInt64 = 0x0022_656d_616e
    static let payload: UInt64 = 0x2264_616f_6c79_6170
    static let call: UInt64 = 0x0022_6c6c_6163
    static let result: UInt64 = 0x0022_746c_7573_6572
    static let event: UInt64 = 0x2274_6e65_7665
    static let value: UInt64 = 0x2265_756c_6176
    static let once: UInt64 = 0x0022_6563_6e6f
    static let argument: UInt64 = 0x746e_656d_7567_7261
}

/// A value's bytes in the frame, and whether it is the literal `null`.
private struct DirectSpan {
    var start = 0
    var end = 0

    func isNull(_ s: JSONScanner) -> Bool { s.base[start] == UInt8(ascii: "n") }
}

extension MessageDecoder {
    /// The outcome of `body` when the direct path can decode it whole; nil when the full
    /// decoder must judge it. Never a rejection: every refusal is the full decoder's to word.
    @inline(__always) @_lifetime(borrow body)
    package static func decodeDirect(_ body: UnsafeRawBufferPointer) -> DecodeResult? {
        _overrideLifetime(decodeDirectUnbound(body), borrowing: body)
    }

    @inline(__always) @_lifetime(immortal)
    static func decodeDirectUnbound(_ body: UnsafeRawBufferPointer) -> DecodeResult? {
        guard let frame = DirectFrame(decoding: body) else { return nil }
        return frame.decodeResult
    }
}

extension DirectFrame {
    /// `body` decoded by the direct path, or nil when the full decoder must judge it.
    package init?(decoding body: UnsafeRawBufferPointer) {
        self = .ping(id: 0)
        guard decode(body) else { return nil }
    }

    /// Decodes `body` by the direct path into `self` and returns true, or returns false
    /// (`self` unspecified) when the full decoder must judge it. A mutating method, so that
    /// the frame is written where the caller keeps it: a static function or an initializer
    /// is compiled as a copy without its unused metatype, called through a thunk that copies
    /// the result once more.
    package mutating func decode(_ body: UnsafeRawBufferPointer) -> Bool {
        let s = JSONScanner(body)
        let count = s.count
        let base = s.base
        var present: FieldSet = []
        var op: OpName? = nil
        var id: Int64 = 0
        var number: Int64 = 0  // `call` or `event`
        var first = DirectSpan()  // channel or name
        var second = DirectSpan()  // method, or a post's idempotency key
        var data = DirectSpan()  // arguments, payload, result or value
        // Compact JSON, as the clients write it: whitespace between the frame's own members is
        // the full decoder's (user data may hold any).
        guard count > 0, base[0] == UInt8(ascii: "{") else { return false }
        if decodeInOrder(s) { return true }
        var p = 1
        while true {
            guard p < count, base[p] == UInt8(ascii: "\"") else { return false }
            // The key, packed from the word after its opening quote up to and with the first
            // quote: every name read here but `arguments` ends within it. The quote is packed
            // too, so that a key with NUL bytes before it packs to no name read here; so does a
            // key with an escape, another control byte or a byte above ASCII. Near the end of
            // the buffer, byte by byte.
            let keyStart = p &+ 1
            var key: UInt64
            if keyStart &+ 8 <= count, case let w = s.word(at: keyStart), case let quotes = JSONScanner.quotes(w) {
                if quotes != 0 {
                    // The bits up to the first quote's bit 7: its bytes and the quote's.
                    key = w & (quotes ^ (quotes &- 1))
                    p = keyStart &+ (quotes.trailingZeroBitCount &>> 3) &+ 1
                } else {
                    // Nine bytes: "argument", then "s" and the closing quote.
                    guard w == DirectKey.argument, keyStart &+ 10 <= count, base[keyStart &+ 8] == UInt8(ascii: "s"),
                        base[keyStart &+ 9] == UInt8(ascii: "\"")
                    else { return false }
                    key = ~0
                    p = keyStart &+ 10
                }
            } else {
                guard let (end, escaped) = try? s.stringEnd(p), !escaped else { return false }
                let packed = PackedName(base + keyStart, end &- keyStart &- 1, limit: base + count)
                // Nine bytes: "argument" and "s", which no key of at most eight bytes packs to
                // (their bytes are valid UTF-8, never 0xFF).
                let n = end &- keyStart &- 1
                if packed.high == 0x73 && packed.low == DirectKey.argument {
                    key = ~0
                } else {
                    guard n < 8 else { return false }
                    key = packed.low | UInt64(UInt8(ascii: "\"")) << UInt64(n &* 8)
                }
                p = end
            }
            // The packings of the known names with their closing quote (`DirectKey`), constants
            // so that this switch stays a few compares.
            let bit: FieldSet
            switch key {
            case ~0: bit = .arguments
            case DirectKey.op: bit = .op
            case DirectKey.id: bit = .id
            case DirectKey.channel: bit = .channel
            case DirectKey.method: bit = .method
            case DirectKey.name: bit = .name
            case DirectKey.payload: bit = .payload
            case DirectKey.call: bit = .call
            case DirectKey.result: bit = .result
            case DirectKey.event: bit = .event
            case DirectKey.value: bit = .value
            case DirectKey.once: bit = .once
            default: return false
            }
            guard present.isDisjoint(with: bit) else { return false }
            present.formUnion(bit)
            guard p &+ 1 < count, base[p] == UInt8(ascii: ":") else { return false }
            p &+= 1
            switch bit {
            case .op:
                // The ops read here have at most eight bytes: packed from the word after the
                // quote. Near the end of the buffer, byte by byte.
                guard base[p] == UInt8(ascii: "\"") else { return false }
                if p &+ 10 <= count {
                    // Up to the first byte a string's rules stop at (as the scanner reads a
                    // short key), which must be the closing quote: an op with an escape, a
                    // control byte or a byte above ASCII there matches none.
                    let w = s.word(at: p &+ 1)
                    let stops = JSONScanner.stringStops(w)
                    let n = stops == 0 ? 8 : stops.trailingZeroBitCount &>> 3
                    guard base[p &+ 1 &+ n] == UInt8(ascii: "\"") else { return false }
                    op = OpName(PackedName(low: n == 8 ? w : w & ((1 << UInt64(n &* 8)) &- 1), high: 0))
                    p &+= n &+ 2
                } else {
                    guard let (end, escaped) = try? s.stringEnd(p), !escaped else { return false }
                    op = OpName(PackedName(base + (p &+ 1), end &- p &- 2, limit: base + count))
                    p = end
                }
            case .id:
                guard let (end, value) = s.requestID(at: p) else { return false }
                id = value
                p = end
            case .call, .event:
                guard let (end, value) = s.number(at: p) else { return false }
                number = value
                p = end
            case .channel, .method, .name, .once:
                guard let name = s.name(at: p) else { return false }
                if bit == .method || bit == .once {
                    second = name
                } else {
                    first = name
                }
                p = name.end &+ 1
            default:
                // User data, of any kind, validated whole.
                guard let value = s.data(at: p) else { return false }
                data = value
                p = value.end
            }
            guard p < count else { return false }
            if base[p] == UInt8(ascii: ",") {
                p &+= 1
                continue
            }
            guard base[p] == UInt8(ascii: "}"), p &+ 1 == count else { return false }
            break
        }
        guard let op else { return false }
        switch op {
        case .ping:
            guard present == [.op, .id] else { return false }
            self = .ping(id: id)
            return true
        case .invoke:
            guard present.subtracting(.arguments) == [.op, .id, .channel, .method] else { return false }
            let arguments = !present.contains(.arguments) || data.isNull(s) ? nil : s.bytes(data)
            self = .invoke(id: id, channel: s.bytes(first), method: s.bytes(second), arguments: arguments)
            return true
        case .post:
            guard present.subtracting([.payload, .once]) == [.op, .id, .name] else { return false }
            let name = s.bytes(first)
            if DirectFrame.isProfileName(name) { return false }
            let payload = !present.contains(.payload) || data.isNull(s) ? nil : s.bytes(data)
            self = .post(id: id, name: name, once: !present.contains(.once) ? DirectFrame.noKey : s.bytes(second), payload: payload)
            return true
        case .return:
            guard present == [.op, .call, .result] else { return false }
            self = .callReturn(call: number, result: s.bytes(data))
            return true
        case .next:
            guard present == [.op, .event] else { return false }
            self = .next(event: number)
            return true
        case .stop:
            guard present == [.op, .event] else { return false }
            self = .stop(event: number)
            return true
        case .complete:
            guard present.subtracting(.value) == [.op, .event] else { return false }
            self = .complete(event: number, value: !present.contains(.value) || data.isNull(s) ? nil : s.bytes(data))
            return true
        default:
            return false
        }
    }
}

extension DirectFrame {
    /// Whether `body` is decoded by the direct path's first try, `decodeInOrder` (tests).
    package static func decodesInOrder(_ body: UnsafeRawBufferPointer) -> Bool {
        var frame = DirectFrame.ping(id: 0)
        return frame.decodeInOrder(JSONScanner(body))
    }

    /// The direct path's first try, for a frame whose members come in the order that the
    /// protocol's examples and the Python, JavaScript and C clients write them: `op` first,
    /// then the op's fields in the order of their table in PROTOCOL.md (a post's `once`
    /// before its `payload`). Each key is checked
    /// against its literal with two or three word compares instead of being read and looked
    /// up; values are read as the general loop reads them. False for anything else (another
    /// order, a missing or extra member, a value the general loop would decline): the general
    /// loop then decodes the frame from its start, or declines it. Both give the same result.
    @inline(__always)
    private mutating func decodeInOrder(_ s: JSONScanner) -> Bool {
        guard s.count >= 8 else { return false }
        switch s.base[7] {
        case UInt8(ascii: "p"):
            if s.matches(0, "{\"op\":\"ping\",\"id\":") {
                guard let (end, id) = s.requestID(at: 18), s.closes(at: end) else { return false }
                self = .ping(id: id)
                return true
            }
            guard s.matches(0, "{\"op\":\"post\",\"id\":"), let (p, id) = s.requestID(at: 18), s.matches(p, ",\"name\":"),
                let name = s.name(at: p &+ 8)
            else { return false }
            let bytes = s.bytes(name)
            if DirectFrame.isProfileName(bytes) { return false }
            // A key (`once`) comes before the payload: matched first, so that a keyed post does
            // not try the payload's literal where its key is.
            if s.matches(name.end &+ 1, ",\"once\":") { return decodeKeyedPost(s, id: id, name: bytes, after: name.end &+ 9) }
            guard let payload = s.optionalData(after: name.end &+ 1, ",\"payload\":") else { return false }
            self = .post(id: id, name: bytes, once: DirectFrame.noKey, payload: payload)
            return true
        case UInt8(ascii: "i"):
            guard s.matches(0, "{\"op\":\"invoke\",\"id\":"), let (p, id) = s.requestID(at: 20), s.matches(p, ",\"channel\":"),
                let channel = s.name(at: p &+ 11), s.matches(channel.end &+ 1, ",\"method\":"),
                let method = s.name(at: channel.end &+ 11), let arguments = s.optionalData(after: method.end &+ 1, ",\"arguments\":")
            else { return false }
            self = .invoke(id: id, channel: s.bytes(channel), method: s.bytes(method), arguments: arguments)
            return true
        case UInt8(ascii: "r"):
            guard s.matches(0, "{\"op\":\"return\",\"call\":"), let (p, call) = s.number(at: 22),
                s.matches(p, ",\"result\":"), let result = s.data(at: p &+ 10), s.closes(at: result.end)
            else { return false }
            self = .callReturn(call: call, result: s.bytes(result))
            return true
        case UInt8(ascii: "n"):
            guard s.matches(0, "{\"op\":\"next\",\"event\":"), let (end, event) = s.number(at: 21), s.closes(at: end)
            else { return false }
            self = .next(event: event)
            return true
        case UInt8(ascii: "s"):
            guard s.matches(0, "{\"op\":\"stop\",\"event\":"), let (end, event) = s.number(at: 21), s.closes(at: end)
            else { return false }
            self = .stop(event: event)
            return true
        case UInt8(ascii: "c"):
            guard s.matches(0, "{\"op\":\"complete\","), s.matches(17, "\"event\":"), let (p, event) = s.number(at: 25),
                let value = s.optionalData(after: p, ",\"value\":")
            else { return false }
            self = .complete(event: event, value: value)
            return true
        default:
            return false
        }
    }
}

extension DirectFrame {
    /// The request of a post the direct path decoded, its user data in place, depending on
    /// nothing (`decodeResult`).
    @_lifetime(immortal)
    package static func post(name: UnsafeRawBufferPointer, once: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer?) -> Request {
        let name = String(decoding: name, as: UTF8.self)
        if once.isEmpty { return .post(name: name, payload: bytes(payload), profile: nil) }
        return .keyed(once: String(decoding: once, as: UTF8.self), .post(name: name, payload: bytes(payload), profile: nil))
    }

    /// The rest of a post in the clients' order with a key, from `p` on (the key's value, after
    /// `,"once":`): the key, then the payload, if any. Kept out of `decodeInOrder`, which stays
    /// as it was for posts without.
    @inline(never)
    private mutating func decodeKeyedPost(_ s: JSONScanner, id: Int64, name: UnsafeRawBufferPointer, after p: Int) -> Bool {
        guard let key = s.name(at: p), let payload = s.optionalData(after: key.end &+ 1, ",\"payload\":")
        else { return false }
        self = .post(id: id, name: name, once: s.bytes(key), payload: payload)
        return true
    }

    /// A post's `once` when it has no key.
    static var noKey: UnsafeRawBufferPointer {
        @inline(__always) get { UnsafeRawBufferPointer(start: nil, count: 0) }
    }

    /// Whether a post's name is one of the notification profile's (10 to 12 bytes): their
    /// payloads are the full decoder's to check.
    @inline(__always)
    fileprivate static func isProfileName(_ name: UnsafeRawBufferPointer) -> Bool {
        (10...12).contains(name.count) && ProfileEvent(rawValue: String(decoding: name, as: UTF8.self)) != nil
    }
}

extension JSONScanner {
    /// Whether the bytes at `p` are `literal`, of 8 to 24 bytes: compared a word at a time,
    /// the last word ending with the literal.
    @inline(__always)
    fileprivate func matches(_ p: Int, _ literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        assert(n >= 8 && n <= 24)
        guard p &+ n <= count else { return false }
        let l = UnsafeRawPointer(literal.utf8Start)
        guard word(at: p) == l.loadUnaligned(as: UInt64.self) else { return false }
        if n > 16 && word(at: p &+ 8) != l.loadUnaligned(fromByteOffset: 8, as: UInt64.self) { return false }
        return word(at: p &+ n &- 8) == l.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)
    }

    /// Whether the frame's closing brace is at `p` and ends it.
    @inline(__always)
    fileprivate func closes(at p: Int) -> Bool { p &+ 1 == count && base[p] == UInt8(ascii: "}") }

    /// A request id at `p` and its end, as the general loop accepts one.
    @inline(__always)
    fileprivate func requestID(at p: Int) -> (end: Int, id: Int64)? {
        guard let (end, value) = number(at: p), value >= 0, value < Limits.maxIntegerID, base[p] != UInt8(ascii: "-")
        else { return nil }
        return (end, value)
    }

    /// An integer at `p` (`call`, `event`) and its end, as the general loop accepts one.
    @inline(__always)
    fileprivate func number(at p: Int) -> (end: Int, value: Int64)? {
        guard p < count else { return nil }
        return integer(at: p)
    }

    /// The text of the name (a channel, a method or a post's name) at `p` between its quotes,
    /// as the general loop accepts one; its `end` is the closing quote.
    @inline(__always)
    fileprivate func name(at p: Int) -> DirectSpan? {
        guard p < count, base[p] == UInt8(ascii: "\""), let (end, escaped) = try? stringEnd(p), !escaped else { return nil }
        let length = end &- p &- 2
        guard length >= 1 && length <= Limits.maxNameBytes else { return nil }
        return DirectSpan(start: p &+ 1, end: end &- 1)
    }

    /// The user data at `p`, validated whole.
    @inline(__always)
    fileprivate func data(at p: Int) -> DirectSpan? {
        guard p < count, let (end, _) = try? valueEnd(p) else { return nil }
        return DirectSpan(start: p, end: end)
    }

    /// The frame's end at `p`, or its last member `key` (a literal with its comma) there and
    /// then the end: `.some(nil)` when the member is absent or null, `.some(data)` when it
    /// holds data, nil when the frame goes on otherwise.
    @inline(__always)
    fileprivate func optionalData(after p: Int, _ key: StaticString) -> UnsafeRawBufferPointer?? {
        if closes(at: p) { return .some(nil) }
        guard matches(p, key), let value = data(at: p &+ key.utf8CodeUnitCount), closes(at: value.end) else { return nil }
        return .some(value.isNull(self) ? nil : bytes(value))
    }
}

extension JSONScanner {
    /// The bytes of a span of the scanned buffer.
    @inline(__always)
    fileprivate func bytes(_ span: DirectSpan) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + span.start, count: span.end &- span.start)
    }
}
