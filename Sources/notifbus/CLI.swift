// The subcommand table and the shared plumbing: help text, usage errors, connecting.
import NotifBusClient
import NotifBusProtocol

/// One `notifbus` subcommand.
struct Subcommand: Sendable {
    let name: String
    let summary: String
    let usage: String
    let valueFlags: Set<String>
    let switchFlags: Set<String>
    let run: @Sendable (Arguments) async throws -> Int32
    /// Set for subcommands that run on the main thread without the concurrency runtime
    /// (the broker: its event loop owns the thread).
    var runOnMainThread: (@Sendable (Arguments) throws -> Int32)? = nil
}

enum CLI {
    static let subcommands: [Subcommand] = [
        BrokerCommand.command,
        ProbeCommands.ping, ProbeCommands.post, ProbeCommands.observe, ProbeCommands.status, ClientsCommand.list,
        ProbeCommands.monitor,
        ChannelCommands.invoke, ChannelCommands.handle,
        ChannelCommands.put, ChannelCommands.take, ChannelCommands.peek,
        ProfileCommands.categories, ProfileCommands.notify, ProfileCommands.click,
        IntrospectCommand.command, CompletionCommand.command, ManPageCommand.command,
    ]

    /// The version `--version` prints, in the usual `NAME VERSION` shape.
    static let version = "notifbus 0.1.0"

    /// Subcommands that never talk to a broker: they take neither `--timeout` nor `--json`.
    static let offlineCommands: Set<String> = ["broker", "completion", "manpage"]

    /// Options every subcommand that talks to the broker accepts, added to its usage text.
    static let commonOptionsHelp = """

        Common options:
          --socket PATH   the broker's socket (see 'notifbus --help' for the default)
          --timeout DUR   bound on connecting, hello and each reply (default 10s; post, notify,
                          click and invoke wait up to 60s for the chain or the handler)
          --json[=short|pretty], -j
                          print JSON only: one line per value, or indented (pretty); -j is
                          pretty on a terminal and short otherwise
          --help          print this help

        DUR is a number followed by ms, s or m (250ms, 2s, 1m), or plain seconds (1.5).
        """

    /// How the commands that take a JSON value say it may come from stdin or a file.
    static let jsonInputHelp = """
        JSON may also be - (read from standard input) or @FILE (read from FILE), of at most
        the broker's --max-frame bytes.
        """

    /// Default bound on connecting and `hello`, and on replies that need no other client.
    static let defaultTimeout: Duration = .seconds(10)
    /// Default bound on replies that wait for observers or a handler (a chain of hops).
    static let defaultChainTimeout: Duration = .seconds(60)

    /// The usage text `--help` and `help CMD` print.
    static func help(for command: Subcommand) -> String {
        offlineCommands.contains(command.name) ? command.usage : command.usage + "\n" + commonOptionsHelp
    }

    /// Flags a subcommand accepts: its own and the common ones.
    static func flags(of command: Subcommand) -> (values: Set<String>, switches: Set<String>) {
        if offlineCommands.contains(command.name) { return (command.valueFlags.union(["socket"]), command.switchFlags) }
        return (command.valueFlags.union(["socket", "timeout"]), command.switchFlags.union(["json"]))
    }

    static let overview = """
        notifbus: one notification delegate shared across processes.

        Usage: notifbus <command> [options]

        Commands:
        \(subcommands.map { "  " + StatusTable.pad($0.name, 12) + $0.summary }.joined(separator: "\n"))
        \(SiblingTool.tools.map { "  " + StatusTable.pad($0.command, 12) + $0.summary }.joined(separator: "\n"))

        Every command takes --socket PATH (default: $NOTIFBUS_SOCKET, then
        $XDG_RUNTIME_DIR/notifbus.sock, then /tmp/notifbus-$UID/notifbus.sock) and --help;
        every command that talks to the broker also takes --timeout DUR and --json (-j).
        'notifbus help CMD' prints CMD's help; 'notifbus --version' the version.
        Exit status: 0 success, 1 error, 2 bad usage.
        """

