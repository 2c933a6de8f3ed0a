// Output and signal handling for the MailClick programs: whole lines written straight to
// the file descriptor, so a pipe sees each one at once, and a clean exit on SIGTERM or
// SIGINT. It must not touch the C library's global FILE pointers, which strict concurrency forbids.
import Dispatch
import Glibc

/// Lines on standard output and standard error, and the exit on a termination signal.
public enum Console {
    /// Writes `text` and a newline to standard output.
    public static func line(_ text: String) { write(fd: 1, text + "\n") }

    /// Writes `text` and a newline to standard error.
    public static func error(_ text: String) { write(fd: 2, text + "\n") }

    private static func write(fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                offset += n
            }
        }
    }

    /// Exits with status 0 on SIGTERM or SIGINT, after printing `farewell` and the signal's
    /// name. The process's connection closes with it, so the broker drops its registrations.
    /// The returned sources must stay alive for as long as the handling should last.
    public static func exitOnTermination(_ farewell: String) -> [any DispatchSourceSignal] {
        [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")].map { number, name in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                Console.line("\(farewell) (\(name))")
                exit(0)
            }
            source.resume()
            return source
        }
    }

    /// Formats milliseconds as seconds for the story: `3 s`, `2.5 s`.
    public static func seconds(_ ms: Int64) -> String {
        ms % 1000 == 0 ? "\(ms / 1000) s" : "\(Double(ms) / 1000) s"
    }
}
