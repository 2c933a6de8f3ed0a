// The top-level members of a body as a reader outside the decoder sees them: every key in
// order, and for each key its first occurrence (the one the decoder acts on) as raw bytes
// and as a tree. Used as the oracle the decoder's typed results are checked against.
import NotifBusProtocol

struct TopLevelView {
    struct Member {
        let kind: JSONKind
        let raw: [UInt8]
        /// Nil only when the value nests deeper than the tree parser accepts.
        let value: JSONValue?
    }

    /// Keys in the order written, duplicates included.
    let keys: [String]
    /// The first occurrence of each key.
    let members: [String: Member]

    /// Nil when the body is not a JSON object.
    init?(_ body: [UInt8]) {
        var keys: [String] = []
        var members: [String: Member] = [:]
        let isObject = body.withUnsafeBytes { buffer -> Bool in
            var scanner = JSONScanner(buffer)
            guard let fields = try? scanner.scanTopLevelObject() else { return false }
            for field in fields {
                let key = scanner.key(of: field)
                keys.append(key)
                guard members[key] == nil else { continue }
                let value = try? scanner.tree(of: field)
                members[key] = Member(kind: field.kind, raw: scanner.raw(of: field), value: value)
            }
            return true
        }
        guard isObject else { return nil }
        self.keys = keys
        self.members = members
        for (key, member) in members {
            if let value = member.value, !TopLevelView.kind(member.kind, matches: value) {
                violation("the scanner calls '\(key)' a \(member.kind) but its tree is \(value)")
            }
        }
    }

    subscript(key: String) -> Member? { members[key] }

    /// The first occurrence of `key` when it is a string.
    func string(_ key: String) -> String? { members[key]?.value?.stringValue }

    /// Present and not null.
    func isGiven(_ key: String) -> Bool {
        guard let m = members[key] else { return false }
        return m.kind != .null
    }

    /// The first key that is not in `allowed` or repeats an earlier one.
    func firstOffendingKey(allowed: Set<String>) -> String? {
        var seen = Set<String>()
        for key in keys {
            if !allowed.contains(key) || !seen.insert(key).inserted { return key }
        }
        return nil
    }

    static func kind(_ kind: JSONKind, matches value: JSONValue) -> Bool {
        switch (kind, value) {
        case (.object, .object), (.array, .array), (.string, .string), (.bool, .bool), (.null, .null),
            (.number, .integer), (.number, .double):
            return true
        default:
            return false
        }
    }
}
