// The frame both MailClick programs run in: options parsed or a usage error, one broker
// connection, and a life bounded by --run-for, SIGTERM or the broker's departure. It knows
// nothing of mail or clicks; each program's own types do that.
import Glibc
import NotifBusClient

/// A program's command-line options, as the frame needs them.
public protocol ExampleOptions: Sendable {
    /// The text `--help` prints.
    static var usage: String { get }
    /// Parses the arguments after the program name.
    static func parse(_ args: [String]) throws(OptionError) -> Self
    /// `--help` was given.
    var help: Bool { get }
}

/// A bad command line: the message the program prints before exiting with status 2.
public struct OptionError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) { self.description = description }

    /// Milliseconds from a number of seconds given to `flag`: above 0 (or from 0, when
    /// `zeroAllowed`) and at most `maxMs`, so that no wait is unbounded or negative.
    public static func milliseconds(_ text: String, for flag: String, zeroAllowed: Bool, maxMs: Int64) throws(OptionError) -> Int64 {
        guard let seconds = Double(text), zeroAllowed ? seconds >= 0 : seconds > 0, seconds * 1000 <= Double(maxMs) else {
            throw OptionError("\(flag) needs a number of seconds from 0 to \(maxMs / 1000), not '\(text)'")
        }
        return Int64((seconds * 1000).rounded())
    }
}

/// One MailClick process. Exit status: 0 done, 1 broker trouble, 2 bad usage.
public struct ExampleProgram: Sendable {
    /// The program's name: the prefix of its error lines and its client name at the broker.
    public let name: String

    public init(name: String) { self.name = name }

    /// The options of this process's command line; prints the usage and exits 0 for
    /// `--help`, exits 2 on a bad flag.
    public func options<Options: ExampleOptions>(_ type: Options.Type) -> Options {
        let options: Options
        do {
            options = try Options.parse(Array(CommandLine.arguments.dropFirst()))
        } catch {
            Console.error("\(name): \(error); see --help")
            exit(2)
        }
        if options.help {
            Console.line(Options.usage)
            exit(0)
        }
        return options
    }

    /// Connects to the broker (the socket from NOTIFBUS_SOCKET, as for every client); exits
    /// 1 when it cannot.
    public func connect() async -> NotifBusConnection {
        do {
            return try await NotifBusConnection.connect(name: name)
        } catch {
            fail("", error)
        }
    }

    /// Prints `name: what: error` on standard error and exits 1.
    public func fail(_ what: String, _ error: any Error) -> Never {
        Console.error(what.isEmpty ? "\(name): \(error)" : "\(name): \(what): \(error)")
        exit(1)
    }

    /// Serves until `runForMs` has passed (prints `closing`, closes, exits 0) or the
    /// connection to the broker is lost (exits 1).
    public func serve(_ bus: NotifBusConnection, runForMs: Int64, closing: String) async -> Never {
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(runForMs)
        while bus.isOpen && clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(100))
        }
        if bus.isOpen {
            Console.line(closing)
            bus.close()
            exit(0)
        }
        Console.error("\(name): the connection to the broker was lost")
        exit(1)
    }
}
