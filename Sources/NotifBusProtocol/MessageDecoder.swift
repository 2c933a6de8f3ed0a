// Turns one frame body into a typed message or a precise rejection, in the order §3
// prescribes: id, then op, unknown op, unknown fields, then the op's own fields.
// One scan validates the whole frame and finds its fields; user data that is only relayed is
// handed out in place (`JSONBytes`), the rest copied out as raw bytes, never re-encoded.

/// Decodes frame bodies sent by clients.
public enum MessageDecoder {
    /// Fields each op accepts, `op` and `id` included for requests, as masks of `FieldName` bits.
    static func allowedFields(_ op: OpName) -> UInt32 {
        let base: FieldSet = [.op, .id]
        switch op {
        case .invoke: return base.union([.channel, .method, .arguments]).rawValue
        case .post: return base.union([.name, .payload, .once]).rawValue
        case .ping, .getCategories, .monitor: return base.rawValue
        case .status: return base.union([.page]).rawValue
        case .hello: return base.union([.protocolVersion, .name]).rawValue
        case .subscribe: return base.union([.events, .priority, .key, .resume]).rawValue
        case .unsubscribe: return base.union([.observer, .key]).rawValue
        case .handle: return base.union([.channel, .method, .resume]).rawValue
        case .unhandle: return base.union([.handler]).rawValue
        case .put: return base.union([.slot, .value, .once]).rawValue
        case .take: return base.union([.slot, .wait, .once]).rawValue
        case .peek: return base.union([.slot]).rawValue
        case .setCategories: return base.union([.categories, .once]).rawValue
        case .next, .stop: return ([.op, .event] as FieldSet).rawValue
        case .complete: return ([.op, .event, .value] as FieldSet).rawValue
        case .return: return ([.op, .call, .result, .error] as FieldSet).rawValue
        }
    }

    /// Decodes `body`; the user data in the result is owned (`JSONBytes.detached`): it
    /// depends on nothing.
    @_lifetime(immortal)
    public static func decode(_ body: [UInt8]) -> DecodeResult {
        var result = DecodeResult.badJSON("")
        body.withUnsafeBytes { result = decodeUnbound($0).detached() }
        return result
    }

    /// Decodes `body`; the `JSONBytes` in the result are views of `body`, and the result
    /// cannot outlive it. The frames of the per-event path take the direct path
    /// (`decodeDirect`); whatever it declines, the full decoder judges.
    @_lifetime(borrow body)
    public static func decode(_ body: UnsafeRawBufferPointer) -> DecodeResult {
        _overrideLifetime(decodeUnbound(body), borrowing: body)
    }

    /// `decode` whose views depend on nothing as far as the compiler knows: for the entry
    /// points above, which tie them to what they hand out.
    @_lifetime(immortal)
    static func decodeUnbound(_ body: UnsafeRawBufferPointer) -> DecodeResult {
        if let direct = decodeDirectUnbound(body) { return direct }
        return decodeFullUnbound(body)
    }

    /// `decode` by the full decoder alone, which judges every frame and words every
    /// rejection; tests and fuzzers hold the direct path to its results.
    @_lifetime(borrow body)
    package static func decodeFull(_ body: UnsafeRawBufferPointer) -> DecodeResult {
        _overrideLifetime(decodeFullUnbound(body), borrowing: body)
    }

    @_lifetime(immortal)
    static func decodeFullUnbound(_ body: UnsafeRawBufferPointer) -> DecodeResult {
        var result = DecodeResult.badJSON("")
        withUnsafeTemporaryAllocation(of: FrameFields.Slot.self, capacity: FieldName.count) { slots in
            var scanner = JSONScanner(body)
            // Scanned straight into the view, which is then borrowed: the field table is a
            // few hundred bytes, and each copy of it was a `memcpy`.
            var view = FieldView(fields: FrameFields(slots: slots.baseAddress.unsafelyUnwrapped, scanning: scanner))
            do throws(JSONError) {
                try scanner.scanTopLevelObject(into: &view.fields)
            } catch {
                result = .badJSON(error.description)
                return
            }
            result = decode(&view)
        }
        return result
    }

