// Probe subcommands for method channels and slots: invoke, handle, put, take, peek.
import Glibc
import NotifBusClient
import NotifBusProtocol

enum ChannelCommands {
    static let invoke = Subcommand(
        name: "invoke",
        summary: "call a method on a channel and print its result",
        usage: """
            Usage: notifbus invoke CHANNEL METHOD [JSON|-|@FILE] [--socket PATH] [--timeout DUR]

            Invokes METHOD on CHANNEL with the JSON arguments and prints the result as JSON.
            An error goes to stderr as 'CODE: MESSAGE' (and its details), with exit status 1.
            --timeout bounds the wait for the handler's answer (default 60s).
            \(CLI.jsonInputHelp)
            """,
        valueFlags: ["timeout"], switchFlags: [],
        run: { args in
            try CLI.expectPositionals(args, 2...3, "CHANNEL METHOD [JSON|-|@FILE]")
            let input = args.positionals.count == 3 ? try JSONArgument(args.positionals[2], what: "the arguments") : nil
            let timeout = try CLI.chainTimeout(args)
            let bus = try await CLI.connect(args, name: "notifbus-invoke")
            defer { bus.close() }
            let arguments = try input?.value(limit: bus.maxFrame)
            do {
                let result = try await bus.methodChannel(args.positionals[0]).invokeMethod(
                    args.positionals[1], arguments: arguments,
                    timeout: timeout)
                Output.json(result.text, pretty: args.prettyJSON)
                return 0
            } catch let error as MethodChannelError {
                var line = error.description
                if case .platform(let e) = error, let details = e.details { line += " (details: \(details.text))" }
                throw CommandError(line)
            }
        })

    static let handle = Subcommand(
        name: "handle",
        summary: "serve a channel's calls",
        usage: """
            Usage: notifbus handle CHANNEL [METHOD] (--result JSON | --error CODE[:MESSAGE] | --exec CMD)
                                   [--socket PATH] [--count N] [--exec-timeout DUR] [--name CLIENT]
                                   [--no-reconnect]

            Handles METHOD on CHANNEL, or the whole channel without METHOD, and prints each
            call as one JSON line. --result answers with JSON; --error answers with an error;
            --exec runs CMD (with /bin/sh) once per call with the call's JSON on stdin: its
            stdout (JSON) is the result, and a non-zero exit becomes an error (code
            'exec_failed') whose message is its stderr. --exec-timeout (default 30s) kills
            a CMD that runs too long. --count exits after N calls. Exits when replaced.
            \(CLI.reconnectUsage)
            """,
        valueFlags: ["result", "error", "exec", "count", "exec-timeout", "name"], switchFlags: [CLI.noReconnect],
        run: { args in try await runHandle(args) })

    static func runHandle(_ args: Arguments) async throws -> Int32 {
        try CLI.expectPositionals(args, 1...2, "CHANNEL [METHOD]")
        let modes = ["result", "error", "exec"].filter { args.value($0) != nil }
        guard modes.count == 1 else { throw UsageError("give exactly one of --result, --error and --exec") }
        let limit = try args.integer("count", min: 1)
        let execTimeout = try args.duration("exec-timeout") ?? 30_000
        let answer: @Sendable (MethodCall) async throws -> JSONValue
        if let text = args.value("result") {
            let value = try args.json(text, what: "--result")
            answer = { _ in value }
        } else if let spec = args.value("error") {
            let parts = spec.split(separator: ":", maxSplits: 1).map(String.init)
            guard let code = parts.first, !code.isEmpty else { throw UsageError("--error needs CODE[:MESSAGE]") }
            let message = parts.count > 1 ? parts[1] : code
            answer = { _ in throw PlatformError(code: code, message: message) }
        } else {
            let command = args.value("exec")!
            answer = { call in try await ExecRunner.run(command, call: call, timeoutMs: execTimeout) }
        }
        let bus = try await CLI.connectLasting(args, name: args.value("name") ?? "notifbus-handle")
        let pretty = args.prettyJSON
        let served = Counter()
        let evicted = Counter()
        bus.onEvicted = { eviction in
            if case .handler(let id, let by) = eviction {
                Output.error("notifbus: handler \(id) replaced by \(by)")
                _ = evicted.increment()
                bus.close()
            }
        }
        let method = args.positionals.count == 2 ? args.positionals[1] : nil
        do {
            try await bus.methodChannel(args.positionals[0]).setMethodCallHandler(
                { call in
                    Output.json(
                        JSONValue.object([
                            "call": .integer(call.call), "channel": .string(call.channel), "method": .string(call.method),
                            "arguments": call.arguments, "from": .string(call.from),
                        ]).text, pretty: pretty)
                    defer {
                        if let limit, served.increment() >= limit {
                            Task {
                                try? await Task.sleep(for: .milliseconds(50))
                                bus.close()
                            }
                        }
                    }
                    return try await answer(call)
                }, method: method)
        } catch {
            bus.close()
            throw CommandError("\(error)")
        }
        Output.error("notifbus: handling \(args.positionals[0]) \(method ?? "(whole channel)") as \(bus.clientID)")
        await CLI.waitLasting(bus)
        if evicted.current > 0 { return 0 }
        if let limit, served.current >= limit { return 0 }
        throw CommandError("connection to the broker lost")
    }

