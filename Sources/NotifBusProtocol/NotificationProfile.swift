// The notification profile of §3.6 as wire rules: payload schemas of the three delegate
// events, the category set, and presentation options. It checks and summarizes; the
// core decides what the summaries mean (action checks, launch retention).

/// The event names that mirror `UNUserNotificationCenterDelegate`.
public enum ProfileEvent: String, Sendable {
    case willPresent
    case didReceive
    case openSettings
}

/// Why a profile payload or category set was refused.
public struct ProfileError: Error, Sendable {
    public let message: String
    init(_ message: String) { self.message = message }
}

/// What the broker needs to know of a checked profile payload.
public enum ProfilePayload: Sendable, Equatable {
    case willPresent
    case didReceive(actionIdentifier: String, hasUserText: Bool, categoryIdentifier: String?)
    case openSettings

    /// The reserved action identifiers of `UNNotificationResponse`.
    public static let defaultActionIdentifier = "com.apple.UNNotificationDefaultActionIdentifier"
    public static let dismissActionIdentifier = "com.apple.UNNotificationDismissActionIdentifier"

    static func check(_ kind: ProfileEvent, _ payload: JSONField?, _ s: JSONScanner) throws(ProfileError) -> ProfilePayload {
        switch kind {
        case .openSettings:
            guard let payload else { return .openSettings }
            let members = try objectMembers(payload, s, "payload")
            if let n = member("notification", members, s), n.kind != .null {
                _ = try checkNotification(n, s)
            }
            return .openSettings
        case .willPresent:
            guard let payload else { throw ProfileError("payload must be an object") }
            let members = try objectMembers(payload, s, "payload")
            guard let n = member("notification", members, s) else { throw ProfileError("missing 'notification'") }
            _ = try checkNotification(n, s)
            return .willPresent
        case .didReceive:
            guard let payload else { throw ProfileError("payload must be an object") }
            let members = try objectMembers(payload, s, "payload")
            guard let a = member("actionIdentifier", members, s), let action = s.string(of: a) else {
                throw ProfileError("'actionIdentifier' must be a string")
            }
            var hasUserText = false
            if let t = member("userText", members, s), t.kind != .null {
                guard t.kind == .string else { throw ProfileError("'userText' must be a string") }
                hasUserText = true
            }
            guard let n = member("notification", members, s) else { throw ProfileError("missing 'notification'") }
            let category = try checkNotification(n, s)
            return .didReceive(actionIdentifier: action, hasUserText: hasUserText, categoryIdentifier: category)
        }
    }

    /// Checks a Notification object and returns its category identifier.
    static func checkNotification(_ field: JSONField, _ s: JSONScanner) throws(ProfileError) -> String? {
        let members = try objectMembers(field, s, "notification")
        guard let id = member("identifier", members, s), id.kind == .string else {
            throw ProfileError("'notification.identifier' must be a string")
        }
        if let source = member("source", members, s), source.kind != .null {
            let value = s.string(of: source)
            guard value == "remote" || value == "local" else {
                throw ProfileError("'notification.source' must be \"remote\" or \"local\"")
            }
        }
        guard let content = member("content", members, s) else { throw ProfileError("missing 'notification.content'") }
        let fields = try objectMembers(content, s, "notification.content")
        var category: String? = nil
        for f in fields where f.kind != .null {
            switch s.key(of: f) {
            case "title", "subtitle", "body", "threadIdentifier", "sound":
                guard f.kind == .string else { throw ProfileError("'notification.content.\(s.key(of: f))' must be a string") }
            case "categoryIdentifier":
                guard let c = s.string(of: f) else { throw ProfileError("'notification.content.categoryIdentifier' must be a string") }
                category = c
            case "userInfo":
                guard f.kind == .object else { throw ProfileError("'notification.content.userInfo' must be an object") }
            case "badge":
                guard s.integer(of: f) != nil else { throw ProfileError("'notification.content.badge' must be an integer") }
            default:
                break
            }
        }
        return category
    }

    static func objectMembers(_ f: JSONField, _ s: JSONScanner, _ what: String) throws(ProfileError) -> [JSONField] {
        guard let members = s.members(of: f) else { throw ProfileError("'\(what)' must be an object") }
        return members
    }

    static func member(_ key: StaticString, _ members: [JSONField], _ s: JSONScanner) -> JSONField? {
        for m in members where s.keyIs(m, key) { return m }
        return nil
    }
}

/// `UNNotificationPresentationOptions` on the wire.
public enum PresentationOptionNames {
    public static let all: Set<String> = ["badge", "sound", "list", "banner", "alert"]

    /// Whether raw JSON is a valid `willPresent` completion: an array of distinct known names.
    public static func isValidCompletion(_ raw: RawJSON?) -> Bool {
        guard let raw else { return false }
        return raw.withUnsafeBytes { buffer in
            var scanner = JSONScanner(buffer)
            guard case .array(let elements)? = try? scanner.parseDocument() else { return false }
            var seen = Set<String>()
            for e in elements {
                guard case .string(let name) = e, all.contains(name), seen.insert(name).inserted else { return false }
            }
            return true
        }
    }
}

/// A validated category set: the array exactly as accepted, and the rules it implies.
public struct CategorySet: Sendable, Equatable {
    public struct Action: Sendable, Equatable {
        public let foreground: Bool
        public let textInput: Bool
    }

    public struct Category: Sendable, Equatable {
        public let customDismissAction: Bool
        public let actions: [String: Action]
    }

    public static let actionOptions: Set<String> = ["foreground", "destructive", "authenticationRequired"]
    public static let categoryOptions: Set<String> = [
        "customDismissAction", "allowInCarPlay", "hiddenPreviewsShowTitle", "hiddenPreviewsShowSubtitle",
    ]