    /// Classifies a scanned frame. `view` (a few hundred bytes) is passed `inout` all the
    /// way down, and the one helper that is not inlined (`requestID`) is `mutating`: a
    /// non-mutating call, or a by-value parameter, on an `inout` view copies it whole.
    @_lifetime(immortal)
    static func decode(_ view: inout FieldView) -> DecodeResult {
        let scanner = view.scanner
        // `op`'s name when known; whether it is a string at all. The text of an unknown op
        // is made only for its rejection.
        var op: OpName? = nil
        var opIsString = false
        if let f = view.field(.op), f.kind == .string {
            opIsString = true
            op = scanner.opName(of: f, escaped: view.fields.isEscaped(.op))
        }
        let isHello = op == .hello

        if let op, op.isAnswer {
            do {
                try view.checkFields(allowed: allowedFields(op), id: nil)
                return .decoded(try decodeAnswer(op: op, &view), isHello: false)
            } catch {
                return .rejected(error, isHello: false)
            }
        }

        guard let id = view.requestID() else {
            return .rejected(Rejection(id: nil, .malformed, message: "missing or unusable 'id'"), isHello: isHello)
        }
        guard opIsString else {
            return .rejected(Rejection(id: id, .malformed, message: "missing or non-string 'op'"), isHello: isHello)
        }
        guard let op else {
            let opText = view.field(.op).flatMap { scanner.string(of: $0) } ?? ""
            return .rejected(Rejection(id: id, .unknownOp, message: "unknown op '\(opText)'"), isHello: isHello)
        }
        do {
            try view.checkFields(allowed: allowedFields(op), id: id)
            return .decoded(.request(id: id, try decodeRequest(op: op, id: id, &view)), isHello: isHello)
        } catch {
            return .rejected(error, isHello: isHello)
        }
    }

    @inline(__always) @_lifetime(immortal)
    static func decodeAnswer(op: OpName, _ v: inout FieldView) throws(Rejection) -> Inbound {
        if op == .return {
            guard let call = v.field(.call).flatMap({ v.scanner.wholeNumber(of: $0) }) else {
                throw v.bad("'call' must be an integer")
            }
            let errorField = v.optional(.error)
            let resultField = v.field(.result)
            if let errorField {
                if resultField != nil { throw v.bad("a return carries exactly one of 'result' and 'error'") }
                try validateErrorObject(errorField, &v)
                return .callReturn(CallReturn(call: call, body: .error(v.scanner.inPlace(errorField))))
            }
            guard let resultField else { throw v.bad("a return needs 'result' or 'error'") }
            return .callReturn(CallReturn(call: call, body: .result(v.scanner.inPlace(resultField))))
        }
        guard let event = v.field(.event).flatMap({ v.scanner.wholeNumber(of: $0) }) else {
            throw v.bad("'event' must be an integer")
        }
        switch op {
        case .next: return .answer(.next(event: event))
        case .stop: return .answer(.stop(event: event))
        default: return .answer(.complete(event: event, value: v.optional(.value).map { v.scanner.raw(of: $0) }))
        }
    }

    static func validateErrorObject(_ field: JSONField, _ v: inout FieldView) throws(Rejection) {
        guard let members = v.scanner.members(of: field) else { throw v.bad("'error' must be an object") }
        var seen: [StaticString] = []
        for m in members {
            let name: StaticString
            if v.scanner.keyIs(m, "code") {
                name = "code"
            } else if v.scanner.keyIs(m, "message") {
                name = "message"
            } else if v.scanner.keyIs(m, "details") {
                name = "details"
            } else {
                throw v.bad("unknown field 'error.\(v.scanner.key(of: m))'")
            }
            guard !seen.contains(where: { $0.description == name.description }) else { throw v.bad("duplicate field 'error.\(name)'") }
            seen.append(name)
            if name.description != "details" && m.kind != .string { throw v.bad("'error.\(name)' must be a string") }
        }
        guard seen.contains(where: { $0.description == "code" }) else { throw v.bad("missing field 'error.code'") }
        guard seen.contains(where: { $0.description == "message" }) else { throw v.bad("missing field 'error.message'") }
    }

