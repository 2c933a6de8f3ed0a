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
/// It writes into memory of its own through a pointer (each append is a bounds check and
/// a copy, not a trip through Array's generic append), and `finish` hands the bytes over
/// as one exactly sized array. Noncopyable, so its memory has exactly one owner.
public struct FrameBuilder: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var count: Int

    public init(capacity: Int = 128) {
        let size = Swift.max(capacity, 32)
        base = .allocate(capacity: size)
        self.capacity = size
        count = Limits.headerBytes
    }

    deinit {
        base.deallocate()
    }

    /// Bytes written so far, the length prefix included.
    public var byteCount: Int { count }

    @inline(__always)
    private mutating func reserve(_ n: Int) {
        if count + n > capacity { grow(count + n) }
    }

    private mutating func grow(_ needed: Int) {
        var size = capacity * 2
        while size < needed { size *= 2 }
        let bigger = UnsafeMutablePointer<UInt8>.allocate(capacity: size)
        bigger.update(from: base, count: count)
        base.deallocate()
        base = bigger
        capacity = size
    }

    @inline(__always)
    private mutating func write(_ source: UnsafePointer<UInt8>, _ n: Int) {
        reserve(n)
        (base + count).update(from: source, count: n)
        count += n
    }

    @inline(__always)
    public mutating func byte(_ b: UInt8) {
        reserve(1)
        base[count] = b
        count += 1
    }

    @inline(__always)
    public mutating func literal(_ text: StaticString) {
        write(text.utf8Start, text.utf8CodeUnitCount)
    }

    /// A JSON string, escaped per RFC 8259.
    public mutating func string(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            reserve(utf8.count * 6 + 2)
            var p = count
            base[p] = UInt8(ascii: "\"")
            p += 1
            for b in utf8 {
                if b >= 0x20 && b != UInt8(ascii: "\"") && b != UInt8(ascii: "\\") {
                    base[p] = b
                    p += 1
                    continue
                }
                base[p] = UInt8(ascii: "\\")
                switch b {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): base[p + 1] = b; p += 2
                case 0x0A: base[p + 1] = UInt8(ascii: "n"); p += 2
                case 0x0D: base[p + 1] = UInt8(ascii: "r"); p += 2
                case 0x09: base[p + 1] = UInt8(ascii: "t"); p += 2
                case 0x08: base[p + 1] = UInt8(ascii: "b"); p += 2
                case 0x0C: base[p + 1] = UInt8(ascii: "f"); p += 2
                default:
                    let hex: StaticString = "0123456789abcdef"
                    base[p + 1] = UInt8(ascii: "u")
                    base[p + 2] = 0x30
                    base[p + 3] = 0x30
                    base[p + 4] = hex.utf8Start[Int(b >> 4)]
                    base[p + 5] = hex.utf8Start[Int(b & 0xF)]
                    p += 6
                }
            }
            base[p] = UInt8(ascii: "\"")
            count = p + 1
        }
    }

    public mutating func int(_ value: Int64) {
        reserve(20)
        var magnitude = value.magnitude
        if value < 0 {
            base[count] = UInt8(ascii: "-")
            count += 1
        }
        if magnitude < 10 {
            base[count] = UInt8(truncatingIfNeeded: magnitude) &+ 0x30
            count += 1
            return
        }
        var digits = 0
        var probe = magnitude
        while probe > 0 { digits += 1; probe /= 10 }
        var p = count + digits - 1
        while magnitude > 0 {
            base[p] = UInt8(truncatingIfNeeded: magnitude % 10) &+ 0x30
            magnitude /= 10
            p -= 1
        }
        count += digits
    }

    public mutating func raw(_ value: [UInt8]) {
        value.withUnsafeBufferPointer { buffer in
            if let start = buffer.baseAddress { write(start, buffer.count) }
        }
    }

    public mutating func raw(_ value: UnsafeRawBufferPointer) {
        guard let start = value.baseAddress else { return }
        write(start.assumingMemoryBound(to: UInt8.self), value.count)
    }

    /// UTF-8 bytes of text written as they are (for text known to be valid JSON).
    public mutating func rawText(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            if let start = utf8.baseAddress { write(start, utf8.count) }
        }
    }

    public mutating func value(_ value: JSONValue) {
        raw(value.encoded)
    }

    /// A string, or `null` for nil.
    public mutating func optionalString(_ text: String?) {
        if let text { string(text) } else { literal("null") }
    }

    /// Raw JSON, or `null` for nil.
    public mutating func optionalRaw(_ value: [UInt8]?) {
        if let value { raw(value) } else { literal("null") }
    }

    /// Patches the length prefix and returns the frame.
    public consuming func finish() -> [UInt8] {
        let n = UInt32(count - Limits.headerBytes)
        base[0] = UInt8(truncatingIfNeeded: n >> 24)
        base[1] = UInt8(truncatingIfNeeded: n >> 16)
        base[2] = UInt8(truncatingIfNeeded: n >> 8)
        base[3] = UInt8(truncatingIfNeeded: n)
        let total = count
        let source = base
        return [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
            buffer.baseAddress!.update(from: source, count: total)
            initialized = total
        }
    }
}
