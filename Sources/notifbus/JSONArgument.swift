// JSON given on the command line three ways: the argument's own text, `-` for standard
// input, or `@FILE` for a file's contents, for values beyond the shell's argument limit.
// Text is parsed at once (a mistake is a usage error); standard input and files are opened
// before connecting and read once connected, no further than the broker's maxFrame, the
// bound of every frame it reads, so that nothing larger is ever held in memory.
import Glibc
import NotifBusProtocol

struct JSONArgument {
    private enum Source {
        case text(JSONValue)
        case descriptor(Int32, name: String)
    }

    private let source: Source
    /// What the value is, for messages: `the payload`, `--user-info`.
    let what: String

    /// `text` as JSON, `-` for standard input, `@FILE` for a file.
    init(_ text: String, what: String) throws {
        self.what = what
        if text == "-" {
            source = .descriptor(0, name: "standard input")
        } else if text.hasPrefix("@") {
            source = try JSONArgument.open(String(text.dropFirst()), what: what)
        } else {
            do {
                source = .text(try JSONValue(parsing: text))
            } catch {
                throw UsageError("\(what) is not valid JSON: \(error)")
            }
        }
    }

    /// The value when it was given as text (known before connecting); nil for a file or stdin.
    var text: JSONValue? {
        if case .text(let value) = source { return value }
        return nil
    }

    /// A file's JSON, `-` for standard input (as `categories set FILE|-` takes it).
    init(file: String, what: String) throws {
        self.what = what
        source = file == "-" ? .descriptor(0, name: "standard input") : try JSONArgument.open(file, what: what)
    }

    private static func open(_ path: String, what: String) throws -> Source {
        guard !path.isEmpty else { throw UsageError("\(what): '@' needs a file name (@FILE)") }
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CommandError("cannot read \(path): \(String(cString: strerror(errno)))") }
        return .descriptor(fd, name: path)
    }

    /// The value. Standard input or the file is read here, to its end, and refused once it
    /// holds more than `limit` bytes (the broker's maxFrame: a frame holding it could not be
    /// sent).
    func value(limit: Int) throws -> JSONValue {
        guard case .descriptor(let fd, let name) = source else { return text! }
        defer { if fd != 0 { close(fd) } }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw CommandError("cannot read \(name): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            guard bytes.count + n <= limit else {
                throw CommandError(
                    "\(what) from \(name) is larger than the broker takes: a frame is at most \(limit) bytes "
                        + "(its maxFrame; 'notifbus broker --max-frame BYTES' raises it)")
            }
            bytes.append(contentsOf: chunk[0..<n])
        }
        do {
            return try JSONValue(parsing: bytes)
        } catch {
            throw CommandError("\(what) from \(name) is not valid JSON: \(error)")
        }
    }
}
