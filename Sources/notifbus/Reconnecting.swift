// Long-running subcommands (observe, handle, monitor) that outlive the broker: they
// reconnect unless --no-reconnect is given, and print one stderr line for each loss and
// each return. Short requests (ping, post, ...) never reconnect.
import NotifBusClient

extension CLI {
    /// The switch that turns reconnection off.
    static let noReconnect = "no-reconnect"

    /// The usage lines the long-running subcommands share.
    static let reconnectUsage = """
        When the broker restarts, it reconnects and registers again, printing one line on
        stderr for each loss and return; --no-reconnect exits instead.
        """

    /// Connects for a long-running subcommand and reports connection states on stderr.
    static func connectLasting(_ args: Arguments, name: String) async throws -> NotifBusConnection {
        let bus = try await connect(args, name: name, reconnect: args.has(noReconnect) ? .never : .always)
        let states = bus.connectionStates()
        Task.detached {
            for await state in states {
                switch state {
                case .disconnected(let reason):
                    Output.error("notifbus: disconnected (\(reason)); reconnecting")
                case .reconnected(let ids, let superseded):
                    let moved = ids.filter { $0.key != $0.value }.sorted { $0.key < $1.key }.map { "\($0.key) is now \($0.value)" }.joined(
                        separator: ", ")
                    let lost = superseded.isEmpty ? "" : "; taken meanwhile: \(superseded.joined(separator: ", "))"
                    Output.error("notifbus: reconnected as \(bus.clientID)\(moved.isEmpty ? "" : ": \(moved)")\(lost)")
                }
            }
        }
        return bus
    }

    /// Waits until the connection is closed for good (not while it reconnects).
    static func waitLasting(_ bus: NotifBusConnection) async {
        _ = await bus.waitForClose()
    }
}