    @_lifetime(immortal)
    static func decodeRequest(op: OpName, id: RequestID, _ v: inout FieldView) throws(Rejection) -> Request {
        switch op {
        case .hello:
            guard let f = v.field(.protocolVersion), let version = v.scanner.wholeNumber(of: f) else {
                throw v.bad("'protocol' must be an integer")
            }
            return .hello(protocolVersion: version, name: try v.optionalName(.name))
        case .ping: return .ping
        case .subscribe:
            guard let f = v.optional(.events), let elements = v.scanner.elements(of: f) else {
                throw v.bad("'events' must be an array of names")
            }
            guard (1...Limits.maxEventsPerSubscription).contains(elements.count) else {
                throw v.bad("'events' must name 1 to \(Limits.maxEventsPerSubscription) events")
            }
            var events: [String] = []
            events.reserveCapacity(elements.count)
            for e in elements {
                guard let name = v.scanner.string(of: e), Names.isValid(name) else {
                    throw v.bad("'events' entries must be names of 1 to \(Limits.maxNameBytes) bytes")
                }
                guard !events.contains(name) else { throw v.bad("'events' names '\(name)' twice") }
                events.append(name)
            }
            var priority = Limits.defaultPriority
            if let f = v.optional(.priority) {
                guard let p = v.scanner.wholeNumber(of: f), let p32 = Int32(exactly: p) else {
                    throw v.bad("'priority' must be an integer in [-2^31, 2^31-1]")
                }
                priority = p32
            }
            return .subscribe(events: events, priority: priority, key: try v.optionalName(.key), resume: try v.optionalBool(.resume) ?? false)
        case .unsubscribe:
            let observer = try v.optionalString(.observer)
            let key = try v.optionalName(.key)
            switch (observer, key) {
            case (let o?, nil): return .unsubscribe(.observer(o))
            case (nil, let k?): return .unsubscribe(.key(k))
            default: throw v.bad("give exactly one of 'observer' and 'key'")
            }
        case .post:
            let name = try v.requiredName(.name)
            let payloadField = v.optional(.payload)
            var profile: ProfilePayload? = nil
            // The profile's names are 10 to 12 bytes: most posts are told apart by length
            // alone, without a string switch.
            if (10...12).contains(name.utf8.count), let kind = ProfileEvent(rawValue: name) {
                do {
                    profile = try ProfilePayload.check(kind, payloadField, v.scanner)
                } catch {
                    throw Rejection(id: id, .invalidPayload, message: error.message)
                }
            }
            if let payloadField { return try v.keyed(.post(name: name, payload: v.scanner.inPlace(payloadField), profile: profile)) }
            return try v.keyed(.post(name: name, payload: nil, profile: profile))
        case .handle:
            let channel = try v.requiredName(.channel)
            let method = try v.optionalName(.method)
            return .handle(channel: channel, method: method, resume: try v.optionalBool(.resume) ?? false)
        case .unhandle:
            guard let handler = try v.optionalString(.handler) else { throw v.bad("missing field 'handler'") }
            return .unhandle(handler: handler)
        case .invoke:
            let channel = try v.requiredNameInPlace(.channel)
            let method = try v.requiredNameInPlace(.method)
            guard let arguments = v.optional(.arguments) else { return .invoke(channel: channel, method: method, arguments: nil) }
            return .invoke(channel: channel, method: method, arguments: v.scanner.inPlace(arguments))
        case .put:
            let slot = try v.requiredName(.slot)
            guard let f = v.field(.value) else { throw v.bad("missing field 'value'") }
            return try v.keyed(.put(slot: slot, value: f.kind == .null ? nil : v.scanner.raw(of: f)))
        case .take:
            let slot = try v.requiredName(.slot)
            var wait: Int64? = nil
            if let f = v.optional(.wait) {
                guard let w = v.scanner.wholeNumber(of: f), (0...Limits.maxTakeWaitMs).contains(w) else {
                    throw v.bad("'wait' must be an integer from 0 to \(Limits.maxTakeWaitMs)")
                }
                wait = w
            }
            return try v.keyed(.take(slot: slot, waitMs: wait))
        case .peek:
            return .peek(slot: try v.requiredName(.slot))
        case .setCategories:
            guard let f = v.optional(.categories) else { throw v.bad("missing field 'categories'") }
            let set: CategorySet
            do {
                set = try CategorySet.parse(f, v.scanner)
            } catch {
                throw v.bad(error.message)
            }
            return try v.keyed(.setCategories(set))
        case .getCategories: return .getCategories
        case .status:
            guard let text = try v.optionalString(.page) else { return .status(page: nil) }
            guard let page = StatusPage(cursor: text) else {
                throw v.bad("'page' must be the 'next' of an earlier status reply")
            }
            return .status(page: page)
        case .monitor: return .monitor
        case .next, .complete, .stop, .return:
            preconditionFailure("answer op '\(op)' decoded as a request")
        }
    }
}

