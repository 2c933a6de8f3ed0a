// Notification categories and their actions on the Swift client, mirroring
// UNNotificationCategory, UNNotificationAction and UNTextInputNotificationAction, with the
// JSON of protocol §3.6 both ways. The broker, not this file, decides what a set may hold.
import NotifBusProtocol

/// What a category can list as an action: a `NotificationAction`, or a
/// `TextInputNotificationAction` that asks for text. Read the kind back with `as?`, as with
/// `UNTextInputNotificationAction`.
public protocol NotificationActionProtocol: Sendable {
    /// Unique within its category; a `didReceive` names it in `actionIdentifier`.
    var identifier: String { get }
    /// The button's title.
    var title: String { get }
    /// Foreground, destructive, authentication required.
    var options: NotificationAction.Options { get }
    /// The action as §3.6 writes it.
    var jsonValue: JSONValue { get }
}

extension NotificationActionProtocol {
    /// Whether choosing the action brings the app to the foreground, which makes an
    /// unhandled click retained for launch.
    public var launchesApp: Bool { options.contains(.foreground) }
}

/// A button on a notification, as `UNNotificationAction`.
public struct NotificationAction: NotificationActionProtocol, Hashable {
    /// As `UNNotificationActionOptions`.
    public struct Options: OptionSet, Sendable, Hashable {
        /// The options' bits.
        public let rawValue: UInt8

        /// Options from their bits; prefer the named constants.
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// The action opens the app; an unhandled click is retained for launch.
        public static let foreground = Options(rawValue: 1 << 0)
        /// The action is shown as destructive.
        public static let destructive = Options(rawValue: 1 << 1)
        /// The device must be unlocked first.
        public static let authenticationRequired = Options(rawValue: 1 << 2)

        static let wireNames: [(Options, String)] = [
            (.foreground, "foreground"), (.destructive, "destructive"), (.authenticationRequired, "authenticationRequired"),
        ]

        /// The wire names of the options in this set.
        public var names: [String] { WireNames.names(of: self, Self.wireNames) }

        /// Reads wire names; unknown names are refused, repeats allowed (options are a set).
        public init(names: [String]) throws(NotificationDecodingError) {
            self = try WireNames.options(names.map { .string($0) }, Self.wireNames, path: "options", allowRepeats: true)
        }

        var jsonValue: JSONValue { .array(names.map { .string($0) }) }
    }

    /// Unique within its category.
    public let identifier: String
    /// The button's title.
    public let title: String
    /// How choosing the action behaves.
    public let options: Options

    /// An action titled `title`, named `identifier` in `didReceive` responses.
    public init(identifier: String, title: String, options: Options = []) {
        self.identifier = identifier
        self.title = title
        self.options = options
    }

    /// The action as §3.6 writes it.
    public var jsonValue: JSONValue {
        ["identifier": .string(identifier), "title": .string(title), "options": options.jsonValue]
    }
}

/// An action that asks the user for text, as `UNTextInputNotificationAction`. A
/// `didReceive` for it carries the text in `NotificationResponse.userText`.
public struct TextInputNotificationAction: NotificationActionProtocol, Hashable {
    /// Unique within its category.
    public let identifier: String
    /// The button's title.
    public let title: String
    /// How choosing the action behaves.
    public let options: NotificationAction.Options
    /// The title of the button that sends the text.
    public let textInputButtonTitle: String
    /// The hint shown in the empty text field; `nil` writes no placeholder.
    public let textInputPlaceholder: String?

    /// An action whose button opens a text field; `textInputButtonTitle` sends the text.
    public init(
        identifier: String, title: String, options: NotificationAction.Options = [], textInputButtonTitle: String,
        textInputPlaceholder: String? = nil
    ) {
        self.identifier = identifier
        self.title = title
        self.options = options
        self.textInputButtonTitle = textInputButtonTitle
        self.textInputPlaceholder = textInputPlaceholder
    }

    /// The action as §3.6 writes it, with its `textInput` member.
    public var jsonValue: JSONValue {
        var textInput: [String: JSONValue] = ["buttonTitle": .string(textInputButtonTitle)]
        if let textInputPlaceholder { textInput["placeholder"] = .string(textInputPlaceholder) }
        return [
            "identifier": .string(identifier), "title": .string(title), "options": options.jsonValue,
            "textInput": .object(textInput),
        ]
    }
}

/// A kind of notification and the actions it offers, as `UNNotificationCategory`.
/// Two categories are equal when they write the same JSON.
public struct NotificationCategory: Sendable, Hashable {
    /// As `UNNotificationCategoryOptions`.
    public struct Options: OptionSet, Sendable, Hashable {
        /// The options' bits.
        public let rawValue: UInt8

        /// Options from their bits; prefer the named constants.
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// Dismissing the notification is reported as a `didReceive` with
        /// `NotificationResponse.dismissActionIdentifier`; without it, that action is refused.
        public static let customDismissAction = Options(rawValue: 1 << 0)
        /// Notifications of the category may show in CarPlay.
        public static let allowInCarPlay = Options(rawValue: 1 << 1)
        /// With previews hidden, the title still shows.
        public static let hiddenPreviewsShowTitle = Options(rawValue: 1 << 2)
        /// With previews hidden, the subtitle still shows.
        public static let hiddenPreviewsShowSubtitle = Options(rawValue: 1 << 3)

