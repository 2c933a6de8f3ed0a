// Validates JSON over borrowed bytes and locates values without copying them: strings and
// digit runs eight bytes at a time, containers with an explicit stack (nesting costs heap
// bits, never call stack). It does no I/O and never retains the buffer past a call.
import Glibc

/// The kind of a JSON value, known from its first byte.
public enum JSONKind: Sendable, Equatable {
    case object, array, string, number, bool, null
}

/// One member of an object (or element of an array): where its key and value lie in the
/// scanned buffer. Plain offsets, so scanning a frame creates no strings; read the key with
/// `JSONScanner.key(of:)` or compare it with `JSONScanner.keyIs(_:_:)`.
public struct JSONField: Sendable {
    /// The key's bytes between its quotes (empty for array elements).
    public let keyStart: Int
    public let keyEnd: Int
    /// Whether the key contains escapes, so that its bytes are not its text.
    public let keyEscaped: Bool
    public let start: Int
    public let end: Int
    public let kind: JSONKind

    public init(keyStart: Int = 0, keyEnd: Int = 0, keyEscaped: Bool = false, start: Int, end: Int, kind: JSONKind) {
        self.keyStart = keyStart
        self.keyEnd = keyEnd
        self.keyEscaped = keyEscaped
        self.start = start
        self.end = end
        self.kind = kind
    }
}

/// Receives the members of an object, in order, as `JSONScanner` validates them.
protocol JSONMemberSink {
    /// `key`: the key's bytes packed, when the scan packed them on the way (a key of at most
    /// 7 plain bytes with a whole word left in the buffer), else nil. `valueEscaped`: whether
    /// the member's value is a string holding escapes (false for every other kind), so that a
    /// string without any can be read from its bytes as they are.
    mutating func member(_ field: JSONField, key: PackedName?, valueEscaped: Bool)
}

/// Collects members into an array.
struct JSONFieldList: JSONMemberSink {
    var fields: [JSONField] = []

    mutating func member(_ field: JSONField, key: PackedName?, valueEscaped: Bool) {
        if fields.isEmpty { fields.reserveCapacity(8) }
        fields.append(field)
    }
}

/// A cursor over UTF-8 bytes. Every method validates what it passes over.
public struct JSONScanner {
    /// Deepest nesting `parseDocument` (for tests and the broker's few trees) accepts: it
    /// builds a tree by recursion. Clients build trees of user data with
    /// `parseDocumentAnyDepth`, which has no limit. The broker never builds trees of user
    /// data; it validates with `skipValue`, which has no depth limit.
    public static let maxTreeDepth = 512

    public let bytes: UnsafeRawBufferPointer
    public var position: Int = 0
    /// The same bytes as a typed pointer, for the hot loops.
    let base: UnsafePointer<UInt8>
    let count: Int

    /// Stands in for the base of an empty buffer; never read, since every read checks `count`.
    nonisolated(unsafe) private static let empty: UnsafeMutablePointer<UInt8> = .allocate(capacity: 1)

