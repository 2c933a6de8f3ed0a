// The notification profile's values on the Swift client (protocol §3.6): notifications,
// their content, responses, presentation options and delegate replies, mirroring
// UserNotifications. They convert to and from JSON; they never touch the connection.
import NotifBusProtocol

/// Why a JSON value could not be read as one of the notification profile's types.
public struct NotificationDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where the problem is, such as `notification.content.badge` or `categories[1].actions[0]`.
    public let path: String
    /// What is wrong there.
    public let reason: String

    /// An error at `path`.
    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    /// `PATH: REASON`.
    public var description: String { "\(path): \(reason)" }
}

/// The content of a notification, as `UNNotificationContent`. Every member is optional on the
/// wire; `nil` (and an empty `userInfo`) is written as absent.
public struct NotificationContent: Sendable, Hashable {
    /// The headline.
    public var title: String?
    /// The line below the title.
    public var subtitle: String?
    /// The message.
    public var body: String?
    /// The identifier of the category whose actions the notification offers.
    public var categoryIdentifier: String?
    /// Groups notifications into threads.
    public var threadIdentifier: String?
    /// The app's own data; the broker never looks inside.
    public var userInfo: [String: JSONValue]
    /// The number on the app icon; `nil` leaves it as it is.
    public var badge: Int?
    /// A sound name.
    public var sound: String?

    /// Content with the given members; all optional.
    public init(
        title: String? = nil, subtitle: String? = nil, body: String? = nil, categoryIdentifier: String? = nil,
        threadIdentifier: String? = nil, userInfo: [String: JSONValue] = [:], badge: Int? = nil, sound: String? = nil
    ) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.categoryIdentifier = categoryIdentifier
        self.threadIdentifier = threadIdentifier
        self.userInfo = userInfo
        self.badge = badge
        self.sound = sound
    }

    /// Reads `{"title": …, "userInfo": {…}, "badge": 3, …}`. Members §3.6 does not name are
    /// user data and ignored; `null` counts as absent.
    public init(json: JSONValue) throws(NotificationDecodingError) {
        try self.init(JSONObjectReader(json, path: "content"))
    }

    init(_ r: JSONObjectReader) throws(NotificationDecodingError) {
        title = try r.optionalString("title")
        subtitle = try r.optionalString("subtitle")
        body = try r.optionalString("body")
        categoryIdentifier = try r.optionalString("categoryIdentifier")
        threadIdentifier = try r.optionalString("threadIdentifier")
        userInfo = try r.optionalObject("userInfo") ?? [:]
        badge = try r.optionalInteger("badge").map { Int($0) }
        sound = try r.optionalString("sound")
    }

    /// The content as §3.6 writes it.
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [:]
        if let title { o["title"] = .string(title) }
        if let subtitle { o["subtitle"] = .string(subtitle) }
        if let body { o["body"] = .string(body) }
        if let categoryIdentifier { o["categoryIdentifier"] = .string(categoryIdentifier) }
        if let threadIdentifier { o["threadIdentifier"] = .string(threadIdentifier) }
        if !userInfo.isEmpty { o["userInfo"] = .object(userInfo) }
        if let badge { o["badge"] = .integer(Int64(badge)) }
        if let sound { o["sound"] = .string(sound) }
        return .object(o)
    }
}

/// A delivered notification, as `UNNotification`. Foundation has a `Notification` of its
/// own: in a file that imports both modules, write `NotifBusClient.Notification` where a
/// type is named.
public struct Notification: Sendable, Hashable {
    /// Where the notification came from, as the trigger of a `UNNotificationRequest` tells.
    public enum Source: String, Sendable, Hashable {
        /// A push notification (`UNPushNotificationTrigger`).
        case remote
        /// Scheduled by the app itself.
        case local
    }

    /// The request's identifier.
    public var identifier: String
    /// `nil` when the poster did not say.
    public var source: Source?
    /// What the notification shows and carries.
    public var content: NotificationContent

    /// A notification with the request identifier `identifier`.
    public init(identifier: String, source: Source? = nil, content: NotificationContent = NotificationContent()) {
        self.identifier = identifier
        self.source = source
        self.content = content
    }

    /// Reads `{"identifier": …, "source": "remote"|"local", "content": {…}}`.
    public init(json: JSONValue) throws(NotificationDecodingError) {
        try self.init(JSONObjectReader(json, path: "notification"))
    }

    init(_ r: JSONObjectReader) throws(NotificationDecodingError) {
        identifier = try r.string("identifier")
        if let s = try r.optionalString("source") {
            guard let source = Source(rawValue: s) else {
                throw NotificationDecodingError(path: r.path("source"), reason: "must be \"remote\" or \"local\", not \"\(s)\"")
            }
            self.source = source
        } else {
            source = nil
        }
        content = try NotificationContent(r.object("content"))
    }