        static let wireNames: [(Options, String)] = [
            (.customDismissAction, "customDismissAction"), (.allowInCarPlay, "allowInCarPlay"),
            (.hiddenPreviewsShowTitle, "hiddenPreviewsShowTitle"), (.hiddenPreviewsShowSubtitle, "hiddenPreviewsShowSubtitle"),
        ]

        /// The wire names of the options in this set.
        public var names: [String] { WireNames.names(of: self, Self.wireNames) }

        /// Reads wire names; unknown names are refused, repeats allowed (options are a set).
        public init(names: [String]) throws(NotificationDecodingError) {
            self = try WireNames.options(names.map { .string($0) }, Self.wireNames, path: "options", allowRepeats: true)
        }

        var jsonValue: JSONValue { .array(names.map { .string($0) }) }
    }

    /// Named by `NotificationContent.categoryIdentifier`.
    public let identifier: String
    /// In display order; identifiers distinct.
    public let actions: [any NotificationActionProtocol]
    /// Siri intents the category stands for; written only when not empty.
    public let intentIdentifiers: [String]
    /// How notifications of the category behave.
    public let options: Options

    /// A category named `identifier`, offering `actions` in that order.
    public init(
        identifier: String, actions: [any NotificationActionProtocol], intentIdentifiers: [String] = [],
        options: Options = []
    ) {
        self.identifier = identifier
        self.actions = actions
        self.intentIdentifiers = intentIdentifiers
        self.options = options
    }

    /// The action with this identifier, if the category has one.
    public func action(withIdentifier identifier: String) -> (any NotificationActionProtocol)? {
        actions.first { $0.identifier == identifier }
    }

    /// Reads one category. Like the broker, it refuses unknown fields and options, missing
    /// or mistyped fields, and repeated action identifiers.
    public init(json: JSONValue) throws(NotificationDecodingError) {
        try self.init(json, path: "category")
    }

    init(_ json: JSONValue, path: String) throws(NotificationDecodingError) {
        let r = try JSONObjectReader(json, path: path).rejectingUnknown(["identifier", "actions", "options", "intentIdentifiers"])
        identifier = try r.name("identifier")
        options = try WireNames.options(
            r.optionalArray("options") ?? [], Options.wireNames, path: r.path("options"),
            allowRepeats: true)
        var intents: [String] = []
        for (i, item) in (try r.optionalArray("intentIdentifiers") ?? []).enumerated() {
            guard let name = item.stringValue, Names.isValid(name) else {
                throw NotificationDecodingError(
                    path: r.path("intentIdentifiers[\(i)]"),
                    reason: "must be a string of 1 to \(Limits.maxNameBytes) bytes")
            }
            intents.append(name)
        }
        intentIdentifiers = intents
        var actions: [any NotificationActionProtocol] = []
        var seen = Set<String>()
        for (i, item) in try r.array("actions").enumerated() {
            let action = try NotificationCategory.action(item, path: r.path("actions[\(i)]"))
            guard seen.insert(action.identifier).inserted else {
                throw NotificationDecodingError(
                    path: r.path("actions[\(i)].identifier"),
                    reason: "repeats the action identifier \"\(action.identifier)\"")
            }
            actions.append(action)
        }
        self.actions = actions
    }

    static func action(_ json: JSONValue, path: String) throws(NotificationDecodingError) -> any NotificationActionProtocol {
        let r = try JSONObjectReader(json, path: path).rejectingUnknown(["identifier", "title", "options", "textInput"])
        let identifier = try r.name("identifier")
        let title = try r.string("title")
        let options: NotificationAction.Options = try WireNames.options(
            r.optionalArray("options") ?? [],
            NotificationAction.Options.wireNames,
            path: r.path("options"), allowRepeats: true)
        guard r.optional("textInput") != nil else { return NotificationAction(identifier: identifier, title: title, options: options) }
        let t = try r.object("textInput").rejectingUnknown(["buttonTitle", "placeholder"])
        return TextInputNotificationAction(
            identifier: identifier, title: title, options: options,
            textInputButtonTitle: try t.string("buttonTitle"),
            textInputPlaceholder: try t.optionalString("placeholder"))
    }

    /// Reads a whole category set, as `getCategories` returns it; repeated category
    /// identifiers are refused.
    public static func list(json: JSONValue) throws(NotificationDecodingError) -> [NotificationCategory] {
        guard let items = json.arrayValue else { throw NotificationDecodingError(path: "categories", reason: "must be an array") }
        var out: [NotificationCategory] = []
        var seen = Set<String>()
        for (i, item) in items.enumerated() {
            let category = try NotificationCategory(item, path: "categories[\(i)]")
            guard seen.insert(category.identifier).inserted else {
                throw NotificationDecodingError(
                    path: "categories[\(i)].identifier",
                    reason: "repeats the category identifier \"\(category.identifier)\"")
            }
            out.append(category)
        }
        return out
    }

    /// The category as §3.6 writes it.
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [
            "identifier": .string(identifier), "actions": .array(actions.map(\.jsonValue)),
            "options": options.jsonValue,
        ]
        if !intentIdentifiers.isEmpty { o["intentIdentifiers"] = .array(intentIdentifiers.map { .string($0) }) }
        return .object(o)
    }

    /// Equal when both write the same JSON.
    public static func == (lhs: NotificationCategory, rhs: NotificationCategory) -> Bool {
        lhs.jsonValue == rhs.jsonValue
    }

    /// Hashes the JSON the category writes, as `==` compares it.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(jsonValue)
    }
}
