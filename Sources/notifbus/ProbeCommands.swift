// Probe subcommands for observers and introspection: ping, post, observe, status, monitor.
import NotifBusClient
import NotifBusProtocol

/// A counter shared between a handler and the command waiting on it.
final class Counter: @unchecked Sendable {
    private let lock = Lock()
    private var value = 0

    func increment() -> Int {
        lock.withLock {
            value += 1; return value
        }
    }
    var current: Int { lock.withLock { value } }
}

enum ProbeCommands {
    static let ping = Subcommand(
        name: "ping",
        summary: "measure a round trip to the broker",
        usage: """
            Usage: notifbus ping [--socket PATH] [--count N] [--wait DUR] [--json]

            Sends N pings (default 1) and prints each round-trip time. --wait retries
            connecting for up to DUR while the socket is missing or refuses connections, for
            a script that has just started a broker. --json prints one object per ping:
            {"server":…,"client":…,"rttUs":…}.
            """,
        valueFlags: ["count", "wait"], switchFlags: [],
        run: { args in
            try CLI.expectPositionals(args, 0...0, "no arguments")
            let count = try args.integer("count", min: 1, max: 1_000_000) ?? 1
            let wait = try args.duration("wait")
            let bus = try await CLI.connect(args, name: "notifbus-ping", retryingFor: wait)
            defer { bus.close() }
            let pretty = args.prettyJSON
            for _ in 0..<count {
                let rtt = try await bus.ping()
                let us = Double(rtt.components.attoseconds) / 1e12 + Double(rtt.components.seconds) * 1e6
                if args.has("json") {
                    Output.json(
                        JSONValue.object([
                            "server": .string(bus.server), "client": .string(bus.clientID),
                            "rttUs": .double((us * 10).rounded() / 10),
                        ]).text, pretty: pretty)
                } else {
                    Output.line("pong from \(bus.server) (\(bus.clientID)): \(Format.fixed(us, digits: 1)) µs")
                }
            }
            return 0
        })

    static let post = Subcommand(
        name: "post",
        summary: "post an event and print its outcome",
        usage: """
            Usage: notifbus post NAME [JSON|-|@FILE] [--once KEY] [--socket PATH] [--timeout DUR]

            Posts event NAME with the JSON payload (default: none) and prints the result
            (event, outcome, by, value, retained, trace) as JSON. --timeout bounds the wait
            for the whole chain (default 60s).
            \(CLI.jsonInputHelp)
            \(CLI.onceUsage)
            """,
        valueFlags: ["timeout", "once"], switchFlags: [],
        run: { args in
            try CLI.expectPositionals(args, 1...2, "NAME [JSON|-|@FILE]")
            let payload = args.positionals.count == 2 ? try JSONArgument(args.positionals[1], what: "the payload") : nil
            let timeout = try CLI.chainTimeout(args)
            let bus = try await CLI.connect(args, name: "notifbus-post")
            defer { bus.close() }
            let value = try payload?.value(limit: bus.maxFrame) ?? .null
            let result = try await bus.post(args.positionals[0], payload: value, once: args.value("once"), timeout: timeout)
            CLI.noteRepeat(result.isRepeat, args)
            Output.json(result.raw.text, pretty: args.prettyJSON)
            return 0
        })

    static let observe = Subcommand(
        name: "observe",
        summary: "observe events and answer them",
        usage: """
            Usage: notifbus observe NAME... [--socket PATH] [--priority N] [--key K]
                                    [--reply next|complete|stop] [--value JSON]
                                    [--delay DUR] [--count N] [--name CLIENT] [--no-reconnect]

            Subscribes to the named events, prints each event as one JSON line and answers
            it as told (default: next). --priority defaults to \(Limits.defaultPriority) (lower runs
            first). --value is the complete value. --delay waits before answering; --count
            exits after N events. Exits when evicted.
            \(CLI.reconnectUsage)
            """,
        valueFlags: ["priority", "key", "reply", "value", "delay", "count", "name"], switchFlags: [CLI.noReconnect],
        run: { args in try await runObserve(args) })

