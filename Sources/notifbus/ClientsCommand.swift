// The connected clients: `notifbus list` prints one line each, as `busctl list` lists a bus's
// peers, and `notifbus status CLIENT` one client with what it holds. Both read the broker's
// status reply and render it; they ask the broker nothing else.
import NotifBusClient
import NotifBusProtocol

enum ClientsCommand {
    static let list = Subcommand(
        name: "list",
        summary: "list the connected clients",
        usage: """
            Usage: notifbus list [--socket PATH] [--json]

            Prints one line per connected client (this command's own connection among them):
            its id, name, pid and uid, the observers and handlers it holds, its posts waiting
            in the queue, and 'unresponsive' while its observers are skipped (a hop of it
            timed out and it has sent nothing since). --json prints the broker's client
            objects as a JSON array. 'notifbus status CLIENT' shows one client in full.
            """,
        valueFlags: [], switchFlags: [],
        run: { args in
            try CLI.expectPositionals(args, 0...0, "no arguments")
            let bus = try await CLI.connect(args, name: "notifbus-list")
            defer { bus.close() }
            let status = try await bus.status()
            if args.has("json") {
                Output.json(JSONValue.array(status.clients).text, pretty: args.prettyJSON)
            } else {
                Output.line(table(status))
            }
            return 0
        })

    static func table(_ s: BrokerStatus) -> String {
        let pad = StatusTable.pad
        var lines = [
            pad("CLIENT", 7) + pad("NAME", 21) + pad("PID", 9) + pad("UID", 7) + pad("OBSERVERS", 10) + pad("HANDLERS", 9)
                + pad("QUEUED", 7) + "STATE"
        ]
        for c in s.clients {
            let id = c["client"]?.stringValue ?? ""
            let observers = s.observers.filter { $0["client"]?.stringValue == id }.count
            let handlers = s.handlers.filter { $0["client"]?.stringValue == id }.count
            lines.append(
                pad(id, 7) + pad(c["name"]?.stringValue ?? "-", 21) + pad(String(c["pid"]?.intValue ?? 0), 9)
                    + pad(String(c["uid"]?.intValue ?? 0), 7) + pad(String(observers), 10) + pad(String(handlers), 9)
                    + pad(String(c["queued"]?.intValue ?? 0), 7) + (c["unresponsive"]?.boolValue == true ? "unresponsive" : "-"))
        }
        return lines.joined(separator: "\n")
    }

    /// `status CLIENT`: the client named by its id (`c7`), its name or its pid.
    static func showOne(_ selector: String, _ s: BrokerStatus, _ args: Arguments) throws {
        let client = try find(selector, in: s.clients)
        let id = client["client"]?.stringValue ?? ""
        let observers = s.observers.filter { $0["client"]?.stringValue == id }
        let handlers = s.handlers.filter { $0["client"]?.stringValue == id }
        if args.has("json") {
            let one = JSONValue.object(["client": client, "observers": .array(observers), "handlers": .array(handlers)])
            Output.json(one.text, pretty: args.prettyJSON)
            return
        }
        let pad = StatusTable.pad
        var lines = [
            "client    \(id) (\(client["name"]?.stringValue ?? "no name")), pid \(client["pid"]?.intValue ?? 0), uid \(client["uid"]?.intValue ?? 0)",
            "queue     \(client["queued"]?.intValue ?? 0) post(s) waiting",
            "state     "
                + (client["unresponsive"]?.boolValue == true
                    ? "unresponsive: its observers are skipped until it sends a frame" : "responsive"),
            "observers \(observers.count)",
        ]
        for o in observers {
            let events = o["events"]?.arrayValue?.compactMap(\.stringValue).joined(separator: ",") ?? ""
            lines.append(
                "  \(pad(o["observer"]?.stringValue ?? "", 6)) priority \(pad(String(o["priority"]?.intValue ?? 0), 6)) key \(pad(o["key"]?.stringValue ?? "-", 12)) \(events)"
            )
        }
        lines.append("handlers  \(handlers.count)")
        for h in handlers {
            lines.append(
                "  \(pad(h["handler"]?.stringValue ?? "", 6)) \(h["channel"]?.stringValue ?? "") \(h["method"]?.stringValue ?? "(whole channel)")")
        }
        Output.line(lines.joined(separator: "\n"))
    }

    /// The one client `selector` names: an id first, then a name, then a pid.
    static func find(_ selector: String, in clients: [JSONValue]) throws -> JSONValue {
        if let byID = clients.first(where: { $0["client"]?.stringValue == selector }) { return byID }
        let named = clients.filter { $0["name"]?.stringValue == selector }
        if named.count == 1 { return named[0] }
        if named.count > 1 {
            let ids = named.map { "\($0["client"]?.stringValue ?? "?") (pid \($0["pid"]?.intValue ?? 0))" }
            throw CommandError("\(named.count) clients are named '\(selector)': \(ids.joined(separator: ", ")); give one's id")
        }
        if let pid = Int64(selector), let byPID = clients.first(where: { $0["pid"]?.intValue == pid }) { return byPID }
        throw CommandError("no connected client is '\(selector)' (an id such as c7, a name or a pid; see 'notifbus list')")
    }
}