    static let put = Subcommand(
        name: "put",
        summary: "store a value in a slot",
        usage: """
            Usage: notifbus put SLOT JSON|-|@FILE [--once KEY] [--socket PATH]

            Stores JSON in SLOT (null empties it) and prints {"replaced":…,"delivered":…}.
            \(CLI.jsonInputHelp)
            \(CLI.onceUsage)
            """,
        valueFlags: ["once"], switchFlags: [],
        run: { args in
            try CLI.expectPositionals(args, 2...2, "SLOT JSON|-|@FILE")
            let input = try JSONArgument(args.positionals[1], what: "the value")
            let bus = try await CLI.connect(args, name: "notifbus-put")
            defer { bus.close() }
            let result = try await bus.put(args.positionals[0], try input.value(limit: bus.maxFrame), once: args.value("once"))
            CLI.noteRepeat(result.isRepeat, args)
            Output.json(JSONValue.object(["replaced": .bool(result.replaced), "delivered": .bool(result.delivered)]).text, pretty: args.prettyJSON)
            return 0
        })

    static let take = Subcommand(
        name: "take",
        summary: "take a slot's value once",
        usage: """
            Usage: notifbus take SLOT [--wait DUR] [--once KEY] [--socket PATH]

            Prints the slot's value as JSON and empties the slot, or prints null when it is
            empty. --wait waits up to DUR for a put (at most 10m); --timeout is added to it.
            \(CLI.onceUsage) A take sent again prints the value the first one took.
            """,
        valueFlags: ["wait", "once"], switchFlags: [],
        run: { args in
            try CLI.expectPositionals(args, 1...1, "SLOT")
            let wait = try args.duration("wait")
            if let wait, wait > Limits.maxTakeWaitMs { throw UsageError("--wait must be at most 10m") }
            let bus = try await CLI.connect(args, name: "notifbus-take")
            defer { bus.close() }
            guard let once = args.value("once") else {
                let value = try await bus.take(args.positionals[0], wait: wait.map { .milliseconds($0) })
                Output.json(value?.text ?? "null", pretty: args.prettyJSON)
                return 0
            }
            var fields: [String: JSONValue] = ["slot": .string(args.positionals[0]), "once": .string(once)]
            if let wait { fields["wait"] = .integer(wait) }
            let answer = try await bus.requestMarkingRepeat(Op.take, fields, timeout: bus.requestTimeout + .milliseconds(wait ?? 0))
            CLI.noteRepeat(answer.isRepeat, args)
            Output.json(answer.result.text, pretty: args.prettyJSON)
            return 0
        })

    static let peek = Subcommand(
        name: "peek",
        summary: "show a slot's value without taking it",
        usage: """
            Usage: notifbus peek SLOT [--socket PATH]

            Prints the slot's value as JSON, or null when it is empty; the slot keeps it.
            """,
        valueFlags: [], switchFlags: [],
        run: { args in
            try CLI.expectPositionals(args, 1...1, "SLOT")
            let bus = try await CLI.connect(args, name: "notifbus-peek")
            defer { bus.close() }
            Output.json(try await bus.peek(args.positionals[0])?.text ?? "null", pretty: args.prettyJSON)
            return 0
        })
}

/// Runs `handle --exec` commands: the call's JSON on stdin, the result JSON on stdout.
enum ExecRunner {
    static func run(_ command: String, call: MethodCall, timeoutMs: Int64) async throws -> JSONValue {
        let input = JSONValue.object([
            "call": .integer(call.call), "channel": .string(call.channel), "method": .string(call.method),
            "arguments": call.arguments, "from": .string(call.from),
        ]).encoded
        let result = await Subprocess.run(command, input: input, timeoutMs: timeoutMs)
        guard let status = result.status else {
            throw PlatformError(code: "exec_failed", message: "'\(command)' ran longer than \(timeoutMs) ms")
        }
        guard status == 0 else {
            let message = trimmed(String(decoding: result.stderr, as: UTF8.self))
            throw PlatformError(
                code: "exec_failed", message: message.isEmpty ? "'\(command)' exited with status \(status)" : message,
                details: ["status": .integer(Int64(status))])
        }
        do {
            return try JSONValue(parsing: result.stdout)
        } catch {
            throw PlatformError(code: "exec_failed", message: "'\(command)' printed no valid JSON: \(error)")
        }
    }

    static func trimmed(_ text: String) -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" }
        return String(text.drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }
}