    static func runObserve(_ args: Arguments) async throws -> Int32 {
        guard !args.positionals.isEmpty else { throw UsageError("expected NAME...") }
        let priority = try args.integer("priority", min: Int64(Int32.min), max: Int64(Int32.max)).map { Int32($0) } ?? Limits.defaultPriority
        let value = try args.value("value").map { text throws(UsageError) in try args.json(text, what: "--value") }
        let reply: ObserverReply
        switch args.value("reply") ?? "next" {
        case "next": reply = .next
        case "stop": reply = .stop
        case "complete": reply = .complete(value)
        case let other: throw UsageError("--reply must be next, complete or stop, not '\(other)'")
        }
        if value != nil && args.value("reply") != "complete" { throw UsageError("--value goes with --reply complete") }
        let delay = try args.duration("delay")
        let limit = try args.integer("count", min: 1)
        let bus = try await CLI.connectLasting(args, name: args.value("name") ?? "notifbus-observe")
        let pretty = args.prettyJSON
        let seen = Counter()
        let evicted = Counter()
        bus.onEvicted = { eviction in
            if case .observer(let id, let by) = eviction {
                Output.error("notifbus: observer \(id) evicted by \(by)")
                _ = evicted.increment()
                bus.close()
            }
        }
        let registration: ObserverRegistration
        do {
            registration = try await bus.addObserver(events: args.positionals, priority: priority, key: args.value("key")) { event in
                Output.json(
                    JSONValue.object([
                        "event": .integer(event.event), "observer": .string(event.observer),
                        "name": .string(event.name), "payload": event.payload,
                    ]).text, pretty: pretty)
                if let delay { try? await Task.sleep(for: .milliseconds(delay)) }
                let n = seen.increment()
                if let limit, n >= limit {
                    Task {
                        try? await Task.sleep(for: .milliseconds(50))
                        bus.close()
                    }
                }
                return reply
            }
        } catch {
            bus.close()
            throw CommandError("\(error)")
        }
        let replacedNote = registration.replaced.isEmpty ? "" : ", replacing \(registration.replaced.joined(separator: ", "))"
        Output.error("notifbus: observer \(registration.id) on \(args.positionals.joined(separator: ",")) at priority \(priority)\(replacedNote)")
        await CLI.waitLasting(bus)
        if evicted.current > 0 { return 0 }
        if let limit, seen.current >= limit { return 0 }
        throw CommandError("connection to the broker lost")
    }

    static let status = Subcommand(
        name: "status",
        summary: "show clients, observers, handlers, queue, slots and counters",
        usage: """
            Usage: notifbus status [CLIENT] [--socket PATH] [--json]

            Prints the broker's state as a table, or the raw reply with --json. With CLIENT
            (an id such as c7, a name or a pid; 'notifbus list' shows them), prints that
            client alone: its pid and uid, its observers and handlers, its waiting posts.
            """,
        valueFlags: [], switchFlags: ["json"],
        run: { args in
            try CLI.expectPositionals(args, 0...1, "no arguments, or CLIENT")
            let bus = try await CLI.connect(args, name: "notifbus-status")
            defer { bus.close() }
            let status = try await bus.status()
            if let selector = args.positionals.first {
                try ClientsCommand.showOne(selector, status, args)
            } else if args.has("json") {
                Output.json(status.raw.text, pretty: args.prettyJSON)
            } else {
                Output.line(StatusTable.render(status))
            }
            return 0
        })