/// Name rules shared by every kind of name: a string of 1 to 256 bytes.
public enum Names {
    @inline(__always)
    public static func isValid(_ name: String) -> Bool {
        let n = name.utf8.count
        return n >= 1 && n <= Limits.maxNameBytes
    }
}

/// The top-level names the decoder knows, each a bit of a `FieldSet`.
enum FieldName: Int, CaseIterable {
    case op, id, protocolVersion, name, page, events, priority, key, resume, observer, payload, channel, method
    case handler, arguments, slot, value, wait, categories, event, call, result, error, once

    /// How many there are (`NameTableTests` holds it to `allCases`): a constant, for the
    /// decoder's stack-allocated field table.
    static let count = 24

    /// Its bit in a `FieldSet`, and in the direct path's mask of the names it read.
    @inline(__always)
    var bit: UInt32 { 1 << UInt32(truncatingIfNeeded: rawValue) }

    /// The name as the wire spells it.
    var text: String {
        switch self {
        case .op: "op"
        case .id: "id"
        case .protocolVersion: "protocol"
        case .name: "name"
        case .page: "page"
        case .events: "events"
        case .priority: "priority"
        case .key: "key"
        case .resume: "resume"
        case .observer: "observer"
        case .payload: "payload"
        case .channel: "channel"
        case .method: "method"
        case .handler: "handler"
        case .arguments: "arguments"
        case .slot: "slot"
        case .value: "value"
        case .wait: "wait"
        case .categories: "categories"
        case .event: "event"
        case .call: "call"
        case .result: "result"
        case .error: "error"
        case .once: "once"
        }
    }

    /// The known name whose UTF-8 bytes, packed by `PackedName`, are `name`.
    @inline(__always)
    init?(_ name: PackedName) {
        // The constants are the names' bytes, the first in the lowest byte (see PackedName).
        if name.high == 0 {
            switch name.low {
            case 0x0000_0000_0000_706f: self = .op
            case 0x0000_0000_0000_6469: self = .id
            case 0x6c6f_636f_746f_7270: self = .protocolVersion
            case 0x0000_0000_656d_616e: self = .name
            case 0x0000_0000_6567_6170: self = .page
            case 0x0000_7374_6e65_7665: self = .events
            case 0x7974_6972_6f69_7270: self = .priority
            case 0x0000_0000_0079_656b: self = .key
            case 0x0000_656d_7573_6572: self = .resume
            case 0x7265_7672_6573_626f: self = .observer
            case 0x0064_616f_6c79_6170: self = .payload
            case 0x006c_656e_6e61_6863: self = .channel
            case 0x0000_646f_6874_656d: self = .method
            case 0x0072_656c_646e_6168: self = .handler
            case 0x0000_0000_746f_6c73: self = .slot
            case 0x0000_0065_756c_6176: self = .value
            case 0x0000_0000_7469_6177: self = .wait
            case 0x0000_0074_6e65_7665: self = .event
            case 0x0000_0000_6c6c_6163: self = .call
            case 0x0000_746c_7573_6572: self = .result
            case 0x0000_0072_6f72_7265: self = .error
            case 0x0000_0000_6563_6e6f: self = .once
            default: return nil
            }
        } else if name.low == 0x746e_656d_7567_7261 && name.high == 0x0000_0000_0000_0073 {
            self = .arguments
        } else if name.low == 0x6972_6f67_6574_6163 && name.high == 0x0000_0000_0000_7365 {
            self = .categories
        } else {
            return nil
        }
    }
}

