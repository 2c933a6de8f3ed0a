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
