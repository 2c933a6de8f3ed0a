// Writing to stdout and stderr from the CLI without Glibc's global FILE pointers, which
// strict concurrency forbids. stdout is flushed per line so pipes see events at once.
import Glibc
import NotifBusTransport

enum Output {
    static func line(_ text: String) {
        write(fd: 1, text + "\n")
    }

    static func error(_ text: String) {
        write(fd: 2, text + "\n")
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

/// Number formatting without Foundation.
enum Format {
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

/// Whole files and stdin, read without Foundation.
enum Input {
    /// The bytes of `path`, or of stdin for `-`; throws with errno's text.
    static func readAll(_ path: String) throws -> [UInt8] {
        let fd = path == "-" ? 0 : open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CommandError("cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { if fd != 0 { close(fd) } }
        guard let bytes = NotifBusTransport.readAll(fd) else {
            throw CommandError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        return bytes
    }
}
