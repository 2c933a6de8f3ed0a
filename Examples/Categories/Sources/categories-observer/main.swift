// categories-observer: one process of the Categories example. `--register` sets the app's
// notification categories and exits; `--role invites|messages|reminders` observes
// willPresent and didReceive, handles only its own category's actions and passes the rest on.
import Glibc
import NotifBusClient
import NotifBusProtocol

/// What one role does with the notifications of its category.
struct Role: Sendable {
    let name: String
    let category: String
    /// Chain position; roles do not overlap, so the order only shows in traces.
    let priority: Int32
    /// How this role presents its notifications in the foreground.
    let presentation: PresentationOptions
    /// What the role did with a response, or nil to pass it on.
    let handle: @Sendable (NotificationResponse) -> String?

    static let all: [Role] = [
        Role(name: "invites", category: "INVITE", priority: 10, presentation: [.banner, .list]) { response in
            let title = response.notification.content.title ?? response.notification.identifier
            switch response.actionIdentifier {
            case "ACCEPT": return "accepted the invitation '\(title)' and opened the calendar"
            case "DECLINE": return "declined the invitation '\(title)' in the background"
            default: return nil
            }
        },
        Role(name: "messages", category: "MESSAGE", priority: 20, presentation: [.banner, .sound, .badge]) { response in
            switch response.actionIdentifier {
            case "REPLY": return "sent the reply: \(response.userText ?? "")"
            case NotificationResponse.dismissActionIdentifier: return "marked \(response.notification.identifier) as read (dismissed)"
            default: return nil
            }
        },
        Role(name: "reminders", category: "REMINDER", priority: 30, presentation: [.list]) { response in
            // OPEN needs the app itself, so it goes on down the chain.
            response.actionIdentifier == "SNOOZE" ? "snoozed \(response.notification.identifier) for 10 minutes" : nil
        },
    ]
}

enum Program {
    /// The app's categories: an invitation, a message with an inline reply and a custom dismiss,
    /// and a reminder whose Snooze runs in the background next to an Open that launches the app.
    static let appCategories: [NotificationCategory] = [
        NotificationCategory(
            identifier: "INVITE",
            actions: [
                NotificationAction(identifier: "ACCEPT", title: "Accept", options: [.foreground]),
                NotificationAction(identifier: "DECLINE", title: "Decline", options: [.destructive]),
            ]),
        NotificationCategory(
            identifier: "MESSAGE",
            actions: [
                TextInputNotificationAction(identifier: "REPLY", title: "Reply", textInputButtonTitle: "Send", textInputPlaceholder: "Message")
            ], options: [.customDismissAction, .hiddenPreviewsShowTitle]),
        NotificationCategory(
            identifier: "REMINDER",
            actions: [
                NotificationAction(identifier: "SNOOZE", title: "Snooze"),
                NotificationAction(identifier: "OPEN", title: "Open", options: [.foreground]),
            ]),
    ]

    static let usage = "usage: categories-observer (--register | --role invites|messages|reminders) [--socket PATH]"

    /// One line on stdout, written at once so that a pipe shows it in order.
    static func say(_ text: String) {
        write(fd: 1, text + "\n")
    }

    static func fail(_ text: String) -> Int32 {
        write(fd: 2, "categories-observer: " + text + "\n")
        return 1
    }

    static func write(fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            offset += n
        }
    }

    static func run(_ args: [String]) async -> Int32 {
        var socket: String? = nil
        var roleName: String? = nil
        var register = false
        var i = 0
        while i < args.count {
            switch args[i] {
            case "--register": register = true
            case "--role" where i + 1 < args.count: roleName = args[i + 1]; i += 1
            case "--socket" where i + 1 < args.count: socket = args[i + 1]; i += 1
            default: _ = fail(usage); return 2
            }
            i += 1
        }
        do {
            if register {
                guard roleName == nil else { _ = fail(usage); return 2 }
                return try await registerCategories(socket: socket)
            }
            guard let roleName, let role = Role.all.first(where: { $0.name == roleName }) else {
                _ = fail(usage)
                return 2
            }
            return try await observe(role, socket: socket)
        } catch {
            return fail("\(error)")
        }
    }

    static func registerCategories(socket: String?) async throws -> Int32 {
        let bus = try await NotifBusConnection.connect(socket: socket, name: "categories-register")
        defer { bus.close() }
        let count = try await bus.setNotificationCategories(appCategories)
        let summary = appCategories.map { category in
            let actions = category.actions.map { action in
                var traits = action.options.names
                if action is TextInputNotificationAction { traits.append("text input") }
                return traits.isEmpty ? action.identifier : "\(action.identifier) [\(traits.joined(separator: ", "))]"
            }
            let options = category.options.names.isEmpty ? "" : " {\(category.options.names.joined(separator: ", "))}"
            return "\(category.identifier)\(options): \(actions.joined(separator: ", "))"
        }
        say("registered \(count) categories: \(summary.joined(separator: "; "))")
        let readBack = try await bus.notificationCategories()
        say(readBack == appCategories ? "read back from the bus: identical" : "read back from the bus: DIFFERENT: \(readBack)")
        return readBack == appCategories ? 0 : 1
    }

    static func observe(_ role: Role, socket: String?) async throws -> Int32 {
        let bus = try await NotifBusConnection.connect(socket: socket, name: "categories-\(role.name)")
        // A newer copy of this role (same key) takes over; this one then leaves.
        let evicted: @Sendable (Eviction) -> Void = { _ in
            say("replaced by a newer \(role.name) observer; leaving")
            bus.close()
        }
        try await bus.addWillPresentObserver(priority: role.priority, key: "\(role.name)-present", onEvicted: evicted) { notification in
            guard notification.content.categoryIdentifier == role.category else { return nil }
            say("willPresent \(notification.identifier): present with \(role.presentation.names.joined(separator: ", "))")
            return role.presentation
        }
        try await bus.addDidReceiveObserver(priority: role.priority, key: "\(role.name)-receive", onEvicted: evicted) { response in
            let id = response.notification.identifier
            let action = response.isDefaultAction ? "default" : response.isDismissAction ? "dismiss" : response.actionIdentifier
            guard response.notification.content.categoryIdentifier == role.category, let did = role.handle(response) else {
                say("didReceive \(action) on \(id): not mine, passing it on")
                return .pass
            }
            say("didReceive \(action) on \(id): \(did)")
            var value: [String: JSONValue] = ["handledBy": .string(role.name), "did": .string(did)]
            if let text = response.userText { value["userText"] = .string(text) }
            return .handledWith(.object(value))
        }
        say("\(role.name) observing \(role.category) at priority \(role.priority) as \(bus.clientID)")
        while bus.isOpen {
            try? await Task.sleep(for: .milliseconds(100))
        }
        return 0
    }
}

exit(await Program.run(Array(CommandLine.arguments.dropFirst())))
