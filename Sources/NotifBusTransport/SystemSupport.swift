// Small system facts the transport needs: the monotonic clock, logging to stderr with a
// connection id, errno text, and reading a descriptor to its end (which the CLI uses too).
// Nothing here keeps state.
import Glibc

/// Monotonic nanoseconds, the broker core's notion of time.
@inline(__always)
func monotonicNow() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// The wall clock in milliseconds since 1970: where the ages of idempotency keys start.
func wallClockMs() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) &* 1000 &+ Int64(ts.tv_nsec / 1_000_000)
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

/// The bytes of `fd` up to its end, read in 64 KiB chunks (EINTR retried); nil when a read
/// fails, with `errno` as that read left it.
public func readAll(_ fd: Int32) -> [UInt8]? {
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            return nil
        }
        if n == 0 { return out }
        out.append(contentsOf: chunk[0..<n])
    }
}

/// Creates `path` as a folder with mode 0700, or leaves an existing one alone; false (with
/// `errno` set) when it cannot be created. The mode is set with `chmod` after `mkdir`, so it
/// does not depend on the umask, which `ListeningSocket.open` narrows while it binds and which
/// another thread of the same process may see at that moment.
func makePrivateFolder(_ path: String) -> Bool {
    if mkdir(path, 0o700) == 0 { return chmod(path, 0o700) == 0 }
    return errno == EEXIST
}