    /// What the command line asks for: an immediate exit status, or a subcommand to run.
    enum Plan {
        case exit(Int32)
        case run(Subcommand, Arguments)
    }

    /// Parses the command line; help, version and usage errors end here.
    static func plan(_ args: [String]) -> Plan {
        guard let first = args.first else {
            Output.error(overview)
            return .exit(2)
        }
        if first == "--help" || first == "-h" || first == "help" {
            guard args.count > 1 else {
                Output.line(overview)
                return .exit(0)
            }
            guard args.count == 2, let command = subcommands.first(where: { $0.name == args[1] }) else {
                if args.count == 2, SiblingTool.tools.contains(where: { $0.command == args[1] }) {
                    return plan([args[1], "--help"])
                }
                Output.error("notifbus help: unknown command '\(args.dropFirst().joined(separator: " "))'; see 'notifbus --help'")
                return .exit(2)
            }
            Output.line(help(for: command))
            return .exit(0)
        }
        if first == "--version" || first == "-V" || first == "version" {
            Output.line(version)
            return .exit(0)
        }
        if let tool = SiblingTool.tools.first(where: { $0.command == first }) {
            return .exit(SiblingTool.exec(tool.executable, command: tool.command, arguments: Array(args.dropFirst())))
        }
        guard let command = subcommands.first(where: { $0.name == first }) else {
            Output.error("notifbus: unknown command '\(first)'; see 'notifbus --help'")
            return .exit(2)
        }
        do {
            let accepted = flags(of: command)
            let parsed = try Arguments(Array(args.dropFirst()), valueFlags: accepted.values, switchFlags: accepted.switches)
            if parsed.has("help") {
                Output.line(help(for: command))
                return .exit(0)
            }
            return .run(command, parsed)
        } catch {
            Output.error("notifbus \(command.name): \(error.message)")
            return .exit(2)
        }
    }

    /// Maps what a subcommand threw to its exit status and one-line message.
    static func status(of error: any Error, in command: Subcommand) -> Int32 {
        switch error {
        case let error as UsageError:
            Output.error("notifbus \(command.name): \(error.message)")
            return 2
        case let error as CommandError:
            Output.error("notifbus \(command.name): \(error.message)")
            return 1
        default:
            Output.error("notifbus \(command.name): \(error)")
            return 1
        }
    }

    /// Connects to the broker named by `--socket` or the environment; `--timeout` bounds
    /// connecting and `hello`, and becomes the connection's request timeout.
    /// With `retryingFor` (milliseconds), a socket that cannot be reached yet is tried again
    /// until that much time has passed.
    static func connect(
        _ args: Arguments, name: String, retryingFor retryMs: Int64? = nil,
        reconnect: ReconnectPolicy = .never
    ) async throws -> NotifBusConnection {
        let timeout = try args.duration("timeout").map { Duration.milliseconds($0) } ?? defaultTimeout
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(retryMs ?? 0)
        while true {
            do {
                return try await NotifBusConnection.connect(
                    socket: args.value("socket"), name: name, requestTimeout: timeout,
                    reconnect: reconnect)
            } catch {
                if case .connectFailed = error, clock.now < deadline {
                    try? await Task.sleep(for: .milliseconds(50))
                    continue
                }
                throw CommandError(ConnectFailure.describe(error))
            }
        }
    }

    /// The bound on a reply that waits for other clients (a post's chain, a handler).
    static func chainTimeout(_ args: Arguments) throws(UsageError) -> Duration {
        try args.duration("timeout").map { Duration.milliseconds($0) } ?? defaultChainTimeout
    }

    static func expectPositionals(_ args: Arguments, _ range: ClosedRange<Int>, _ usage: String) throws(UsageError) {
        guard range.contains(args.positionals.count) else { throw UsageError("expected \(usage)") }
    }

    /// Waits while `condition` holds, polling; returns when it no longer does.
    static func wait(while condition: @Sendable () -> Bool) async {
        while condition() {
            try? await Task.sleep(for: .milliseconds(50))
        }
    }
}