/// A set of `FieldName`s as a bit mask, each name's bit its place in `FieldName`.
struct FieldSet: OptionSet {
    let rawValue: UInt32

    init(rawValue: UInt32) { self.rawValue = rawValue }

    @inline(__always)
    init(_ name: FieldName) { rawValue = name.bit }

    static let op = FieldSet(.op)
    static let id = FieldSet(.id)
    static let protocolVersion = FieldSet(.protocolVersion)
    static let name = FieldSet(.name)
    static let page = FieldSet(.page)
    static let events = FieldSet(.events)
    static let priority = FieldSet(.priority)
    static let key = FieldSet(.key)
    static let resume = FieldSet(.resume)
    static let observer = FieldSet(.observer)
    static let payload = FieldSet(.payload)
    static let channel = FieldSet(.channel)
    static let method = FieldSet(.method)
    static let handler = FieldSet(.handler)
    static let arguments = FieldSet(.arguments)
    static let slot = FieldSet(.slot)
    static let value = FieldSet(.value)
    static let wait = FieldSet(.wait)
    static let categories = FieldSet(.categories)
    static let event = FieldSet(.event)
    static let call = FieldSet(.call)
    static let result = FieldSet(.result)
    static let error = FieldSet(.error)
    static let once = FieldSet(.once)
}

/// The ops a client may send.
enum OpName: Equatable, CaseIterable {
    case hello, ping, subscribe, unsubscribe, post, handle, unhandle, invoke, put, take, peek
    case setCategories, getCategories, status, monitor
    case next, complete, stop, `return`

    /// An answer carries no id.
    var isAnswer: Bool {
        switch self {
        case .next, .complete, .stop, .return: true
        default: false
        }
    }

    /// The op whose UTF-8 bytes, packed by `PackedName`, are `name`.
    @inline(__always)
    init?(_ name: PackedName) {
        if name.high == 0 {
            switch name.low {
            case 0x0000_0000_676e_6970: self = .ping
            case 0x0000_656b_6f76_6e69: self = .invoke
            case 0x0000_6e72_7574_6572: self = .return
            case 0x0000_0000_7473_6f70: self = .post
            case 0x0000_0000_7478_656e: self = .next
            case 0x6574_656c_706d_6f63: self = .complete
            case 0x0000_0000_706f_7473: self = .stop
            case 0x0000_006f_6c6c_6568: self = .hello
            case 0x0000_656c_646e_6168: self = .handle
            case 0x656c_646e_6168_6e75: self = .unhandle
            case 0x0000_0000_0074_7570: self = .put
            case 0x0000_0000_656b_6174: self = .take
            case 0x0000_0000_6b65_6570: self = .peek
            case 0x0000_7375_7461_7473: self = .status
            case 0x0072_6f74_696e_6f6d: self = .monitor
            default: return nil
            }
            return
        }
        switch (name.low, name.high) {
        case (0x6269_7263_7362_7573, 0x0000_0000_0000_0065): self = .subscribe
        case (0x7263_7362_7573_6e75, 0x0000_0000_0065_6269): self = .unsubscribe
        case (0x6765_7461_4374_6573, 0x0000_0073_6569_726f): self = .setCategories
        case (0x6765_7461_4374_6567, 0x0000_0073_6569_726f): self = .getCategories
        default: return nil
        }
    }
}

