// The byte-at-a-time JSON validator the wide-step scanner replaced, kept only as a test
// oracle: the differential tests require JSONScanner to accept, reject and locate exactly
// as this does. Test code; nothing in the product uses it.
import Glibc
import NotifBusProtocol

/// One member of an object (or element of an array): where its key and value lie in the
/// scanned buffer. Plain offsets, so scanning a frame creates no strings; read the key with
/// `ReferenceScanner.key(of:)` or compare it with `ReferenceScanner.keyIs(_:_:)`.
struct ReferenceField: Sendable {
    /// The key's bytes between its quotes (empty for array elements).
    let keyStart: Int
    let keyEnd: Int
    /// Whether the key contains escapes, so that its bytes are not its text.
    let keyEscaped: Bool
    let start: Int
    let end: Int
    let kind: JSONKind

    init(keyStart: Int = 0, keyEnd: Int = 0, keyEscaped: Bool = false, start: Int, end: Int, kind: JSONKind) {
        self.keyStart = keyStart
        self.keyEnd = keyEnd
        self.keyEscaped = keyEscaped
        self.start = start
        self.end = end
        self.kind = kind
    }
}

/// A cursor over UTF-8 bytes. Every method validates what it passes over.
struct ReferenceScanner {
    /// Deepest nesting a tree parse (`JSONValue`, for clients and tests) accepts: a tree is
    /// built and freed by recursion. The broker never builds trees of user data; it
    /// validates with `skipValue`, which has no depth limit.
    static let maxTreeDepth = 512

    let bytes: UnsafeRawBufferPointer
    var position: Int = 0
    /// The same bytes as a typed pointer, for the hot loops.
    let base: UnsafePointer<UInt8>
    let count: Int

