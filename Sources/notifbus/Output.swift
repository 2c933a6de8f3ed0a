// Writing to stdout and stderr from the CLI without Glibc's global FILE pointers, which
// strict concurrency forbids. stdout is flushed per line so pipes see events at once.
import Glibc

enum Output {
    static func line(_ text: String) {
        write(fd: 1, text + "\n")
    }

    static func error(_ text: String) {
        write(fd: 2, text + "\n")
    }

    /// A JSON value on stdout, on one line or, with `pretty` (`--json=pretty`), indented.
    static func json(_ compact: String, pretty: Bool) {
        line(pretty ? Format.prettyJSON(compact) : compact)
    }

    static func write(fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if n <= 0 {
                    if n < 0 && errno == EINTR { continue }
                    return
                }
                offset += n
            }
        }
    }
}

/// Number and JSON formatting without Foundation.
enum Format {
    /// Compact JSON text laid out with two-space indents, one member or element per line,
    /// `"key": value`, empty objects and arrays kept as `{}` and `[]`. One pass over the
    /// bytes with a depth count: no recursion, however deep the value.
    static func prettyJSON(_ compact: String) -> String {
        let bytes = Array(compact.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        var depth = 0
        var inString = false
        var escaped = false
        func newline() {
            out.append(UInt8(ascii: "\n"))
            out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * depth))
        }
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            i += 1
            if inString {
                out.append(byte)
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                inString = true
                out.append(byte)
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                out.append(byte)
                let close = byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                if i < bytes.count && bytes[i] == close {
                    out.append(close)
                    i += 1
                } else {
                    depth += 1
                    newline()
                }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth = max(0, depth - 1)
                newline()
                out.append(byte)
            case UInt8(ascii: ","):
                out.append(byte)
                newline()
            case UInt8(ascii: ":"):
                out.append(contentsOf: [UInt8(ascii: ":"), UInt8(ascii: " ")])
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                break
            default:
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `value` with exactly `digits` digits after the point, rounded half away from zero.
    static func fixed(_ value: Double, digits: Int) -> String {
        guard value.isFinite else { return String(value) }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        let whole = Int64(scaled / scale)
        let fraction = Int64(scaled) - whole * Int64(scale)
        var text = (value < 0 && scaled > 0 ? "-" : "") + String(whole)
        if digits > 0 {
            let f = String(fraction)
            text += "." + String(repeating: "0", count: digits - f.count) + f
        }
        return text
    }
}
