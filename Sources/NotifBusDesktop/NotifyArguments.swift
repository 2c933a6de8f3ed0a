// The arguments of one `org.freedesktop.Notifications.Notify` call, built from a
// notification, its category and the presentation decided for it (Protocol/DESKTOP.md §2).
// Pure values: nothing here talks to D-Bus, and `userInfo` never reaches these arguments.
import NotifBusClient
import NotifBusProtocol

/// A value in `Notify`'s `hints` dictionary (`a{sv}`).
public enum HintValue: Sendable, Hashable, CustomStringConvertible {
    /// D-Bus type `s`.
    case string(String)
    /// D-Bus type `y`, as `urgency` takes.
    case byte(UInt8)
    /// D-Bus type `b`.
    case bool(Bool)

    public var description: String {
        switch self {
        case .string(let s): return "<string \(JSONValue.string(s).text)>"
        case .byte(let b): return "<byte \(b)>"
        case .bool(let b): return "<boolean \(b)>"
        }
    }
}

/// What a key in `Notify`'s action list stands for when the server invokes it.
public enum ActionRoute: Sendable, Hashable {
    /// The click on the body: the default action.
    case defaultAction
    /// A category action without text input.
    case action(String)
    /// A text-input action offered as KDE's `inline-reply`: its answer comes as `NotificationReplied`.
    case inlineReply(String)
    /// A text-input action on a server without inline reply: a plain button whose click is
    /// reported with empty `userText`, so that the app asks for the text itself.
    case textInputButton(String)
}

/// Server capability names (Desktop Notifications Specification, and KDE's `inline-reply`).
public enum ServerCapability {
    public static let actions = "actions"
    public static let bodyMarkup = "body-markup"
    public static let inlineReply = "inline-reply"
}

/// Hint names the bridge writes.
public enum HintName {
    public static let urgency = "urgency"
    public static let soundName = "sound-name"
    public static let suppressSound = "suppress-sound"
    public static let stackTag = "x-dunst-stack-tag"
    public static let replyPlaceholder = "x-kde-reply-placeholder-text"
    public static let replySubmitButton = "x-kde-reply-submit-button-text"
    /// The app's desktop file id without `.desktop`: servers group and theme by it.
    public static let desktopEntry = "desktop-entry"
}

/// The arguments of `Notify(s app_name, u replaces_id, s app_icon, s summary, s body,
/// as actions, a{sv} hints, i expire_timeout)`, in that order.
public struct NotifyArguments: Sendable, Hashable, CustomStringConvertible {
    /// The action key a click on the body sends.
    public static let defaultKey = "default"
    /// The action key of KDE's inline reply.
    public static let inlineReplyKey = "inline-reply"
    /// Put before a category action's identifier when it would take a key the bridge uses
    /// itself (`default`, `inline-reply`) or one already given, so that every key names one
    /// action and a click on the body is never taken for a category action.
    public static let collidingKeyPrefix = "action:"
    /// The label of the default action; servers that list actions show it.
    public static let defaultLabel = "Open"
    /// Normal urgency: the profile has no interruption level, and critical notifications
    /// stay on screen until clicked on most servers.
    public static let normalUrgency: UInt8 = 1
    /// The server's default expiry.
    public static let serverDefaultExpiry: Int32 = -1

    public var appName: String
    public var replacesID: UInt32
    public var appIcon: String
    public var summary: String
    public var body: String
    /// The flat list `[key, label, key, label, ...]`.
    public var actions: [String]
    /// Sorted by name, so that calls are reproducible.
    public var hints: [(name: String, value: HintValue)]
    public var expireTimeout: Int32
    /// What each action key stands for.
    public var routes: [String: ActionRoute]

    public static func == (a: NotifyArguments, b: NotifyArguments) -> Bool { a.description == b.description }
    public func hash(into hasher: inout Hasher) { hasher.combine(description) }

    /// The call as `gdbus` prints one: `("app", 0, "", "summary", "body", [...], {...}, -1)`.
    public var description: String {
        func q(_ s: String) -> String { JSONValue.string(s).text }
        let a = actions.map(q).joined(separator: ", ")
        let h = hints.map { "\(q($0.name)): \($0.value)" }.joined(separator: ", ")
        return "(\(q(appName)), \(replacesID), \(q(appIcon)), \(q(summary)), \(q(body)), [\(a)], {\(h)}, \(expireTimeout))"
    }