    static let monitor = Subcommand(
        name: "monitor",
        summary: "print every frame the broker exchanges with other clients",
        usage: """
            Usage: notifbus monitor [--socket PATH] [--json] [--count N] [--match RULE]... [--no-reconnect]

            Prints one line per frame, with the local time: '14:51:02.123456 c7 -> {...}' for
            frames the broker read from c7, '... c7 <- {...}' for frames it wrote to c7.
            --json prints the raw 'seen' frames with a "time" field (UTC, ISO 8601).
            --match RULE shows only frames that match: RULE is KEY=VALUE[,KEY=VALUE...],
            all of which must hold, with KEY one of op, client, name (an event's or post's
            name, or one of a subscription's events), channel, method and dir (in or out).
            Repeated, a frame that matches any rule is shown. --count counts shown frames.
            \(CLI.reconnectUsage)
            """,
        valueFlags: ["count", "match"], switchFlags: ["json", CLI.noReconnect],
        run: { args in
            try CLI.expectPositionals(args, 0...0, "no arguments")
            let limit = try args.integer("count", min: 1)
            let json = args.has("json"), pretty = args.prettyJSON
            let filter = try MonitorFilter(args.all("match"))
            let bus = try await CLI.connectLasting(args, name: "notifbus-monitor")
            let seen = Counter()
            try await bus.monitor { frame in
                guard filter.matches(frame) else { return }
                if json {
                    Output.json(
                        JSONValue.object([
                            "op": "seen", "time": .string(Timestamp.utc()), "dir": .string(frame.direction),
                            "client": .string(frame.client), "frame": frame.frame,
                        ]).text, pretty: pretty)
                } else {
                    Output.line("\(Timestamp.local()) \(frame.client) \(frame.direction == "in" ? "->" : "<-") \(frame.frame.text)")
                }
                if let limit, seen.increment() >= limit { bus.close() }
            }
            Output.error("notifbus: monitoring \(bus.server) as \(bus.clientID)")
            await CLI.waitLasting(bus)
            if let limit, seen.current >= limit { return 0 }
            throw CommandError("connection to the broker lost")
        })
}

/// The readable form of `status`.
enum StatusTable {
    static func render(_ s: BrokerStatus) -> String {
        var lines: [String] = []
        lines.append("server    \(s.server), up \(Format.fixed(Double(s.uptimeMs) / 1000, digits: 1)) s")
        lines.append("clients   \(s.clients.count)")
        for c in s.clients {
            let name = c["name"]?.stringValue ?? "-"
            lines.append(
                "  \(pad(c["client"]?.stringValue ?? "", 6)) \(pad(name, 20)) pid \(c["pid"]?.intValue ?? 0)  uid \(c["uid"]?.intValue ?? 0)")
        }
        lines.append("observers \(s.observers.count)")
        for o in s.observers {
            let events = o["events"]?.arrayValue?.compactMap(\.stringValue).joined(separator: ",") ?? ""
            lines.append(
                "  \(pad(o["observer"]?.stringValue ?? "", 6)) \(pad(o["client"]?.stringValue ?? "", 6)) priority \(pad(String(o["priority"]?.intValue ?? 0), 6)) key \(pad(o["key"]?.stringValue ?? "-", 12)) \(events)"
            )
        }
        lines.append("handlers  \(s.handlers.count)")
        for h in s.handlers {
            lines.append(
                "  \(pad(h["handler"]?.stringValue ?? "", 6)) \(pad(h["client"]?.stringValue ?? "", 6)) \(h["channel"]?.stringValue ?? "") \(h["method"]?.stringValue ?? "(whole channel)")"
            )
        }
        lines.append("queue     pending \(s.pending), current \(s.currentEvent.map(String.init) ?? "-")")
        lines.append("slots     \(s.slots.isEmpty ? "-" : s.slots.joined(separator: ", "))")
        if let b = s.raw["buffers"] {
            lines.append(
                "buffers   \(b["bytes"]?.intValue ?? 0) of \(b["max"]?.intValue ?? 0) bytes, \(b["cutOff"]?.intValue ?? 0) connection(s) cut off")
        }
        let names = ["posted", "completed", "stopped", "unhandled", "hopTimeouts", "gone", "invalid", "skipped", "invokes", "callTimeouts"]
        lines.append("counters  " + names.map { "\($0) \(s.counter($0))" }.joined(separator: ", "))
        return lines.joined(separator: "\n")
    }

    static func pad(_ s: String, _ n: Int) -> String {
        s.count >= n ? s : s + String(repeating: " ", count: n - s.count)
    }
}