/// Up to 16 bytes of a name packed into two words, the first byte in the lowest byte of
/// `low`, unused bytes zero. The raw bytes of a JSON string hold no zero byte, so two names
/// of at most 16 bytes are equal exactly when their packings are; longer names, and decoded
/// text with a zero byte (an escaped `\u0000`), pack as `unknown`, which no known name equals.
struct PackedName {
    let low: UInt64
    let high: UInt64

    static let unknown = PackedName(low: ~0, high: ~0)

    init(low: UInt64, high: UInt64) {
        self.low = low
        self.high = high
    }

    /// Packs the `n` bytes at `start`; `limit` is the end of the readable buffer.
    @inline(__always)
    init(_ start: UnsafePointer<UInt8>, _ n: Int, limit: UnsafePointer<UInt8>) {
        guard n <= 16 else {
            self = .unknown
            return
        }
        if n <= 8 && start + 8 <= limit {
            let w = UInt64(littleEndian: UnsafeRawPointer(start).loadUnaligned(as: UInt64.self))
            low = n == 8 ? w : w & ((1 << UInt64(n &* 8)) &- 1)
            high = 0
            return
        }
        if n > 8 && start + 16 <= limit {
            low = UInt64(littleEndian: UnsafeRawPointer(start).loadUnaligned(as: UInt64.self))
            let w = UInt64(littleEndian: UnsafeRawPointer(start + 8).loadUnaligned(as: UInt64.self))
            high = n == 16 ? w : w & ((1 << UInt64((n &- 8) &* 8)) &- 1)
            return
        }
        var lo: UInt64 = 0
        var hi: UInt64 = 0
        for i in 0..<n {
            let b = UInt64(start[i])
            if i < 8 { lo |= b << UInt64(i &* 8) } else { hi |= b << UInt64((i &- 8) &* 8) }
        }
        low = lo
        high = hi
    }

    /// Packs the bytes of `text`, decoded from a string with escapes.
    init(_ text: String) {
        var copy = text
        self = copy.withUTF8 { u in
            guard let p = u.baseAddress else { return PackedName(low: 0, high: 0) }
            guard !u.contains(0) else { return .unknown }
            return PackedName(p, u.count, limit: p)
        }
    }
}

extension JSONScanner {
    /// A field's value bytes, in place in the scanned buffer.
    @inline(__always) @_lifetime(immortal)
    func inPlace(_ field: JSONField) -> JSONBytes {
        JSONBytes(unboundInPlace: UnsafeRawBufferPointer(start: base + field.start, count: field.end - field.start))
    }

    /// A string field's text: in place when it holds no escape (`escaped`, as the scan
    /// found it), else decoded.
    @inline(__always) @_lifetime(immortal)
    func nameInPlace(_ field: JSONField, escaped: Bool) -> JSONName? {
        guard field.kind == .string else { return nil }
        if escaped {
            guard let text = string(of: field) else { return nil }
            return JSONName(text)
        }
        return JSONName(unboundInPlace: UnsafeRawBufferPointer(start: base + field.start + 1, count: field.end - field.start - 2))
    }

    /// The packed text of a member's key (escapes decoded).
    @inline(__always)
    func packedKey(_ field: JSONField) -> PackedName {
        if field.keyEscaped { return PackedName(key(of: field)) }
        return PackedName(base + field.keyStart, field.keyEnd - field.keyStart, limit: base + count)
    }

    /// The value of a number field that is an integer (no fraction, no exponent) in the
    /// range of `Int64`; nil for any other number.
    @inline(__always)
    func wholeNumber(of field: JSONField) -> Int64? {
        guard field.kind == .number, let (end, value) = integer(at: field.start), end == field.end else { return nil }
        return value
    }

    /// The op a string field names, or nil for any other text. `escaped` is whether the
    /// string holds escapes (as the scan found it): its bytes then are not its text.
    @inline(__always)
    func opName(of field: JSONField, escaped: Bool) -> OpName? {
        if escaped {
            guard let text = string(of: field) else { return nil }
            return OpName(PackedName(text))
        }
        return OpName(PackedName(base + field.start + 1, field.end - field.start - 2, limit: base + count))
    }
}