    public init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
        count = bytes.count
        base = bytes.baseAddress.map { UnsafePointer($0.assumingMemoryBound(to: UInt8.self)) } ?? UnsafePointer(JSONScanner.empty)
    }

    /// The text of a member's key.
    public func key(of field: JSONField) -> String {
        let raw = UnsafeBufferPointer(start: base + field.keyStart, count: field.keyEnd - field.keyStart)
        if !field.keyEscaped { return String(decoding: raw, as: UTF8.self) }
        return decodeEscaped(field.keyStart, field.keyEnd)
    }

    /// Whether a member's key is `name`, comparing bytes (escaped keys are decoded first).
    @inline(__always)
    public func keyIs(_ field: JSONField, _ name: StaticString) -> Bool {
        let n = name.utf8CodeUnitCount
        if field.keyEscaped { return key(of: field) == name.description }
        guard field.keyEnd - field.keyStart == n else { return false }
        return memcmp(base + field.keyStart, name.utf8Start, n) == 0
    }

    /// Whether two members have the same key.
    public func sameKey(_ a: JSONField, _ b: JSONField) -> Bool {
        if a.keyEscaped || b.keyEscaped { return key(of: a) == key(of: b) }
        let n = a.keyEnd - a.keyStart
        guard b.keyEnd - b.keyStart == n else { return false }
        return memcmp(base + a.keyStart, base + b.keyStart, n) == 0
    }

    func fail(_ reason: String, at offset: Int? = nil) -> JSONError {
        JSONError(offset: offset ?? position, reason: reason)
    }

    // MARK: Wide steps
    //
    // The hot loops test eight bytes at once in a UInt64 (SWAR): each test sets bit 7 of every
    // byte that ends a run, so the first such byte is the lowest set bit. A borrow or carry
    // between bytes starts only at a byte that is itself flagged, so bytes above the first one
    // may be flagged wrongly, but the first one never is. Words are read only when all eight
    // bytes lie inside the buffer; the last few bytes go through the byte loops.

    static let ones: UInt64 = 0x0101_0101_0101_0101
    static let highs: UInt64 = 0x8080_8080_8080_8080
    /// Bit n set for each JSON whitespace byte n (space, tab, line feed, carriage return).
    static let whitespaceBits: UInt64 = 1 << 0x20 | 1 << 0x09 | 1 << 0x0A | 1 << 0x0D

    /// The eight bytes at `p`, the first in the lowest byte. `p + 8` must be at most `count`.
    @inline(__always) func word(at p: Int) -> UInt64 {
        UInt64(littleEndian: UnsafeRawPointer(base + p).loadUnaligned(as: UInt64.self))
    }

    /// Bit 7 set in each byte of `w` that ends a run of plain string bytes: `"`, `\`, a
    /// control byte (below 0x20) or a byte of a multi-byte UTF-8 sequence (0x80 and above).
    @inline(__always) static func stringStops(_ w: UInt64) -> UInt64 {
        let quote = w ^ 0x2222_2222_2222_2222
        let backslash = w ^ 0x5C5C_5C5C_5C5C_5C5C
        return ((quote &- ones) | (backslash &- ones) | (w &- 0x2020_2020_2020_2020) | w) & highs
    }

    /// Bit 7 set in the first byte of `w` that is `"`, and perhaps in bytes after it (a
    /// borrow can mark them); zero when `w` has no `"`.
    @inline(__always) static func quotes(_ w: UInt64) -> UInt64 {
        let quote = w ^ 0x2222_2222_2222_2222
        return (quote &- ones) & ~quote & highs
    }

    /// Bit 7 set in each byte of `w` that is not an ASCII digit.
    @inline(__always) static func nonDigits(_ w: UInt64) -> UInt64 {
        ((w &+ 0x4646_4646_4646_4646) | (w &- 0x3030_3030_3030_3030) | w) & highs
    }

    /// The value of eight decimal digits, one per byte of `w` (each 0 to 9), the most
    /// significant in the lowest byte: neighbouring digits are paired, then the pairs, then
    /// the fours (no product carries into the next lane).
    @inline(__always) static func eightDigitsValue(_ w: UInt64) -> UInt64 {
        let pairs = (w &* (10 << 8 + 1)) >> 8 & 0x00FF_00FF_00FF_00FF
        let fours = (pairs &* (100 << 16 + 1)) >> 16 & 0x0000_FFFF_0000_FFFF
        return (fours &* (10_000 << 32 + 1)) >> 32
    }

    @inline(__always) func isDigit(_ b: UInt8) -> Bool { b &- 0x30 < 10 }

    /// The end of the run of digits that starts at `p`.
    @inline(__always) func digitRunEnd(_ start: Int) -> Int {
        var p = start
        while p &+ 8 <= count {
            let stops = JSONScanner.nonDigits(word(at: p))
            if stops != 0 { return p &+ stops.trailingZeroBitCount &>> 3 }
            p &+= 8
        }
        guard p < count else { return p }
        if count >= 8 {
            // Fewer than eight bytes left: the buffer's last word, shifted so that `p` is its
            // lowest byte; the zero bytes shifted in are not digits, so the run stops by `count`.
            let stops = JSONScanner.nonDigits(tailWord(from: p))
            return p &+ stops.trailingZeroBitCount &>> 3
        }
        while p < count, isDigit(base[p]) { p &+= 1 }
        return p
    }

    /// The bytes from `p` to the end of the buffer (fewer than eight, `count` at least
    /// eight) in the low bytes of a word, zeros above them.
    @inline(__always) func tailWord(from p: Int) -> UInt64 {
        word(at: count &- 8) &>> UInt64((p &- (count &- 8)) &* 8)
    }

    /// Moves past whitespace. Compact JSON (what clients send) has none: then this is one
    /// test of the next byte, and no store.
    @inline(__always) mutating func skipWhitespace() {
        guard position < count, base[position] <= 0x20 else { return }
        skipWhitespaceRun()
    }

    private mutating func skipWhitespaceRun() {
        position = whitespaceRunEnd(position)
    }

    /// The first byte at or after `p` that is not whitespace (or `count`).
    func whitespaceRunEnd(_ start: Int) -> Int {
        var p = start
        while p < count {
            let b = base[p]
            guard b <= 0x20, JSONScanner.whitespaceBits &>> UInt64(b) & 1 != 0 else { break }
            p &+= 1
        }
        return p
    }

    /// Whether `b` is JSON whitespace.
    @inline(__always) static func isWhitespace(_ b: UInt8) -> Bool {
        b <= 0x20 && whitespaceBits &>> UInt64(b) & 1 != 0
    }

    /// Scans a whole document that must be an object and returns its members in order.
    /// Duplicate keys are kept: judging them is the reader's business.
    public mutating func scanTopLevelObject() throws(JSONError) -> [JSONField] {
        var list = JSONFieldList()
        try scanTopLevelObject(into: &list)
        return list.fields
    }

    /// Scans a whole document that must be an object, handing each member to `sink` in order.
    mutating func scanTopLevelObject<Sink: JSONMemberSink>(into sink: inout Sink) throws(JSONError) {
        skipWhitespace()
        guard position < count else { throw fail("empty document") }
        guard base[position] == UInt8(ascii: "{") else {
            _ = try skipValue()
            skipWhitespace()
            if position != count { throw fail("trailing bytes after the value") }
            throw fail("top-level value is not an object", at: 0)
        }
        try scanObjectMembers(into: &sink)
        skipWhitespace()
        if position != count { throw fail("trailing bytes after the value") }
    }

    /// Whether `bytes` are one JSON value of any kind and depth, by the same rules the wire's
    /// frames are checked with, so that what a frame carried in is accepted again.
    public static func isValidDocument(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var scanner = JSONScanner(buffer)
            scanner.skipWhitespace()
            guard (try? scanner.skipValue()) != nil else { return false }
            scanner.skipWhitespace()
            return scanner.position == buffer.count
        }
    }

    /// Reads the members of the object that starts at `position`, validating every value.
    public mutating func scanObjectMembers() throws(JSONError) -> [JSONField] {
        var list = JSONFieldList()
        try scanObjectMembers(into: &list)
        return list.fields
    }

    /// Reads the members of the object that starts at `position`, validating every value and
    /// handing each member to `sink` in order. A local cursor, stored back once; whitespace is
    /// looked for only where a byte is not the one the grammar expects.
    @inline(__always)
    mutating func scanObjectMembers<Sink: JSONMemberSink>(into sink: inout Sink) throws(JSONError) {
        guard position < count, base[position] == UInt8(ascii: "{") else { throw fail("expected an object") }
        var p = afterWhitespace(position &+ 1)
        if p < count, base[p] == UInt8(ascii: "}") {
            position = p &+ 1
            return
        }
        while true {
            if p >= count || base[p] != UInt8(ascii: "\"") {
                p = whitespaceRunEnd(p)
                guard p < count, base[p] == UInt8(ascii: "\"") else { throw fail("expected a string key", at: p) }
            }
            let keyStart = p &+ 1
            var keyEscaped = false
            var key: PackedName? = nil
            // A short plain key (the frames' own field names) ends within its first word: the
            // word's first byte that needs a rule is its closing quote, and the bytes before it
            // are the key, packed as they stand.
            if keyStart &+ 8 <= count, case let w = word(at: keyStart), case let stops = JSONScanner.stringStops(w), stops != 0,
                case let n = stops.trailingZeroBitCount &>> 3, base[keyStart &+ n] == UInt8(ascii: "\"")
            {
                key = PackedName(low: w & ((1 << UInt64(n &* 8)) &- 1), high: 0)
                p = keyStart &+ n &+ 1
            } else {
                (p, keyEscaped) = try stringEnd(p)
            }
            let keyEnd = p &- 1
            if p >= count || base[p] != UInt8(ascii: ":") {
                p = whitespaceRunEnd(p)
                guard p < count, base[p] == UInt8(ascii: ":") else { throw fail("expected ':'", at: p) }
            }
            p = afterWhitespace(p &+ 1)
            let start = p
            guard p < count else { throw fail("expected a value", at: p) }
            // A string's escapes are noted for the sink; any other value as `valueEnd` finds
            // it (strings and numbers inline, containers by a call).
            let kind: JSONKind
            var valueEscaped = false
            if base[p] == UInt8(ascii: "\"") {
                (p, valueEscaped) = try stringEnd(p)
                kind = .string
            } else {
                (p, kind) = try valueEnd(p)
            }
            sink.member(
                JSONField(keyStart: keyStart, keyEnd: keyEnd, keyEscaped: keyEscaped, start: start, end: p, kind: kind),
                key: key, valueEscaped: valueEscaped)
            if p < count, base[p] == UInt8(ascii: ",") {
                p &+= 1
                continue
            }
            p = afterWhitespace(p)
            guard p < count else { throw fail("unterminated object", at: p) }
            let c = base[p]
            p &+= 1
            if c == UInt8(ascii: ",") { continue }
            if c == UInt8(ascii: "}") {
                position = p
                return
            }
            throw fail("expected ',' or '}'", at: p &- 1)
        }
    }

    /// Skips one value starting at `position` (no leading whitespace), validating it.
    /// Returns the value's kind.
    @discardableResult
    public mutating func skipValue() throws(JSONError) -> JSONKind {
        guard position < count else { throw fail("expected a value") }
        let (end, kind) = try valueEnd(position)
        position = end
        return kind
    }

    /// The end and kind of the value at `start` (inside the buffer, no whitespace before it),
    /// validating all of it.
    @_transparent
    func valueEnd(_ start: Int) throws(JSONError) -> (end: Int, kind: JSONKind) {
        let first = base[start]
        if first == UInt8(ascii: "\"") { return (try stringEnd(start).end, .string) }
        if first != UInt8(ascii: "{") && first != UInt8(ascii: "[") { return try plainScalarEnd(start) }
        return (try containerEnd(start), first == UInt8(ascii: "{") ? .object : .array)
    }

    /// The end of the object or array that starts at `start`, validating all of it. One loop
    /// over a local cursor and an explicit stack of "is object" bits (nesting costs heap bits,
    /// never call stack). Whitespace is looked for only where a byte is not the one the
    /// grammar expects, so compact JSON pays no whitespace test of its own.
    func containerEnd(_ start: Int) throws(JSONError) -> Int {
        // Nesting within one word's bits, the common case, has a stack in registers; a
        // deeper value is scanned again from its start with a stack that grows on the heap.
        var shallow = ShallowBitStack()
        if let end = try containerEnd(start, stack: &shallow) { return end }
        var deep = BitStack()
        return try containerEnd(start, stack: &deep)!
    }

    /// `containerEnd` with `stack` for the nesting; nil when the stack could not take it.
    @inline(__always)
    private func containerEnd<Stack: ContainerStack>(_ start: Int, stack: inout Stack) throws(JSONError) -> Int? {
        var p = start
        valueLoop: while true {
            // At a value (whitespace may come first).
            guard p < count else { throw fail("unterminated value", at: p) }
            let b = base[p]
            if b == UInt8(ascii: "\"") {
                p = try stringEnd(p).end
            } else if b == UInt8(ascii: "{") {
                p = afterWhitespace(p &+ 1)
                if p < count, base[p] == UInt8(ascii: "}") {
                    p &+= 1
                } else {
                    guard stack.push(true) else { return nil }
                    p = try keyAndColonEnd(p)
                    continue valueLoop
                }
            } else if b == UInt8(ascii: "[") {
                p = afterWhitespace(p &+ 1)
                if p < count, base[p] == UInt8(ascii: "]") {
                    p &+= 1
                } else {
                    guard stack.push(false) else { return nil }
                    continue valueLoop
                }
            } else if JSONScanner.isWhitespace(b) {
                p = whitespaceRunEnd(p)
                continue valueLoop
            } else {
                p = try plainScalarEnd(p).end
            }
            // After a value: close containers or move to the next element.
            while !stack.isEmpty {
                guard p < count else { throw fail("unterminated container", at: p) }
                let c = base[p]
                p &+= 1
                if c == UInt8(ascii: ",") {
                    if stack.top { p = try keyAndColonEnd(p) }
                    continue valueLoop
                }
                // `]` is 0x5D and `}` is 0x7D: the closer the top container needs.
                if c == (stack.top ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    stack.pop()
                    continue
                }
                if JSONScanner.isWhitespace(c) {
                    p = whitespaceRunEnd(p)
                    continue
                }
                throw fail(stack.top ? "expected ',' or '}'" : "expected ',' or ']'", at: p &- 1)
            }
            return p
        }
    }

    /// `p`, or the end of the whitespace that starts there.
    @inline(__always) func afterWhitespace(_ p: Int) -> Int {
        p < count && base[p] <= 0x20 ? whitespaceRunEnd(p) : p
    }

    /// The end of `"key" :` at `start`, where whitespace may come before each part.
    @_transparent
    func keyAndColonEnd(_ start: Int) throws(JSONError) -> Int {
        var p = start
        if p >= count || base[p] != UInt8(ascii: "\"") {
            p = whitespaceRunEnd(p)
            guard p < count, base[p] == UInt8(ascii: "\"") else { throw fail("expected a string key", at: p) }
        }
        p = try stringEnd(p).end
        if p >= count || base[p] != UInt8(ascii: ":") {
            p = whitespaceRunEnd(p)
            guard p < count, base[p] == UInt8(ascii: ":") else { throw fail("expected ':'", at: p) }
        }
        return p &+ 1
    }

    /// The four bytes at `p`, the first in the lowest byte. `p + 4` must be at most `count`.
    @inline(__always) private func word32(at p: Int) -> UInt32 {
        UInt32(littleEndian: UnsafeRawPointer(base + p).loadUnaligned(as: UInt32.self))
    }

    /// The end and kind of the number or literal at `start` (inside the buffer, not a string).
    /// Transparent (like `numberEnd`) so that it is inlined into the container loop, which
    /// `@inline(__always)` did not achieve: the call cost a third of a small number's scan.
    @_transparent
    func plainScalarEnd(_ start: Int) throws(JSONError) -> (end: Int, kind: JSONKind) {
        let b = base[start]
        // A positive integer (most numbers in user data) needs only its digit run found; one
        // with a fraction or an exponent goes through `numberEnd` from its start.
        if b &- UInt8(ascii: "1") < 9 {
            var p = start &+ 1
            if p < count, isDigit(base[p]) { p = digitRunEnd(p &+ 1) }
            if p == count || (base[p] != UInt8(ascii: ".") && base[p] | 0x20 != UInt8(ascii: "e")) {
                return (p, .number)
            }
        }
        if isDigit(b) || b == UInt8(ascii: "-") {
            return (try numberEnd(start).end, .number)
        }
        switch b {
        case UInt8(ascii: "t"):
            guard start + 4 <= count else { throw fail("truncated literal", at: start) }
            guard word32(at: start) == 0x6575_7274 else { throw fail("invalid literal", at: start) }  // "true"
            return (start &+ 4, .bool)
        case UInt8(ascii: "f"):
            guard start + 5 <= count else { throw fail("truncated literal", at: start) }
            guard word32(at: start + 1) == 0x6573_6C61 else { throw fail("invalid literal", at: start) }  // "alse"
            return (start &+ 5, .bool)
        case UInt8(ascii: "n"):
            guard start + 4 <= count else { throw fail("truncated literal", at: start) }
            guard word32(at: start) == 0x6C6C_756E else { throw fail("invalid literal", at: start) }  // "null"
            return (start &+ 4, .null)
        default:
            throw fail("unexpected byte", at: start)
        }
    }

    /// Skips a number and says whether it was an integer (no fraction, no exponent).
    @_transparent
    mutating func skipNumber() throws(JSONError) -> Bool {
        let (end, integral) = try numberEnd(position)
        position = end
        return integral
    }

    /// The end of the number at `start`, and whether it is an integer (no fraction, no
    /// exponent).
    @_transparent
    func numberEnd(_ start: Int) throws(JSONError) -> (end: Int, integral: Bool) {
        var integral = true
        var p = start
        if base[p] == UInt8(ascii: "-") { p += 1 }
        guard p < count else { throw fail("truncated number", at: p) }
        let lead = base[p]
        if lead == UInt8(ascii: "0") {
            p += 1
        } else if lead >= UInt8(ascii: "1") && lead <= UInt8(ascii: "9") {
            p = digitRunEnd(p + 1)
        } else {
            throw fail("invalid number", at: p)
        }
        guard p < count else { return (p, integral) }
        if base[p] == UInt8(ascii: ".") {
            integral = false
            let digitsStart = p + 1
            p = digitRunEnd(digitsStart)
            if p == digitsStart { throw fail("digits expected after '.'", at: p) }
            guard p < count else { return (p, integral) }
        }
        if base[p] | 0x20 == UInt8(ascii: "e") {
            integral = false
            p += 1
            if p < count, base[p] == UInt8(ascii: "+") || base[p] == UInt8(ascii: "-") {
                p += 1
            }
            let digitsStart = p
            p = digitRunEnd(digitsStart)
            if p == digitsStart { throw fail("digits expected in exponent", at: p) }
        }
        return (p, integral)
    }

    /// Whether `b` may stand in a string as itself.
    @inline(__always) static func isPlainStringByte(_ b: UInt8) -> Bool {
        b >= 0x20 && b < 0x80 && b != UInt8(ascii: "\"") && b != UInt8(ascii: "\\")
    }

    /// Whether `\` followed by `e` is a complete escape: `\"`, `\\`, `\/`, `\b`, `\f`,
    /// `\n`, `\r` or `\t`.
    @inline(__always) static func isOneByteEscape(_ e: UInt8) -> Bool {
        let below64: UInt64 = 1 << 0x22 | 1 << 0x2F
        let from64: UInt64 = 1 << (0x5C - 64) | 1 << (0x62 - 64) | 1 << (0x66 - 64) | 1 << (0x6E - 64) | 1 << (0x72 - 64) | 1 << (0x74 - 64)
        if e < 64 { return below64 &>> UInt64(e) & 1 != 0 }
        return e < 128 && from64 &>> UInt64(e &- 64) & 1 != 0
    }

    /// Skips a string (at its opening quote), validating escapes and UTF-8.
    /// Returns whether it contained escapes.
    @discardableResult @inline(__always)
    mutating func skipString() throws(JSONError) -> Bool {
        let (end, escaped) = try stringEnd(position)
        position = end
        return escaped
    }

    /// The end (past the closing quote) of the string whose opening quote is at `start`,
    /// validating escapes and UTF-8, and whether it contained escapes.
    @inline(__always)
    func stringEnd(_ start: Int) throws(JSONError) -> (end: Int, escaped: Bool) {
        var p = start &+ 1
        var escaped = false
        while true {
            // Plain bytes: eight at a time while a whole word is left, then one at a time.
            if p &+ 8 <= count {
                let stops = JSONScanner.stringStops(word(at: p))
                if stops == 0 {
                    p &+= 8
                    continue
                }
                p &+= stops.trailingZeroBitCount &>> 3
            } else if p < count && count >= 8 {
                // The last word, shifted so that `p` is its lowest byte: the zero bytes shifted
                // in are control bytes, so a stop is found, at `count` when none comes before.
                p &+= JSONScanner.stringStops(tailWord(from: p)).trailingZeroBitCount &>> 3
                guard p < count else { throw fail("unterminated string", at: p) }
            } else {
                while p < count, JSONScanner.isPlainStringByte(base[p]) { p &+= 1 }
                guard p < count else { throw fail("unterminated string", at: p) }
            }
            let b = base[p]
            if b == UInt8(ascii: "\"") { return (p &+ 1, escaped) }
            if b == UInt8(ascii: "\\") {
                escaped = true
                if p &+ 1 < count, JSONScanner.isOneByteEscape(base[p &+ 1]) {
                    p &+= 2
                    continue
                }
                p = try escapeEnd(p)
                continue
            }
            if b < 0x20 { throw fail("control character in string", at: p) }
            p = try utf8SequencesEnd(p)
        }
    }

    /// Whether all four bytes of `w` are ASCII hex digits (`0-9`, `A-F`, `a-f`). For bytes
    /// below 0x80, adding 0x80 - lo sets bit 7 exactly when the byte is at least lo, and adding
    /// 0x7F - hi exactly when it is above hi; no sum carries into the next byte.
    @inline(__always) static func areHexDigits(_ w: UInt32) -> Bool {
        let highs: UInt32 = 0x8080_8080
        guard w & highs == 0 else { return false }
        let digits = (w &+ 0x5050_5050) & ~(w &+ 0x4646_4646)
        let lower = w | 0x2020_2020
        let letters = (lower &+ 0x1F1F_1F1F) & ~(lower &+ 0x1919_1919)
        return (digits | letters) & highs == highs
    }

    /// The end of the escape whose backslash is at `p`.
    private func escapeEnd(_ p: Int) throws(JSONError) -> Int {
        guard p + 1 < count else { throw fail("truncated escape", at: p) }
        switch base[p + 1] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
            UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            return p + 2
        case UInt8(ascii: "u"):
            guard p + 6 <= count else { throw fail("truncated \\u escape", at: p) }
            guard JSONScanner.areHexDigits(word32(at: p + 2)) else { throw fail("invalid \\u escape", at: p) }
            return p + 6
        default:
            throw fail("invalid escape", at: p)
        }
    }

    @inline(__always) func hexValue(_ b: UInt8) -> UInt32? {
        switch b {
        case 0x30...0x39: return UInt32(b - 0x30)
        case 0x41...0x46: return UInt32(b - 0x41 + 10)
        case 0x61...0x66: return UInt32(b - 0x61 + 10)
        default: return nil
        }
    }

    /// Validates the multi-byte UTF-8 sequences from `start` on (RFC 3629: no overlongs, no
    /// surrogates, nothing above U+10FFFF) and returns where the first ASCII byte (or the end)
    /// is.
    private func utf8SequencesEnd(_ start: Int) throws(JSONError) -> Int {
        var p = start
        repeat {
            let b0 = base[p]
            // Two-byte sequences (U+0080 to U+07FF, most accented Latin letters) need only their
            // second byte checked.
            if b0 &- 0xC2 < 0x1E, p + 1 < count, base[p + 1] & 0xC0 == 0x80 {
                p += 2
                continue
            }
            let length: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xBF
            switch b0 {
            case 0xC2...0xDF: length = 2
            case 0xE0: length = 3; low = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: length = 3; high = 0x9F
            case 0xF0: length = 4; low = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4: length = 4; high = 0x8F
            default: throw fail("invalid UTF-8", at: p)
            }
            guard p + length <= count else { throw fail("truncated UTF-8", at: p) }
            let b1 = base[p + 1]
            guard b1 >= low && b1 <= high else { throw fail("invalid UTF-8", at: p) }
            if length > 2 {
                guard base[p + 2] & 0xC0 == 0x80 else { throw fail("invalid UTF-8", at: p) }
                if length > 3, base[p + 3] & 0xC0 != 0x80 { throw fail("invalid UTF-8", at: p) }
            }
            p += length
        } while p < count && base[p] >= 0x80
        return p
    }

    /// Reads a string (at its opening quote) into a Swift `String`, decoding escapes.
    /// Lone surrogate escapes decode to U+FFFD.
    public mutating func readString() throws(JSONError) -> String {
        let start = position + 1
        let escaped = try skipString()
        let end = position - 1
        if !escaped {
            return String(decoding: UnsafeBufferPointer(start: base + start, count: end - start), as: UTF8.self)
        }
        return decodeEscaped(start, end)
    }

    func decodeEscaped(_ start: Int, _ end: Int) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(end - start)
        var i = start
        while i < end {
            let b = base[i]
            guard b == UInt8(ascii: "\\") else {
                out.append(b)
                i += 1
                continue
            }
            let e = base[i + 1]
            i += 2
            switch e {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = hex4(i)
                i += 4
                if scalar >= 0xD800 && scalar <= 0xDBFF, i + 6 <= end, base[i] == UInt8(ascii: "\\"),
                    base[i + 1] == UInt8(ascii: "u")
                {
                    let low = hex4(i + 2)
                    if low >= 0xDC00 && low <= 0xDFFF {
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        i += 6
                    }
                }
                let u = Unicode.Scalar(scalar) ?? "\u{FFFD}"
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default: out.append(e)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private func hex4(_ i: Int) -> UInt32 {
        var v: UInt32 = 0
        for k in 0..<4 { v = v << 4 | (hexValue(base[i + k]) ?? 0) }
        return v
    }
}

/// A stack of "is object" bits for container nesting.
protocol ContainerStack {
    var isEmpty: Bool { get }
    /// The innermost container is an object.
    var top: Bool { get }
    /// Pushes `value`; false when the stack cannot hold another level.
    mutating func push(_ value: Bool) -> Bool
    mutating func pop()
}

/// Up to 63 levels in one word, above a sentinel bit: the top in the lowest bit, empty when
/// only the sentinel is left. Nothing on the heap, so it lives in a register.
struct ShallowBitStack: ContainerStack {
    private var bits: UInt64 = 1

    var isEmpty: Bool { bits == 1 }
    var top: Bool { bits & 1 != 0 }

    @inline(__always) mutating func push(_ value: Bool) -> Bool {
        guard bits >> 63 == 0 else { return false }
        bits = bits << 1 | (value ? 1 : 0)
        return true
    }

    @inline(__always) mutating func pop() {
        bits >>= 1
    }
}

/// Stack of booleans for container nesting of any depth: the innermost 64 levels in a word
/// (the top in its lowest bit, so reading it is one test), deeper levels on the heap.
struct BitStack: ContainerStack {
    private var inline: UInt64 = 0
    private var depth = 0
    private var overflow: [Bool] = []

    var isEmpty: Bool { depth == 0 }

    @inline(__always) mutating func push(_ value: Bool) -> Bool {
        if depth >= 64 { overflow.append(inline >> 63 != 0) }
        inline = inline << 1 | (value ? 1 : 0)
        depth += 1
        return true
    }

    @inline(__always) mutating func pop() {
        depth -= 1
        inline >>= 1
        if depth >= 64, let bit = overflow.popLast(), bit { inline |= 1 << 63 }
    }

    var top: Bool { inline & 1 != 0 }
}

extension JSONScanner {
    /// The end and value of the JSON integer at `start` (an optional minus, digits without a
    /// leading zero, no fraction, no exponent) that fits an `Int64`, or nil for anything
    /// else: the one integer parser of the decoders. Up to fifteen digits are found and
    /// valued from the two words that start with them; `start` must be within the buffer.
    @inline(__always)
    func integer(at start: Int) -> (end: Int, value: Int64)? {
        let negative = base[start] == UInt8(ascii: "-")
        let digits = negative ? start &+ 1 : start
        guard count >= 8, digits < count else { return longInteger(at: start) }
        // From the first digit on; near the end of the buffer its last word, shifted.
        let w = digits &+ 8 <= count ? word(at: digits) : tailWord(from: digits)
        var n = JSONScanner.nonDigits(w).trailingZeroBitCount &>> 3
        // At least one digit, and no leading zero before another.
        guard n >= 1, n == 1 || w & 0xFF != 0x30 else { return nil }
        var value: UInt64
        if n < 8 {
            // The digits' values moved to the top of the word: the bytes below read as zeros.
            value = JSONScanner.eightDigitsValue((w &- 0x3030_3030_3030_3030) &<< UInt64((8 &- n) &* 8))
        } else {
            // Eight digits, and up to seven more in the next word.
            value = JSONScanner.eightDigitsValue(w &- 0x3030_3030_3030_3030)
            let next = digits &+ 8
            if next < count {
                let w2 = next &+ 8 <= count ? word(at: next) : tailWord(from: next)
                let m = JSONScanner.nonDigits(w2).trailingZeroBitCount &>> 3
                guard m < 8 else { return longInteger(at: start) }
                if m > 0 {
                    var scale: UInt64 = 1
                    for _ in 0..<m { scale &*= 10 }
                    value = value &* scale &+ JSONScanner.eightDigitsValue((w2 &- 0x3030_3030_3030_3030) &<< UInt64((8 &- m) &* 8))
                    n &+= m
                }
            }
        }
        let end = digits &+ n
        if end < count {
            let next = base[end]
            guard next != UInt8(ascii: ".") && next | 0x20 != UInt8(ascii: "e") else { return nil }
        }
        return (end, negative ? -Int64(value) : Int64(value))
    }

    /// `integer` for sixteen digits or more, or a buffer of fewer than eight bytes; past 18
    /// digits, the value is checked against the range of `Int64`.
    func longInteger(at start: Int) -> (end: Int, value: Int64)? {
        var p = start
        let negative = base[p] == UInt8(ascii: "-")
        if negative { p &+= 1 }
        guard p < count else { return nil }
        let digits = p
        let lead = base[p]
        if lead == UInt8(ascii: "0") {
            p &+= 1
        } else {
            guard lead &- UInt8(ascii: "1") < 9 else { return nil }
            p = digitRunEnd(p &+ 1)
        }
        if p < count {
            let next = base[p]
            guard next != UInt8(ascii: ".") && next | 0x20 != UInt8(ascii: "e") else { return nil }
        }
        guard p &- digits <= 18 else {
            return JSONScanner.parseInt64(UnsafeRawBufferPointer(start: base + start, count: p &- start)).map { (p, $0) }
        }
        var value: Int64 = 0
        for i in digits..<p { value = value &* 10 &+ Int64(base[i] &- 0x30) }
        return (p, negative ? -value : value)
    }
}