    /// The notification as §3.6 writes it.
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = ["identifier": .string(identifier), "content": content.jsonValue]
        if let source { o["source"] = .string(source.rawValue) }
        return .object(o)
    }
}

/// The user's answer to a notification, as `UNNotificationResponse` (and, with `userText`,
/// `UNTextInputNotificationResponse`). Its JSON is the payload of a `didReceive` event.
public struct NotificationResponse: Sendable, Hashable {
    /// The user opened the notification itself (`UNNotificationDefaultActionIdentifier`).
    public static let defaultActionIdentifier = ProfilePayload.defaultActionIdentifier
    /// The user dismissed the notification; only for categories with `customDismissAction`
    /// (`UNNotificationDismissActionIdentifier`).
    public static let dismissActionIdentifier = ProfilePayload.dismissActionIdentifier

    /// The chosen action: one of the category's, or the default or dismiss action.
    public var actionIdentifier: String
    /// The notification the user answered.
    public var notification: Notification
    /// The typed text, exactly when the action is a `TextInputNotificationAction`.
    public var userText: String?

    /// A response; without `actionIdentifier`, the user opened the notification itself.
    public init(
        actionIdentifier: String = NotificationResponse.defaultActionIdentifier, notification: Notification,
        userText: String? = nil
    ) {
        self.actionIdentifier = actionIdentifier
        self.notification = notification
        self.userText = userText
    }

    /// Whether the user opened the notification itself.
    public var isDefaultAction: Bool { actionIdentifier == NotificationResponse.defaultActionIdentifier }
    /// Whether the user dismissed the notification.
    public var isDismissAction: Bool { actionIdentifier == NotificationResponse.dismissActionIdentifier }

    /// Reads a `didReceive` payload: `{"actionIdentifier": …, "userText": …, "notification": {…}}`.
    public init(json: JSONValue) throws(NotificationDecodingError) {
        let r = try JSONObjectReader(json, path: "payload")
        actionIdentifier = try r.string("actionIdentifier")
        userText = try r.optionalString("userText")
        notification = try Notification(r.object("notification"))
    }

    /// The `didReceive` payload.
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = ["actionIdentifier": .string(actionIdentifier), "notification": notification.jsonValue]
        if let userText { o["userText"] = .string(userText) }
        return .object(o)
    }
}

/// How to present a notification that arrives while the app is in the foreground, as
/// `UNNotificationPresentationOptions`. On the wire, an array of distinct names.
public struct PresentationOptions: OptionSet, Sendable, Hashable {
    /// The options' bits.
    public let rawValue: UInt8

    /// Options from their bits; prefer the named constants.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Update the app icon's badge.
    public static let badge = PresentationOptions(rawValue: 1 << 0)
    /// Play the notification's sound.
    public static let sound = PresentationOptions(rawValue: 1 << 1)
    /// Show it in Notification Center.
    public static let list = PresentationOptions(rawValue: 1 << 2)
    /// Show it as a banner.
    public static let banner = PresentationOptions(rawValue: 1 << 3)
    /// Deprecated by Apple in favour of `.list` and `.banner`; still a valid wire name.
    public static let alert = PresentationOptions(rawValue: 1 << 4)

    /// Each option with its wire name, in the order §3.6 lists them and arrays are written.
    static let wireNames: [(PresentationOptions, String)] = [
        (.badge, "badge"), (.sound, "sound"), (.list, "list"), (.banner, "banner"), (.alert, "alert"),
    ]

    /// The wire names of the options in this set.
    public var names: [String] { WireNames.names(of: self, Self.wireNames) }

    /// Reads the names of a `willPresent` completion; unknown and repeated names are refused,
    /// as the broker refuses them.
    public init(names: [String]) throws(NotificationDecodingError) {
        self = try WireNames.options(names.map { .string($0) }, Self.wireNames, path: "options", allowRepeats: false)
    }

    /// Reads a `willPresent` completion value: an array of distinct names.
    public init(json: JSONValue) throws(NotificationDecodingError) {
        guard let list = json.arrayValue else { throw NotificationDecodingError(path: "options", reason: "must be an array") }
        self = try WireNames.options(list, Self.wireNames, path: "options", allowRepeats: false)
    }

    /// The options as a `willPresent` completion value.
    public var jsonValue: JSONValue { .array(names.map { .string($0) }) }
}

/// What a typed `didReceive` or `openSettings` observer answers; the profile's reading of
/// `ObserverReply`.
public enum DelegateReply: Sendable, Equatable {
    /// This observer dealt with it: the chain ends `completed` (Apple's completion handler
    /// was called). A handled click is never retained for launch.
    case handled
    /// As `.handled`, with a value the poster reads in `PostResult.value`.
    case handledWith(JSONValue)
    /// Not this observer's: the next one gets it (`next`).
    case pass
    /// End the chain without handling it (`stop`): later observers do not see it, and the
    /// click is not retained.
    case stop

