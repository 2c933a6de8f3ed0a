// `notifbus introspect`: what is on the bus by name, from the broker's `status` and
// `getCategories` replies: events with their observers in chain order, channels with their
// handlers, slots and categories, as a tree or as JSON. It reads; it never changes the bus.
import NotifBusClient
import NotifBusProtocol

enum IntrospectCommand {
    static let command = Subcommand(
        name: "introspect",
        summary: "show events, channels, slots and categories by name",
        usage: """
            Usage: notifbus introspect [--socket PATH] [--json]

            Shows what is on the bus by name: each event name with its observers in chain
            order (lower priority first, then subscription order), each channel with its
            methods and their handlers, the slots that hold a value and the categories in
            force. --json prints the same as one object:
              {"server":…,"events":{NAME:[{"observer","client","name","priority","key"}]},
               "channels":{CHANNEL:{METHOD|"*":{"handler","client","name"}}},
               "slots":[…],"categories":[…]}
            A channel's "*" entry is its whole-channel handler.
            """,
        valueFlags: [], switchFlags: [],
        run: { args in
            try CLI.expectPositionals(args, 0...0, "no arguments")
            let bus = try await CLI.connect(args, name: "notifbus-introspect")
            defer { bus.close() }
            let status = try await bus.status()
            let categories = try await bus.request(Op.getCategories)["categories"]?.arrayValue ?? []
            let view = BusView(status: status, categories: categories)
            if args.has("json") { Output.json(view.json.text, pretty: args.prettyJSON) } else { Output.line(view.tree) }
            return 0
        })
}

/// The bus by name, built from one `status` reply and the category set.
struct BusView {
    /// One observer of an event, in chain order.
    struct Observer {
        let id: String, client: String, clientName: String?, priority: Int64, key: String?
    }

    /// The handler of one method (or `"*"`, the whole channel).
    struct Handler {
        let id: String, client: String, clientName: String?
    }

    let server: String
    let events: [(name: String, observers: [Observer])]
    let channels: [(name: String, methods: [(method: String, handler: Handler)])]
    let slots: [String]
    let categories: [JSONValue]

    init(status: BrokerStatus, categories: [JSONValue]) {
        server = status.server
        var names: [String: String] = [:]
        for c in status.clients {
            if let id = c["client"]?.stringValue, let name = c["name"]?.stringValue { names[id] = name }
        }
        // The broker lists observers in chain order already; the sort keeps that promise
        // here too (priority, then the subscription order the numeric id records).
        let ordered = status.observers.sorted {
            let a = ($0["priority"]?.intValue ?? 0, BusView.number($0["observer"]?.stringValue))
            let b = ($1["priority"]?.intValue ?? 0, BusView.number($1["observer"]?.stringValue))
            return a < b
        }
        var byEvent: [String: [Observer]] = [:]
        for o in ordered {
            let client = o["client"]?.stringValue ?? ""
            let observer = Observer(
                id: o["observer"]?.stringValue ?? "", client: client, clientName: names[client],
                priority: o["priority"]?.intValue ?? 0, key: o["key"]?.stringValue)
            for event in o["events"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
                byEvent[event, default: []].append(observer)
            }
        }
        events = byEvent.keys.sorted().map { ($0, byEvent[$0]!) }
        var byChannel: [String: [(method: String, handler: Handler)]] = [:]
        for h in status.handlers {
            let client = h["client"]?.stringValue ?? ""
            let handler = Handler(id: h["handler"]?.stringValue ?? "", client: client, clientName: names[client])
            byChannel[h["channel"]?.stringValue ?? "", default: []].append((h["method"]?.stringValue ?? "*", handler))
        }
        channels = byChannel.keys.sorted().map { name in (name, byChannel[name]!.sorted { $0.method < $1.method }) }
        slots = status.slots
        self.categories = categories
    }

    static func number(_ id: String?) -> Int64 { Int64(id?.dropFirst() ?? "") ?? 0 }

    var json: JSONValue {
        func named(_ name: String?) -> JSONValue { name.map { .string($0) } ?? .null }
        var eventObject: [String: JSONValue] = [:]
        for (name, observers) in events {
            eventObject[name] = .array(
                observers.map {
                    .object([
                        "observer": .string($0.id), "client": .string($0.client), "name": named($0.clientName),
                        "priority": .integer($0.priority), "key": named($0.key),
                    ])
                })
        }
        var channelObject: [String: JSONValue] = [:]
        for (name, methods) in channels {
            var m: [String: JSONValue] = [:]
            for (method, h) in methods {
                m[method] = .object(["handler": .string(h.id), "client": .string(h.client), "name": named(h.clientName)])
            }
            channelObject[name] = .object(m)
        }
        return .object([
            "server": .string(server), "events": .object(eventObject), "channels": .object(channelObject),
            "slots": .array(slots.map { .string($0) }), "categories": .array(categories),
        ])
    }

    var tree: String {
        func who(_ client: String, _ name: String?) -> String { name.map { "\(client) \($0)" } ?? client }
        var lines = [server]
        lines.append("├─ events" + (events.isEmpty ? " (none observed)" : ""))
        for (i, (name, observers)) in events.enumerated() {
            let last = i == events.count - 1
            lines.append("│  \(last ? "└─" : "├─") \(name)")
            for (j, o) in observers.enumerated() {
                let branch = j == observers.count - 1 ? "└─" : "├─"
                let key = o.key.map { " key \($0)" } ?? ""
                lines.append("│  \(last ? "   " : "│  ") \(branch) \(o.id) priority \(o.priority)\(key) (\(who(o.client, o.clientName)))")
            }
        }
        lines.append("├─ channels" + (channels.isEmpty ? " (none handled)" : ""))
        for (i, (name, methods)) in channels.enumerated() {
            let last = i == channels.count - 1
            lines.append("│  \(last ? "└─" : "├─") \(name)")
            for (j, (method, h)) in methods.enumerated() {
                let branch = j == methods.count - 1 ? "└─" : "├─"
                let label = method == "*" ? "* (whole channel)" : method
                lines.append("│  \(last ? "   " : "│  ") \(branch) \(label): \(h.id) (\(who(h.client, h.clientName)))")
            }
        }
        lines.append("├─ slots" + (slots.isEmpty ? " (all empty)" : ""))
        for (i, slot) in slots.enumerated() { lines.append("│  \(i == slots.count - 1 ? "└─" : "├─") \(slot)") }
        lines.append("└─ categories" + (categories.isEmpty ? " (none set)" : ""))
        for (i, category) in categories.enumerated() {
            let last = i == categories.count - 1
            lines.append("   \(last ? "└─" : "├─") \(category["identifier"]?.stringValue ?? "?")")
            let actions = category["actions"]?.arrayValue ?? []
            for (j, action) in actions.enumerated() {
                let branch = j == actions.count - 1 ? "└─" : "├─"
                var label = action["identifier"]?.stringValue ?? "?"
                if action["textInput"] != nil { label += " (text input)" }
                let options = action["options"]?.arrayValue?.compactMap(\.stringValue) ?? []
                if !options.isEmpty { label += " [\(options.joined(separator: ", "))]" }
                lines.append("   \(last ? "   " : "│  ") \(branch) \(label)")
            }
        }
        return lines.joined(separator: "\n")
    }
}
