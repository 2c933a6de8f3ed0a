// Profile subcommands: `categories set|get` for the category set, `notify` to post a
// willPresent and show the presentation decision, `click` to post a didReceive and show who
// handled it and whether it was retained for launch. The broker decides; these only report.
import NotifBusClient
import NotifBusProtocol

enum ProfileCommands {
    static let categories = Subcommand(
        name: "categories",
        summary: "set or show the notification categories",
        usage: """
            Usage: notifbus categories set FILE|- [--once KEY] [--socket PATH] [--timeout DUR]
                   notifbus categories get [--socket PATH] [--timeout DUR]

            'set' replaces the broker's whole category set with the JSON array in FILE (- reads
            stdin), as setNotificationCategories does, and prints {"count":N}. A set the broker
            refuses (bad_request, exit 1) leaves the one in force unchanged. 'get' prints the
            set in force as a JSON array. The format is the notification profile's:
              [{"identifier":"INVITE","options":[],"actions":[
                 {"identifier":"ACCEPT","title":"Accept","options":["foreground"]},
                 {"identifier":"REPLY","title":"Reply","textInput":{"buttonTitle":"Send"}}]}]
            \(CLI.onceUsage)
            """,
        valueFlags: ["once"], switchFlags: [],
        run: { args in try await runCategories(args) })

    static func runCategories(_ args: Arguments) async throws -> Int32 {
        guard let verb = args.positionals.first else { throw UsageError("expected 'set FILE|-' or 'get'") }
        switch verb {
        case "set":
            try CLI.expectPositionals(args, 2...2, "set FILE|-")
            let input = try JSONArgument(file: args.positionals[1], what: "the category set")
            let bus = try await CLI.connect(args, name: "notifbus-categories")
            defer { bus.close() }
            var fields: [String: JSONValue] = ["categories": try input.value(limit: bus.maxFrame)]
            if let once = args.value("once") { fields["once"] = .string(once) }
            let answer = try await bus.requestMarkingRepeat(Op.setCategories, fields)
            CLI.noteRepeat(answer.isRepeat, args)
            Output.json(JSONValue.object(["count": answer.result["count"] ?? .null]).text, pretty: args.prettyJSON)
        case "get":
            try CLI.expectPositionals(args, 1...1, "get")
            if args.value("once") != nil { throw UsageError("--once goes with 'set'") }
            let bus = try await CLI.connect(args, name: "notifbus-categories")
            defer { bus.close() }
            let result = try await bus.request(Op.getCategories)
            Output.json((result["categories"] ?? .array([])).text, pretty: args.prettyJSON)
        default:
            throw UsageError("expected 'set FILE|-' or 'get', not '\(verb)'")
        }
        return 0
    }

    static let notify = Subcommand(
        name: "notify",
        summary: "post willPresent and show the presentation decision",
        usage: """
            Usage: notifbus notify --id ID [--title T] [--subtitle S] [--body B] [--category C]
                                   [--thread T] [--badge N] [--sound NAME] [--user-info JSON]
                                   [--source remote|local] [--deliver] [--json] [--timeout DUR]
                                   [--socket PATH]

            Posts willPresent for notification ID, as if it arrived while the app is in the
            foreground, and prints the observers' decision: 'present with banner, sound', or
            'not presented' when an observer completed with no options, stopped the chain, or
            nobody decided (unhandled). --user-info is a JSON object (or - to read it from
            standard input, @FILE from FILE). --json prints the post's raw result instead.

            --deliver hands the notification to the desktop bridge ('notifbus desktop') instead:
            it calls 'add' on the 'notifications' channel, which posts willPresent itself and
            shows the notification on the desktop as the chain decides. Prints 'shown on the
            desktop as N (banner)' or 'not presented'; with --json, the add result. Without a
            running bridge: 'not_implemented', exit 1.
            """,
        valueFlags: notificationFlags.union(["subtitle", "thread", "badge", "sound", "timeout"]),
        switchFlags: ["json", "deliver"],
        run: { args in
            try CLI.expectPositionals(args, 0...0, "no arguments")
            let userInfo = try userInfoArgument(args)
            var notification = try notificationFromFlags(args)
            notification.content.subtitle = args.value("subtitle")
            notification.content.threadIdentifier = args.value("thread")
            notification.content.badge = try args.integer("badge").map { Int($0) }
            notification.content.sound = args.value("sound")
            let timeout = try CLI.chainTimeout(args)
            let bus = try await CLI.connect(args, name: "notifbus-notify")
            defer { bus.close() }
            notification.content.userInfo = try userInfoObject(userInfo, limit: bus.maxFrame)
            if args.has("deliver") {
                let delivery: NotificationDelivery
                do {
                    delivery = try await NotificationCenter(connection: bus, timeout: timeout).add(notification)
                } catch {
                    throw CommandError("\(error)")
                }
                if args.has("json") {
                    Output.json(delivery.jsonValue.text, pretty: args.prettyJSON)
                } else {
                    Output.line("add \(notification.identifier): \(deliveryLine(delivery))")
                }
                return 0
            }
            let result = try await bus.post(willPresent: notification, timeout: timeout)
            if args.has("json") {
                Output.json(result.raw.text, pretty: args.prettyJSON)
            } else {
                Output.line("willPresent \(notification.identifier): \(presentation(result))")
            }
            return 0
        })

