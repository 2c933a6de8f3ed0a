// Appends compact JSON to byte buffers. Strings are escaped per RFC 8259; nothing else is
// transformed, so raw user data appended with `appendRaw` reaches the peer byte for byte.

/// Low-level JSON output into `[UInt8]`.
public enum JSONWriter {
    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `value`, object keys sorted.
    public static func append(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: appendLiteral("null", to: &out)
        case .bool(let b): appendLiteral(b ? "true" : "false", to: &out)
        case .integer(let i): appendInt(i, to: &out)
        case .double(let d): appendDouble(d, to: &out)
        case .string(let s): appendString(s, to: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, e) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                append(e, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, key) in members.keys.sorted().enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                appendString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                append(members[key]!, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    @inline(__always)
    public static func appendLiteral(_ text: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    public static func appendInt(_ value: Int64, to out: inout [UInt8]) {
        if value < 0 {
            out.append(UInt8(ascii: "-"))
            appendUInt(value.magnitude, to: &out)
        } else {
            appendUInt(UInt64(value), to: &out)
        }
    }

    public static func appendUInt(_ value: UInt64, to out: inout [UInt8]) {
        if value < 10 {
            out.append(UInt8(truncatingIfNeeded: value) &+ 0x30)
            return
        }
        var digits: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)  // 32 bytes of scratch
        withUnsafeMutableBytes(of: &digits) { scratch in
            var v = value
            var i = scratch.count
            while v > 0 {
                i -= 1
                scratch[i] = UInt8(truncatingIfNeeded: v % 10) &+ 0x30
                v /= 10
            }
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: scratch[i...]))
        }
    }

    /// Non-finite numbers have no JSON form and are written as null.
    public static func appendDouble(_ value: Double, to out: inout [UInt8]) {
        guard value.isFinite else {
            appendLiteral("null", to: &out)
            return
        }
        out.append(contentsOf: Array(value.description.utf8))
    }

    public static func appendString(_ value: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var runStart = 0
            for i in 0..<utf8.count {
                let b = utf8[i]
                guard b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") else { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i]))
                runStart = i + 1
                out.append(UInt8(ascii: "\\"))
                switch b {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(b)
                case 0x0A: out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(UInt8(ascii: "r"))
                case 0x09: out.append(UInt8(ascii: "t"))
                case 0x08: out.append(UInt8(ascii: "b"))
                case 0x0C: out.append(UInt8(ascii: "f"))
                default:
                    out.append(contentsOf: [UInt8(ascii: "u"), 0x30, 0x30, hexDigits[Int(b >> 4)], hexDigits[Int(b & 0xF)]])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// Builds one length-prefixed frame: reserve the 4-byte length, write JSON, patch it.
public struct FrameBuilder {
    public var bytes: [UInt8]

    public init(capacity: Int = 128) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(contentsOf: [0, 0, 0, 0])
    }

    @inline(__always) public mutating func literal(_ text: StaticString) { JSONWriter.appendLiteral(text, to: &bytes) }
    @inline(__always) public mutating func string(_ text: String) { JSONWriter.appendString(text, to: &bytes) }
    @inline(__always) public mutating func int(_ value: Int64) { JSONWriter.appendInt(value, to: &bytes) }
    @inline(__always) public mutating func raw(_ value: [UInt8]) { bytes.append(contentsOf: value) }
    @inline(__always) public mutating func raw(_ value: UnsafeRawBufferPointer) { bytes.append(contentsOf: value) }
    @inline(__always) public mutating func value(_ value: JSONValue) { JSONWriter.append(value, to: &bytes) }

    /// A string, or `null` for nil.
    public mutating func optionalString(_ text: String?) {
        if let text { string(text) } else { literal("null") }
    }

    /// Raw JSON, or `null` for nil.
    public mutating func optionalRaw(_ value: [UInt8]?) {
        if let value { raw(value) } else { literal("null") }
    }

    /// Patches the length prefix and returns the frame.
    public mutating func finish() -> [UInt8] {
        let n = UInt32(bytes.count - 4)
        bytes[0] = UInt8(truncatingIfNeeded: n >> 24)
        bytes[1] = UInt8(truncatingIfNeeded: n >> 16)
        bytes[2] = UInt8(truncatingIfNeeded: n >> 8)
        bytes[3] = UInt8(truncatingIfNeeded: n)
        return bytes
    }
}