/// The top-level members of one frame, collected in one pass: the first occurrence of each
/// known name (in caller-provided storage, so a frame allocates nothing), and the first
/// member that is unknown or repeats a known name, each with its place in the frame.
struct FrameFields: JSONMemberSink {
    /// Where a known name's first value lies. Small (32 bytes), so that the table of all
    /// known names fits the stack without a heap fallback. A known name's key needs no
    /// offsets: its text is the name's.
    struct Slot {
        var start: Int
        var end: Int
        /// Which member of the frame it is (0 for the first).
        var ordinal: Int
        var kind: JSONKind
        /// Whether a string value holds escapes.
        var escaped: Bool
    }

    /// Indexed by `FieldName.rawValue`; a slot is initialised when its bit is in `present`.
    let slots: UnsafeMutablePointer<Slot>
    /// The scanner of the frame, for the keys that hold escapes.
    let scanner: JSONScanner
    var present: UInt32 = 0
    var members = 0
    /// The first member whose name is not known, and its place.
    var firstUnknown: (field: JSONField, ordinal: Int)? = nil
    /// The first repeat of a known name, and its place.
    var firstDuplicate: (name: FieldName, ordinal: Int)? = nil

    init(slots: UnsafeMutablePointer<Slot>, scanning scanner: JSONScanner) {
        self.slots = slots
        self.scanner = scanner
    }

    @inline(__always)
    mutating func member(_ field: JSONField, key: PackedName?, valueEscaped: Bool) {
        let ordinal = members
        members &+= 1
        guard let name = FieldName(key ?? scanner.packedKey(field)) else {
            if firstUnknown == nil { firstUnknown = (field, ordinal) }
            return
        }
        let bit: UInt32 = 1 << UInt32(name.rawValue)
        if present & bit != 0 {
            if firstDuplicate == nil { firstDuplicate = (name, ordinal) }
            return
        }
        present |= bit
        (slots + name.rawValue).initialize(to: Slot(start: field.start, end: field.end, ordinal: ordinal, kind: field.kind, escaped: valueEscaped))
    }

    func field(_ name: FieldName) -> JSONField? {
        guard present & (1 << UInt32(name.rawValue)) != 0 else { return nil }
        let slot = slots[name.rawValue]
        return JSONField(start: slot.start, end: slot.end, kind: slot.kind)
    }

    /// Whether the string value of `name` holds escapes; `name` must be present.
    @inline(__always)
    func isEscaped(_ name: FieldName) -> Bool {
        slots[name.rawValue].escaped
    }
}

/// The top-level fields of one frame with typed, rule-checking accessors.
struct FieldView {
    var fields: FrameFields
    var id: RequestID? = nil

    init(fields: FrameFields) {
        self.fields = fields
    }

    var scanner: JSONScanner { fields.scanner }

    @inline(__always)
    func field(_ name: FieldName) -> JSONField? {
        fields.field(name)
    }

    /// The field, or nil when absent or null.
    func optional(_ name: FieldName) -> JSONField? {
        guard let f = field(name), f.kind != .null else { return nil }
        return f
    }

    func bad(_ message: String) -> Rejection {
        Rejection(id: id, .malformed, message: message)
    }

    /// The request's id when it is usable: an integer literal in [0, 2^53) or a string of 1 to 256 bytes.
    /// Integers (what clients send) are read inline; strings in `stringRequestID`.
    @inline(__always)
    mutating func requestID() -> RequestID? {
        guard let f = field(.id) else { return nil }
        guard f.kind == .number else { return stringRequestID(f) }
        guard scanner.base[f.start] != UInt8(ascii: "-"), let i = scanner.wholeNumber(of: f), i < Limits.maxIntegerID else {
            return nil
        }
        return .integer(i)
    }

