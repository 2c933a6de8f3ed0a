// Builds JSONValue trees and typed scalars from scanned bytes. Used off the hot path:
// by clients, by tests, and by the broker only where it must look inside user data.

extension JSONScanner {
    /// Parses a whole document into a tree, rejecting trailing bytes.
    public mutating func parseDocument() throws(JSONError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue(depth: 0)
        skipWhitespace()
        if position != bytes.count { throw fail("trailing bytes after the value") }
        return value
    }

    /// Parses the value at `position` into a tree.
    public mutating func parseValue(depth: Int) throws(JSONError) -> JSONValue {
        guard depth < JSONScanner.maxTreeDepth else { throw fail("nesting deeper than \(JSONScanner.maxTreeDepth)") }
        skipWhitespace()
        guard position < bytes.count else { throw fail("expected a value") }
        switch bytes[position] {
        case UInt8(ascii: "{"):
            position += 1
            var members: [String: JSONValue] = [:]
            skipWhitespace()
            if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
                position += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
                let key = try readString()
                skipWhitespace()
                guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                position += 1
                members[key] = try parseValue(depth: depth + 1)
                skipWhitespace()
                guard position < bytes.count else { throw fail("unterminated object") }
                let b = bytes[position]
                position += 1
                if b == UInt8(ascii: ",") { continue }
                if b == UInt8(ascii: "}") { return .object(members) }
                throw fail("expected ',' or '}'", at: position - 1)
            }
        case UInt8(ascii: "["):
            position += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
                position += 1
                return .array(elements)
            }
            while true {
                elements.append(try parseValue(depth: depth + 1))
                skipWhitespace()
                guard position < bytes.count else { throw fail("unterminated array") }
                let b = bytes[position]
                position += 1
                if b == UInt8(ascii: ",") { continue }
                if b == UInt8(ascii: "]") { return .array(elements) }
                throw fail("expected ',' or ']'", at: position - 1)
            }
        case UInt8(ascii: "\""):
            return .string(try readString())
        case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
            let first = bytes[position]
            if try skipValue() == .null { return .null }
            return .bool(first == UInt8(ascii: "t"))
        default:
            let start = position
            let integral = try skipNumber()
            return JSONScanner.number(UnsafeRawBufferPointer(rebasing: bytes[start..<position]), integral: integral)
        }
    }

    static func number(_ text: UnsafeRawBufferPointer, integral: Bool) -> JSONValue {
        if integral, !text.isEmpty, let (end, i) = JSONScanner(text).integer(at: 0), end == text.count { return .integer(i) }
        let s = String(decoding: text, as: UTF8.self)
        return .double(Double(s) ?? .nan)
    }

    /// Parses an optionally negative decimal integer without overflow; nil when out of range.
    static func parseInt64(_ text: UnsafeRawBufferPointer) -> Int64? {
        var i = 0
        var negative = false
        if text.count > 0, text[0] == UInt8(ascii: "-") {
            negative = true
            i = 1
        }
        guard i < text.count else { return nil }
        var magnitude: UInt64 = 0
        while i < text.count {
            let d = UInt64(text[i] &- 0x30)
            guard d <= 9 else { return nil }
            let (m, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(d)
            if o1 || o2 { return nil }
            magnitude = a
            i += 1
        }
        if negative {
            if magnitude <= UInt64(Int64.max) { return -Int64(magnitude) }
            if magnitude == UInt64(Int64.max) + 1 { return Int64.min }
            return nil
        }
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }

    /// The value of a field known to be an integer literal (no fraction or exponent);
    /// nil for any other number or an out-of-range integer.
    public func integer(of field: JSONField) -> Int64? { wholeNumber(of: field) }

    /// The decoded text of a string field.
    public func string(of field: JSONField) -> String? {
        guard field.kind == .string else { return nil }
        var sub = JSONScanner(bytes)
        sub.position = field.start
        return try? sub.readString()
    }

    /// The boolean of a `true`/`false` field.
    public func bool(of field: JSONField) -> Bool? {
        guard field.kind == .bool else { return nil }
        return bytes[field.start] == UInt8(ascii: "t")
    }

    /// The members of an object field.
    public func members(of field: JSONField) -> [JSONField]? {
        guard field.kind == .object else { return nil }
        var sub = JSONScanner(bytes)
        sub.position = field.start
        return try? sub.scanObjectMembers()
    }

    /// The elements of an array field, each located like an object member (empty key).
    public func elements(of field: JSONField) -> [JSONField]? {
        guard field.kind == .array else { return nil }
        var sub = JSONScanner(bytes)
        sub.position = field.start + 1
        var out: [JSONField] = []
        sub.skipWhitespace()
        if sub.position < bytes.count, bytes[sub.position] == UInt8(ascii: "]") { return out }
        while sub.position < field.end {
            sub.skipWhitespace()
            let start = sub.position
            guard let kind = try? sub.skipValue() else { return nil }
            out.append(JSONField(start: start, end: sub.position, kind: kind))
            sub.skipWhitespace()
            guard sub.position < bytes.count else { return nil }
            let b = bytes[sub.position]
            sub.position += 1
            if b == UInt8(ascii: "]") { return out }
            if b != UInt8(ascii: ",") { return nil }
        }
        return out
    }

    /// The raw bytes of a field's value.
    public func raw(of field: JSONField) -> [UInt8] {
        Array(UnsafeRawBufferPointer(rebasing: bytes[field.start..<field.end]))
    }

    /// A tree of a field's value.
    public func tree(of field: JSONField) throws(JSONError) -> JSONValue {
        var sub = JSONScanner(bytes)
        sub.position = field.start
        return try sub.parseValue(depth: 0)
    }
}