    /// The wire answer.
    public var observerReply: ObserverReply {
        switch self {
        case .handled: return .complete(nil)
        case .handledWith(let value): return .complete(value)
        case .pass: return .next
        case .stop: return .stop
        }
    }
}

/// Option sets written as arrays of wire names.
enum WireNames {
    static func names<T: OptionSet>(of set: T, _ table: [(T, String)]) -> [String] where T.Element == T {
        table.filter { set.contains($0.0) }.map(\.1)
    }

    static func options<T: OptionSet>(
        _ list: [JSONValue], _ table: [(T, String)], path: String,
        allowRepeats: Bool
    ) throws(NotificationDecodingError) -> T where T.Element == T {
        var set = T()
        for (i, item) in list.enumerated() {
            guard let name = item.stringValue else { throw NotificationDecodingError(path: "\(path)[\(i)]", reason: "must be a string") }
            guard let option = table.first(where: { $0.1 == name })?.0 else {
                let known = table.map(\.1).joined(separator: ", ")
                throw NotificationDecodingError(path: "\(path)[\(i)]", reason: "unknown option \"\(name)\" (known: \(known))")
            }
            if !allowRepeats && set.contains(option) {
                throw NotificationDecodingError(path: "\(path)[\(i)]", reason: "repeats \"\(name)\"")
            }
            set.insert(option)
        }
        return set
    }
}

/// Reads the members of one JSON object, naming the path in every error. Optional members
/// that are `null` count as absent, as §3 says.
struct JSONObjectReader {
    let members: [String: JSONValue]
    let base: String

    init(_ value: JSONValue, path: String) throws(NotificationDecodingError) {
        guard case .object(let members) = value else { throw NotificationDecodingError(path: path, reason: "must be an object") }
        self.members = members.members
        base = path
    }

    func path(_ key: String) -> String { base.isEmpty ? key : base + "." + key }

    /// The member, or nil when it is absent or null.
    func optional(_ key: String) -> JSONValue? {
        guard let value = members[key], !value.isNull else { return nil }
        return value
    }

    func required(_ key: String) throws(NotificationDecodingError) -> JSONValue {
        guard let value = optional(key) else { throw NotificationDecodingError(path: path(key), reason: "is required") }
        return value
    }

    func string(_ key: String) throws(NotificationDecodingError) -> String {
        guard let s = try required(key).stringValue else { throw NotificationDecodingError(path: path(key), reason: "must be a string") }
        return s
    }

    func optionalString(_ key: String) throws(NotificationDecodingError) -> String? {
        guard let value = optional(key) else { return nil }
        guard let s = value.stringValue else { throw NotificationDecodingError(path: path(key), reason: "must be a string") }
        return s
    }

    func optionalInteger(_ key: String) throws(NotificationDecodingError) -> Int64? {
        guard let value = optional(key) else { return nil }
        guard let i = value.intValue else { throw NotificationDecodingError(path: path(key), reason: "must be an integer") }
        return i
    }

    func optionalObject(_ key: String) throws(NotificationDecodingError) -> [String: JSONValue]? {
        guard let value = optional(key) else { return nil }
        guard let o = value.objectValue else { throw NotificationDecodingError(path: path(key), reason: "must be an object") }
        return o
    }

    func object(_ key: String) throws(NotificationDecodingError) -> JSONObjectReader {
        try JSONObjectReader(required(key), path: path(key))
    }

    func array(_ key: String) throws(NotificationDecodingError) -> [JSONValue] {
        guard let a = try required(key).arrayValue else { throw NotificationDecodingError(path: path(key), reason: "must be an array") }
        return a
    }

    func optionalArray(_ key: String) throws(NotificationDecodingError) -> [JSONValue]? {
        guard let value = optional(key) else { return nil }
        guard let a = value.arrayValue else { throw NotificationDecodingError(path: path(key), reason: "must be an array") }
        return a
    }

    /// A name (1 to 256 bytes), as identifiers must be.
    func name(_ key: String) throws(NotificationDecodingError) -> String {
        let s = try string(key)
        guard Names.isValid(s) else {
            throw NotificationDecodingError(path: path(key), reason: "must be 1 to \(Limits.maxNameBytes) bytes")
        }
        return s
    }

    /// Refuses members outside `allowed`, for the objects whose fields §3.6 closes.
    func rejectingUnknown(_ allowed: Set<String>) throws(NotificationDecodingError) -> JSONObjectReader {
        if let unknown = members.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw NotificationDecodingError(path: path(unknown), reason: "is not a known field")
        }
        return self
    }
}