    /// The accepted array, byte for byte.
    public let raw: RawJSON
    public let categories: [String: Category]

    public static let empty = CategorySet(raw: Array("[]".utf8), categories: [:])

    public init(raw: RawJSON, categories: [String: Category]) {
        self.raw = raw
        self.categories = categories
    }

    /// Parses a stored or received array.
    public static func parse(_ raw: RawJSON) throws(ProfileError) -> CategorySet {
        let result: Result<CategorySet, ProfileError> = raw.withUnsafeBytes { buffer in
            var scanner = JSONScanner(buffer)
            scanner.skipWhitespace()
            let start = scanner.position
            guard let kind = try? scanner.skipValue() else { return .failure(ProfileError("categories are not valid JSON")) }
            scanner.skipWhitespace()
            guard scanner.position == buffer.count else { return .failure(ProfileError("trailing bytes after categories")) }
            do throws(ProfileError) {
                return .success(try parse(JSONField(start: start, end: scanner.position, kind: kind), scanner))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    static func parse(_ field: JSONField, _ s: JSONScanner) throws(ProfileError) -> CategorySet {
        guard let elements = s.elements(of: field) else { throw ProfileError("'categories' must be an array") }
        var categories: [String: Category] = [:]
        for (i, e) in elements.enumerated() {
            let at = "categories[\(i)]"
            let members = try strictMembers(e, s, at, allowed: ["identifier", "actions", "options", "intentIdentifiers"])
            let identifier = try name("identifier", members, s, at)
            guard categories[identifier] == nil else { throw ProfileError("duplicate category identifier '\(identifier)'") }
            let options = try optionList(members, s, at, allowed: categoryOptions)
            if let intents = ProfilePayload.member("intentIdentifiers", members, s), intents.kind != .null {
                guard let list = s.elements(of: intents) else { throw ProfileError("'\(at).intentIdentifiers' must be an array") }
                for item in list {
                    guard let n = s.string(of: item), Names.isValid(n) else {
                        throw ProfileError("'\(at).intentIdentifiers' entries must be names of 1 to \(Limits.maxNameBytes) bytes")
                    }
                }
            }
            guard let actionsField = ProfilePayload.member("actions", members, s), let actionList = s.elements(of: actionsField) else {
                throw ProfileError("'\(at).actions' must be an array")
            }
            var actions: [String: Action] = [:]
            for (j, a) in actionList.enumerated() {
                let aat = "\(at).actions[\(j)]"
                let am = try strictMembers(a, s, aat, allowed: ["identifier", "title", "options", "textInput"])
                let aid = try name("identifier", am, s, aat)
                guard actions[aid] == nil else {
                    throw ProfileError("duplicate action identifier '\(aid)' in category '\(identifier)'")
                }
                guard let t = ProfilePayload.member("title", am, s), t.kind == .string else {
                    throw ProfileError("'\(aat).title' must be a string")
                }
                let aopts = try optionList(am, s, aat, allowed: actionOptions)
                var textInput = false
                if let ti = ProfilePayload.member("textInput", am, s), ti.kind != .null {
                    let tm = try strictMembers(ti, s, "\(aat).textInput", allowed: ["buttonTitle", "placeholder"])
                    guard let b = ProfilePayload.member("buttonTitle", tm, s), b.kind == .string else {
                        throw ProfileError("'\(aat).textInput.buttonTitle' must be a string")
                    }
                    if let p = ProfilePayload.member("placeholder", tm, s), p.kind != .null, p.kind != .string {
                        throw ProfileError("'\(aat).textInput.placeholder' must be a string")
                    }
                    textInput = true
                }
                actions[aid] = Action(foreground: aopts.contains("foreground"), textInput: textInput)
            }
            categories[identifier] = Category(customDismissAction: options.contains("customDismissAction"), actions: actions)
        }
        return CategorySet(raw: s.raw(of: field), categories: categories)
    }

    static func strictMembers(_ f: JSONField, _ s: JSONScanner, _ at: String, allowed: [StaticString]) throws(ProfileError) -> [JSONField] {
        guard let members = s.members(of: f) else { throw ProfileError("'\(at)' must be an object") }
        for (i, m) in members.enumerated() {
            guard allowed.contains(where: { s.keyIs(m, $0) }) else { throw ProfileError("unknown field '\(at).\(s.key(of: m))'") }
            for n in members[..<i] where s.sameKey(n, m) { throw ProfileError("duplicate field '\(at).\(s.key(of: m))'") }
        }
        return members
    }

    static func name(_ key: StaticString, _ members: [JSONField], _ s: JSONScanner, _ at: String) throws(ProfileError) -> String {
        guard let f = ProfilePayload.member(key, members, s), let n = s.string(of: f), Names.isValid(n) else {
            throw ProfileError("'\(at).\(key)' must be a name of 1 to \(Limits.maxNameBytes) bytes")
        }
        return n
    }

    static func optionList(_ members: [JSONField], _ s: JSONScanner, _ at: String, allowed: Set<String>) throws(ProfileError) -> Set<String> {
        guard let f = ProfilePayload.member("options", members, s), f.kind != .null else { return [] }
        guard let list = s.elements(of: f) else { throw ProfileError("'\(at).options' must be an array") }
        var out = Set<String>()
        for item in list {
            guard let o = s.string(of: item) else { throw ProfileError("'\(at).options' entries must be strings") }
            guard allowed.contains(o) else { throw ProfileError("unknown option '\(o)' in '\(at).options'") }
            out.insert(o)
        }
        return out
    }
}
