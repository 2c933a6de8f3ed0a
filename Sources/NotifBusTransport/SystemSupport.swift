// Small system facts the transport needs: the monotonic clock, logging to stderr with a
// connection id, and errno text. Nothing here keeps state.
import Glibc

/// Monotonic nanoseconds, the broker core's notion of time.
@inline(__always)
func monotonicNow() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// Writes one line to stderr. Glibc's `stderr` global is off limits under strict
/// concurrency, so this writes to descriptor 2 directly.
public func logLine(_ text: String) {
    var line = text
    line.append("\n")
    line.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let n = write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if n <= 0 {
                if n < 0 && errno == EINTR { continue }
                return
            }
            offset += n
        }
    }
}

func errnoText(_ code: Int32) -> String {
    String(cString: strerror(code))
}

/// A failed system call, with errno and what it was doing.
public struct SystemError: Error, CustomStringConvertible {
    public let operation: String
    public let code: Int32

    public init(_ operation: String, code: Int32 = errno) {
        self.operation = operation
        self.code = code
    }

    public var description: String { "\(operation): \(errnoText(code)) (errno \(code))" }
}
