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
        ProbeCommands.ping, ProbeCommands.post, ProbeCommands.observe, ProbeCommands.status, ProbeCommands.monitor,
        ChannelCommands.invoke, ChannelCommands.handle,
        ChannelCommands.put, ChannelCommands.take, ChannelCommands.peek,
        ProfileCommands.categories, ProfileCommands.notify, ProfileCommands.click,
    ]

    static let overview = """
        notifbus: one notification delegate shared across processes.

        Usage: notifbus <command> [options]

        Commands:
        \(subcommands.map { "  " + StatusTable.pad($0.name, 12) + $0.summary }.joined(separator: "\n"))
        \(SiblingTool.tools.map { "  " + StatusTable.pad($0.command, 12) + $0.summary }.joined(separator: "\n"))

        Every command takes --socket PATH (default: $NOTIFBUS_SOCKET, then
        $XDG_RUNTIME_DIR/notifbus.sock, then /tmp/notifbus-$UID/notifbus.sock) and --help.
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
            Output.line(overview)
            return .exit(0)
        }
        if first == "--version" {
            Output.line(BrokerCommand.serverName)
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
            let parsed = try Arguments(Array(args.dropFirst()), valueFlags: command.valueFlags.union(["socket"]),
                                       switchFlags: command.switchFlags)
            if parsed.has("help") {
                Output.line(command.usage)
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

    /// Connects to the broker named by `--socket` or the environment.
    static func connect(_ args: Arguments, name: String) async throws -> NotifBusConnection {
        do {
            return try await NotifBusConnection.connect(socket: args.value("socket"), name: name)
        } catch {
            throw CommandError("\(error)")
        }
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