    static let click = Subcommand(
        name: "click",
        summary: "post didReceive (a click) and show who handled it",
        usage: """
            Usage: notifbus click --id ID [--category C] [--action A|default|dismiss] [--text T]
                                  [--title T] [--body B] [--user-info JSON] [--source remote|local]
                                  [--json] [--timeout DUR] [--socket PATH]

            Posts didReceive: the user chose action A on notification ID, or tapped the
            notification itself when --action is absent. 'default' and 'dismiss' stand for
            com.apple.UNNotificationDefaultActionIdentifier and
            com.apple.UNNotificationDismissActionIdentifier. --text is what the user typed into
            a text-input action. Prints who handled the click and whether the broker retained it
            for launch (a click that would open the app, and that nobody handled). A click the
            categories in force do not allow is refused before any observer sees it:
            'invalid_action: ...' on stderr, exit 1. --json prints the post's raw result instead.
            --user-info is a JSON object (or - to read it from standard input, @FILE from FILE).
            """,
        valueFlags: notificationFlags.union(["action", "text", "timeout"]),
        switchFlags: ["json"],
        run: { args in
            try CLI.expectPositionals(args, 0...0, "no arguments")
            let userInfo = try userInfoArgument(args)
            var notification = try notificationFromFlags(args)
            let action: String
            switch args.value("action") ?? "default" {
            case "default": action = NotificationResponse.defaultActionIdentifier
            case "dismiss": action = NotificationResponse.dismissActionIdentifier
            case let other: action = other
            }
            let timeout = try CLI.chainTimeout(args)
            let bus = try await CLI.connect(args, name: "notifbus-click")
            defer { bus.close() }
            notification.content.userInfo = try userInfoObject(userInfo, limit: bus.maxFrame)
            let response = NotificationResponse(actionIdentifier: action, notification: notification, userText: args.value("text"))
            let result = try await bus.post(didReceive: response, timeout: timeout)
            if args.has("json") {
                Output.json(result.raw.text, pretty: args.prettyJSON)
            } else {
                Output.line("didReceive \(actionLabel(response)) on \(notification.identifier): \(clickOutcome(result))")
            }
            return 0
        })

    /// Flags that build the notification, shared by `notify` and `click`.
    static let notificationFlags: Set<String> = ["id", "title", "body", "category", "user-info", "source"]

    static func notificationFromFlags(_ args: Arguments) throws(UsageError) -> NotifBusClient.Notification {
        guard let id = args.value("id") else { throw UsageError("--id is required") }
        var source: NotifBusClient.Notification.Source? = nil
        if let text = args.value("source") {
            guard let s = NotifBusClient.Notification.Source(rawValue: text) else {
                throw UsageError("--source must be remote or local, not '\(text)'")
            }
            source = s
        }
        let content = NotificationContent(title: args.value("title"), body: args.value("body"), categoryIdentifier: args.value("category"))
        return NotifBusClient.Notification(identifier: id, source: source, content: content)
    }

    /// `--user-info` as given; given as text, it must be an object already (a usage error).
    static func userInfoArgument(_ args: Arguments) throws -> JSONArgument? {
        guard let text = args.value("user-info") else { return nil }
        let input = try JSONArgument(text, what: "--user-info")
        if let value = input.text, value.objectValue == nil { throw UsageError("--user-info must be a JSON object") }
        return input
    }

    /// `--user-info`'s object (empty without the flag), read no further than `limit` bytes.
    static func userInfoObject(_ input: JSONArgument?, limit: Int) throws -> [String: JSONValue] {
        guard let input else { return [:] }
        guard let object = try input.value(limit: limit).objectValue else { throw UsageError("--user-info must be a JSON object") }
        return object
    }

    /// `present with banner, sound (completed by o3; trace o1 next, o3 complete)`.
    static func presentation(_ r: PostResult) -> String {
        let decision: String
        switch r.outcome {
        case .completed:
            if let options = r.presentationOptions, !options.isEmpty {
                // The observer's order, as it completed; the option set itself has none.
                let names = r.value.arrayValue?.compactMap(\.stringValue) ?? options.names
                decision = "present with \(names.joined(separator: ", ")) (completed by \(r.by ?? "?")"
            } else {
                decision = "not presented (completed by \(r.by ?? "?") with no options"
            }
        case .stopped:
            decision = "not presented (stopped by \(r.by ?? "?")"
        case .unhandled:
            decision = "not presented (unhandled: no observer decided"
        }
        return decision + (trace(r).map { "; " + $0 } ?? "") + ")"
    }

    /// `shown on the desktop as 3 (banner, sound)` or `not presented (options: none)`.
    static func deliveryLine(_ d: NotificationDelivery) -> String {
        let options = d.options.isEmpty ? "none" : d.options.names.joined(separator: ", ")
        guard d.presented, let id = d.desktopId else { return "not presented (options: \(options))" }
        return "shown on the desktop as \(id) (\(options))"
    }

    /// `handled by o2, value {...}; not retained; trace o1 next, o2 complete`.
    static func clickOutcome(_ r: PostResult) -> String {
        var parts: [String] = []
        switch r.outcome {
        case .completed: parts.append("handled by \(r.by ?? "?")" + (r.value.isNull ? "" : ", value \(r.value.text)"))
        case .stopped: parts.append("stopped by \(r.by ?? "?")")
        case .unhandled: parts.append("unhandled")
        }
        if r.isRetainedForLaunch {
            parts.append("retained for launch in slot '\(r.retained ?? "")'")
        } else {
            parts.append(r.outcome == .unhandled ? "not retained: the action does not launch the app" : "not retained")
        }
        if let hops = trace(r) { parts.append(hops) }
        return parts.joined(separator: "; ")
    }

    /// `trace o1 next, o3 complete`, or nil when no observer was asked.
    static func trace(_ r: PostResult) -> String? {
        r.trace.isEmpty ? nil : "trace " + r.trace.map { "\($0.observer) \($0.reply)" }.joined(separator: ", ")
    }

    static func actionLabel(_ response: NotificationResponse) -> String {
        if response.isDefaultAction { return "default" }
        if response.isDismissAction { return "dismiss" }
        return response.actionIdentifier
    }
}