    /// The arguments for presenting `notification` with `options`, offering the actions of
    /// `category` as far as `capabilities` allow. `replacesID` is the server's id of the
    /// notification with the same identifier that is still shown, or 0. `appIcon` and
    /// `desktopEntry` come from the app's desktop file (`--app-id`).
    public init(
        notification: NotifBusClient.Notification, category: NotificationCategory?, options: PresentationOptions,
        capabilities: Set<String>, appName: String, replacesID: UInt32, appIcon: String = "", desktopEntry: String? = nil
    ) {
        let content = notification.content
        let markup = capabilities.contains(ServerCapability.bodyMarkup)
        self.appName = appName
        self.replacesID = replacesID
        self.appIcon = appIcon
        // Summary and body: the spec has no subtitle, so it becomes the body's first line.
        if let title = content.title {
            summary = title
            body = [content.subtitle, content.body].compactMap { $0 }.joined(separator: "\n")
        } else {
            summary = content.subtitle ?? appName
            body = content.body ?? ""
        }
        if markup { body = NotifyArguments.escapeMarkup(body) }
        expireTimeout = NotifyArguments.serverDefaultExpiry

        var actions: [String] = []
        var routes: [String: ActionRoute] = [:]
        var hints: [String: HintValue] = [HintName.urgency: .byte(NotifyArguments.normalUrgency)]
        if capabilities.contains(ServerCapability.actions) {
            actions += [NotifyArguments.defaultKey, NotifyArguments.defaultLabel]
            routes[NotifyArguments.defaultKey] = .defaultAction
            var inlineReplyUsed = !capabilities.contains(ServerCapability.inlineReply)
            func key(for identifier: String) -> String {
                var key = identifier
                while key == NotifyArguments.defaultKey || key == NotifyArguments.inlineReplyKey || routes[key] != nil {
                    key = NotifyArguments.collidingKeyPrefix + key
                }
                return key
            }
            for action in category?.actions ?? [] {
                if let text = action as? TextInputNotificationAction {
                    if !inlineReplyUsed {
                        // KDE shows one reply field per notification: the first text action gets it.
                        inlineReplyUsed = true
                        actions += [NotifyArguments.inlineReplyKey, action.title]
                        routes[NotifyArguments.inlineReplyKey] = .inlineReply(action.identifier)
                        if let placeholder = text.textInputPlaceholder { hints[HintName.replyPlaceholder] = .string(placeholder) }
                        hints[HintName.replySubmitButton] = .string(text.textInputButtonTitle)
                    } else {
                        let key = key(for: action.identifier)
                        actions += [key, action.title]
                        routes[key] = .textInputButton(action.identifier)
                    }
                } else {
                    let key = key(for: action.identifier)
                    actions += [key, action.title]
                    routes[key] = .action(action.identifier)
                }
            }
        }
        // Sound only when the chain asked for it; otherwise the server is told to stay quiet.
        if options.contains(.sound), let sound = content.sound {
            hints[HintName.soundName] = .string(sound)
        } else {
            hints[HintName.suppressSound] = .bool(true)
        }
        if let thread = content.threadIdentifier { hints[HintName.stackTag] = .string(thread) }
        if let desktopEntry { hints[HintName.desktopEntry] = .string(desktopEntry) }
        self.actions = actions
        self.routes = routes
        self.hints = hints.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
    }

    /// The first text of the notification's content that would go onto the session bus with
    /// a NUL character (U+0000) in it, named as the `add` argument names it; nil when there is
    /// none. A D-Bus string cannot carry a NUL: sent, it would be cut there (a title
    /// `"before\u{0}after"` would show as `before`), so such an `add` is refused instead.
    public static func fieldWithNUL(in content: NotificationContent) -> String? {
        let texts: [(String, String?)] = [
            ("content.title", content.title), ("content.subtitle", content.subtitle), ("content.body", content.body),
            ("content.sound", content.sound), ("content.threadIdentifier", content.threadIdentifier),
        ]
        return texts.first { $0.1.map(hasNUL) == true }?.0
    }

    /// The same for the texts of the notification's category that become action keys,
    /// labels and hints; they come from the broker's category set.
    public static func fieldWithNUL(in category: NotificationCategory) -> String? {
        for action in category.actions {
            let what = "category \(category.identifier) action \(action.identifier)"
            if hasNUL(action.identifier) { return "\(what): identifier" }
            if hasNUL(action.title) { return "\(what): title" }
            if let text = action as? TextInputNotificationAction {
                if hasNUL(text.textInputButtonTitle) { return "\(what): textInput.buttonTitle" }
                if text.textInputPlaceholder.map(hasNUL) == true { return "\(what): textInput.placeholder" }
            }
        }
        return nil
    }

    static func hasNUL(_ text: String) -> Bool { text.utf8.contains(0) }

    /// Escapes the three characters that the spec's body markup gives meaning to.
    static func escapeMarkup(_ text: String) -> String {
        var out = ""
        for ch in text {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.append(ch)
            }
        }
        return out
    }
}

extension NotifyArguments {
    /// The bytes of `content.userInfo` in an `add`'s arguments, as the app wrote them; nil
    /// when it is absent or not an object. A repeated key counts as its last occurrence, as
    /// in the tree `Notification(json:)` reads.
    public static func rawUserInfo(in arguments: RawJSON) -> RawJSON? {
        arguments.withUnsafeBytes { buffer -> RawJSON? in
            var scanner = JSONScanner(buffer)
            guard let top = try? scanner.scanTopLevelObject(),
                let content = top.last(where: { scanner.key(of: $0) == "content" }),
                let members = scanner.members(of: content),
                let info = members.last(where: { scanner.key(of: $0) == "userInfo" }), info.kind == .object
            else { return nil }
            return scanner.raw(of: info)
        }
    }
}