    /// `requestID` for an id that is not a number: usable when a string of 1 to 256 bytes.
    /// `mutating` for the reason `decode(_: inout FieldView)` gives.
    @inline(never)
    mutating func stringRequestID(_ f: JSONField) -> RequestID? {
        switch f.kind {
        case .string:
            guard let s = scanner.string(of: f), (1...Limits.maxStringIDBytes).contains(s.utf8.count) else { return nil }
            let raw = UnsafeRawBufferPointer(rebasing: scanner.bytes[(f.start + 1)..<(f.end - 1)])
            return .string(String(decoding: raw, as: UTF8.self))
        default:
            return nil
        }
    }

    /// Rejects the first member, in frame order, that is not in `allowed` or repeats an
    /// earlier member's name, naming it. Almost every frame has nothing to reject: that is
    /// one mask test and two tag tests, inline; the search for the offender is not.
    @inline(__always)
    mutating func checkFields(allowed: UInt32, id: RequestID?) throws(Rejection) {
        self.id = id
        if fields.present & ~allowed == 0, case .none = fields.firstUnknown, case .none = fields.firstDuplicate { return }
        try rejectOffender(allowed: allowed)
    }

    /// The rejection `checkFields` throws when a member is not allowed or repeated.
    @inline(never)
    mutating func rejectOffender(allowed: UInt32) throws(Rejection) {
        // The first offender is the earliest of: the first unknown name, the first
        // occurrence of a known name the op does not take, the first repeat of a known name
        // (a repeat of a name the op does not take comes after that name's first occurrence).
        var offender = fields.firstUnknown?.ordinal ?? Int.max
        var message = fields.firstUnknown.map { "unknown field '\(scanner.key(of: $0.field))'" }
        var notAllowed = fields.present & ~allowed
        while notAllowed != 0 {
            let index = notAllowed.trailingZeroBitCount
            let ordinal = fields.slots[index].ordinal
            if ordinal < offender, let name = FieldName(rawValue: index) {
                offender = ordinal
                message = "unknown field '\(name.text)'"
            }
            notAllowed &= notAllowed &- 1
        }
        if let d = fields.firstDuplicate, d.ordinal < offender {
            message = "duplicate field '\(d.name.text)'"
        }
        if let message { throw bad(message) }
    }

    func optionalString(_ name: FieldName) throws(Rejection) -> String? {
        guard let f = optional(name) else { return nil }
        guard let s = scanner.string(of: f) else { throw bad("'\(name.text)' must be a string") }
        return s
    }

    func optionalBool(_ name: FieldName) throws(Rejection) -> Bool? {
        guard let f = optional(name) else { return nil }
        guard let b = scanner.bool(of: f) else { throw bad("'\(name.text)' must be a boolean") }
        return b
    }

    func optionalName(_ name: FieldName) throws(Rejection) -> String? {
        guard let s = try optionalString(name) else { return nil }
        guard Names.isValid(s) else { throw bad("'\(name.text)' must be 1 to \(Limits.maxNameBytes) bytes") }
        return s
    }

    /// `requiredName`, seen in place when it holds no escape. Inlined: called apart on the
    /// `inout` view, it copied the view.
    @inline(__always) @_lifetime(immortal)
    func requiredNameInPlace(_ name: FieldName) throws(Rejection) -> JSONName {
        guard let f = optional(name) else { throw bad("missing field '\(name.text)'") }
        guard let value = scanner.nameInPlace(f, escaped: fields.isEscaped(name)) else { throw bad("'\(name.text)' must be a string") }
        let n = value.utf8Count
        guard n >= 1 && n <= Limits.maxNameBytes else { throw bad("'\(name.text)' must be 1 to \(Limits.maxNameBytes) bytes") }
        return value
    }

    /// `request` with the frame's idempotency key (`once`, checked last, as the last of
    /// the op's fields), if it has one.
    @_lifetime(copy request)
    func keyed(_ request: consuming KeyedRequest) throws(Rejection) -> Request {
        guard let key = try optionalName(.once) else { return request.request }
        return .keyed(once: key, request)
    }

    func requiredName(_ name: FieldName) throws(Rejection) -> String {
        guard let s = try optionalName(name) else { throw bad("missing field '\(name.text)'") }
        return s
    }
}