    /// Stands in for the base of an empty buffer; never read, since every read checks `count`.
    nonisolated(unsafe) private static let empty: UnsafeMutablePointer<UInt8> = .allocate(capacity: 1)

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
        count = bytes.count
        base = bytes.baseAddress.map { UnsafePointer($0.assumingMemoryBound(to: UInt8.self)) } ?? UnsafePointer(ReferenceScanner.empty)
    }

    /// The text of a member's key.
    func key(of field: ReferenceField) -> String {
        let raw = UnsafeBufferPointer(start: base + field.keyStart, count: field.keyEnd - field.keyStart)
        if !field.keyEscaped { return String(decoding: raw, as: UTF8.self) }
        return decodeEscaped(field.keyStart, field.keyEnd)
    }

    /// Whether a member's key is `name`, comparing bytes (escaped keys are decoded first).
    @inline(__always)
    func keyIs(_ field: ReferenceField, _ name: StaticString) -> Bool {
        let n = name.utf8CodeUnitCount
        if field.keyEscaped { return key(of: field) == name.description }
        guard field.keyEnd - field.keyStart == n else { return false }
        return memcmp(base + field.keyStart, name.utf8Start, n) == 0
    }

    /// Whether two members have the same key.
    func sameKey(_ a: ReferenceField, _ b: ReferenceField) -> Bool {
        if a.keyEscaped || b.keyEscaped { return key(of: a) == key(of: b) }
        let n = a.keyEnd - a.keyStart
        guard b.keyEnd - b.keyStart == n else { return false }
        return memcmp(base + a.keyStart, base + b.keyStart, n) == 0
    }

    func fail(_ reason: String, at offset: Int? = nil) -> JSONError {
        JSONError(offset: offset ?? position, reason: reason)
    }

    @inline(__always) mutating func skipWhitespace() {
        var p = position
        while p < count {
            let b = base[p]
            guard b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 else { break }
            p += 1
        }
        position = p
    }

    /// Scans a whole document that must be an object and returns its members in order.
    /// Duplicate keys are reported through `duplicateKey`.
    mutating func scanTopLevelObject() throws(JSONError) -> [ReferenceField] {
        skipWhitespace()
        guard position < count else { throw fail("empty document") }
        guard base[position] == UInt8(ascii: "{") else {
            _ = try skipValue()
            skipWhitespace()
            if position != count { throw fail("trailing bytes after the value") }
            throw fail("top-level value is not an object", at: 0)
        }
        let fields = try scanObjectMembers()
        skipWhitespace()
        if position != count { throw fail("trailing bytes after the value") }
        return fields
    }

    /// Whether `bytes` are one JSON value of any kind and depth, by the same rules the wire's
    /// frames are checked with, so that what a frame carried in is accepted again.
    static func isValidDocument(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var scanner = ReferenceScanner(buffer)
            scanner.skipWhitespace()
            guard (try? scanner.skipValue()) != nil else { return false }
            scanner.skipWhitespace()
            return scanner.position == buffer.count
        }
    }

    /// Reads the members of the object that starts at `position`, validating every value.
    mutating func scanObjectMembers() throws(JSONError) -> [ReferenceField] {
        guard position < count, base[position] == UInt8(ascii: "{") else { throw fail("expected an object") }
        position += 1
        var fields: [ReferenceField] = []
        skipWhitespace()
        if position < count, base[position] == UInt8(ascii: "}") {
            position += 1
            return fields
        }
        fields.reserveCapacity(8)
        while true {
            skipWhitespace()
            guard position < count, base[position] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let keyStart = position + 1
            let keyEscaped = try skipString()
            let keyEnd = position - 1
            skipWhitespace()
            guard position < count, base[position] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            position += 1
            skipWhitespace()
            let start = position
            let kind = try skipValue()
            fields.append(ReferenceField(keyStart: keyStart, keyEnd: keyEnd, keyEscaped: keyEscaped, start: start, end: position, kind: kind))
            skipWhitespace()
            guard position < count else { throw fail("unterminated object") }
            let b = base[position]
            position += 1
            if b == UInt8(ascii: ",") { continue }
            if b == UInt8(ascii: "}") { return fields }
            throw fail("expected ',' or '}'", at: position - 1)
        }
    }

    /// Skips one value starting at `position` (no leading whitespace), validating it.
    /// Returns the value's kind.
    @discardableResult
    mutating func skipValue() throws(JSONError) -> JSONKind {
        guard position < count else { throw fail("expected a value") }
        let first = base[position]
        let kind: JSONKind
        switch first {
        case UInt8(ascii: "{"): kind = .object
        case UInt8(ascii: "["): kind = .array
        default:
            return try skipScalar()
        }
        // Containers: an explicit stack of "is object" bits.
        var stack = ReferenceBitStack()
        valueLoop: while true {
            skipWhitespace()
            guard position < count else { throw fail("unterminated value") }
            let b = base[position]
            if b == UInt8(ascii: "{") {
                position += 1
                skipWhitespace()
                if position < count, base[position] == UInt8(ascii: "}") {
                    position += 1
                } else {
                    stack.push(true)
                    try readKeyAndColon()
                    continue valueLoop
                }
            } else if b == UInt8(ascii: "[") {
                position += 1
                skipWhitespace()
                if position < count, base[position] == UInt8(ascii: "]") {
                    position += 1
                } else {
                    stack.push(false)
                    continue valueLoop
                }
            } else {
                try skipScalar()
            }
            // After a value: close containers or move to the next element.
            while !stack.isEmpty {
                skipWhitespace()
                guard position < count else { throw fail("unterminated container") }
                let c = base[position]
                position += 1
                if stack.top {
                    if c == UInt8(ascii: ",") {
                        skipWhitespace()
                        try readKeyAndColon()
                        continue valueLoop
                    }
                    if c == UInt8(ascii: "}") { stack.pop(); continue }
                    throw fail("expected ',' or '}'", at: position - 1)
                } else {
                    if c == UInt8(ascii: ",") { continue valueLoop }
                    if c == UInt8(ascii: "]") { stack.pop(); continue }
                    throw fail("expected ',' or ']'", at: position - 1)
                }
            }
            return kind
        }
    }

    @inline(__always)
    private mutating func readKeyAndColon() throws(JSONError) {
        skipWhitespace()
        guard position < count, base[position] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
        try skipString()
        skipWhitespace()
        guard position < count, base[position] == UInt8(ascii: ":") else { throw fail("expected ':'") }
        position += 1
    }

    @discardableResult @inline(__always)
    private mutating func skipScalar() throws(JSONError) -> JSONKind {
        guard position < count else { throw fail("expected a value") }
        switch base[position] {
        case UInt8(ascii: "\""):
            try skipString()
            return .string
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            _ = try skipNumber()
            return .number
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        default:
            throw fail("unexpected byte")
        }
    }

    private mutating func expectLiteral(_ word: StaticString) throws(JSONError) {
        let n = word.utf8CodeUnitCount
        guard position + n <= count else { throw fail("truncated literal") }
        let p = word.utf8Start
        for i in 0..<n where base[position + i] != p[i] {
            throw fail("invalid literal")
        }
        position += n
    }

    /// Skips a number and says whether it was an integer (no fraction, no exponent).
    @inline(__always)
    mutating func skipNumber() throws(JSONError) -> Bool {
        var integral = true
        var p = position
        defer { position = p }
        if base[p] == UInt8(ascii: "-") { p += 1 }
        guard p < count else { throw fail("truncated number", at: p) }
        let lead = base[p]
        if lead == UInt8(ascii: "0") {
            p += 1
        } else if lead >= UInt8(ascii: "1") && lead <= UInt8(ascii: "9") {
            p += 1
            while p < count, isDigit(base[p]) { p += 1 }
        } else {
            throw fail("invalid number", at: p)
        }
        if p < count, base[p] == UInt8(ascii: ".") {
            integral = false
            p += 1
            let digitsStart = p
            while p < count, isDigit(base[p]) { p += 1 }
            if p == digitsStart { throw fail("digits expected after '.'", at: p) }
        }
        if p < count, base[p] == UInt8(ascii: "e") || base[p] == UInt8(ascii: "E") {
            integral = false
            p += 1
            if p < count, base[p] == UInt8(ascii: "+") || base[p] == UInt8(ascii: "-") {
                p += 1
            }
            let digitsStart = p
            while p < count, isDigit(base[p]) { p += 1 }
            if p == digitsStart { throw fail("digits expected in exponent", at: p) }
        }
        return integral
    }

    @inline(__always) private func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    /// Skips a string (at its opening quote), validating escapes and UTF-8.
    /// Returns whether it contained escapes.
    @discardableResult @inline(__always)
    mutating func skipString() throws(JSONError) -> Bool {
        var p = position + 1
        var escaped = false
        while p < count {
            let b = base[p]
            if b == UInt8(ascii: "\"") {
                position = p + 1
                return escaped
            }
            if b >= 0x20 && b < 0x80 && b != UInt8(ascii: "\\") {
                p += 1
                continue
            }
            position = p
            if b == UInt8(ascii: "\\") {
                escaped = true
                try skipEscape()
            } else if b < 0x20 {
                throw fail("control character in string")
            } else {
                try skipUTF8Sequence()
            }
            p = position
        }
        position = p
        throw fail("unterminated string")
    }

    private mutating func skipEscape() throws(JSONError) {
        guard position + 1 < count else { throw fail("truncated escape") }
        switch base[position + 1] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
            UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            position += 2
        case UInt8(ascii: "u"):
            guard position + 6 <= count else { throw fail("truncated \\u escape") }
            for i in 2..<6 where hexValue(base[position + i]) == nil {
                throw fail("invalid \\u escape")
            }
            position += 6
        default:
            throw fail("invalid escape")
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

    /// Validates one multi-byte UTF-8 sequence (RFC 3629: no overlongs, no surrogates,
    /// nothing above U+10FFFF).
    private mutating func skipUTF8Sequence() throws(JSONError) {
        let b0 = base[position]
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
        default: throw fail("invalid UTF-8")
        }
        guard position + length <= count else { throw fail("truncated UTF-8") }
        let b1 = base[position + 1]
        guard b1 >= low && b1 <= high else { throw fail("invalid UTF-8") }
        for i in 2..<length where base[position + i] & 0xC0 != 0x80 {
            throw fail("invalid UTF-8")
        }
        position += length
    }

    /// Reads a string (at its opening quote) into a Swift `String`, decoding escapes.
    /// Lone surrogate escapes decode to U+FFFD.
    mutating func readString() throws(JSONError) -> String {
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

/// Stack of booleans for container nesting: 64 levels inline, more on the heap.
struct ReferenceBitStack {
    private var inline: UInt64 = 0
    private var depth = 0
    private var overflow: [Bool] = []

    var isEmpty: Bool { depth == 0 }

    mutating func push(_ value: Bool) {
        if depth < 64 {
            if value { inline |= (1 << UInt64(depth)) } else { inline &= ~(1 << UInt64(depth)) }
        } else {
            overflow.append(value)
        }
        depth += 1
    }

    mutating func pop() {
        depth -= 1
        if depth >= 64 { overflow.removeLast() }
    }

    var top: Bool {
        let d = depth - 1
        if d < 64 { return inline & (1 << UInt64(d)) != 0 }
        return overflow[d - 64]
    }
}
