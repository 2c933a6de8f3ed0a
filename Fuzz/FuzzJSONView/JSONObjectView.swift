// A JSON object as a fuzzer reads it from outside the code under test: every key in order,
// duplicates included, and each key's first occurrence (the one a decoder acts on) as raw
// bytes and, unless it nests too deeply, as a tree. It only reads; each fuzzer judges.
import NotifBusProtocol

/// The top-level members of one JSON object, read with the package's scanner and tree parser.
/// Raw bytes matter because user data is relayed byte for byte and may nest beyond the tree limit.
public struct JSONObjectView: Sendable {
    /// One key's first occurrence.
    public struct Member: Sendable {
        /// What the scanner says the value is.
        public let kind: JSONKind
        /// The value's bytes as written.
        public let raw: [UInt8]
        /// The value as a tree; nil only when it nests deeper than the tree parser accepts.
        public let value: JSONValue?
    }

    /// Keys in the order written, duplicates included.
    public let keys: [String]
    /// The first occurrence of each key.
    public let members: [String: Member]

    /// Nil when `bytes` are not one JSON object.
    public init?(_ bytes: [UInt8]) {
        var keys: [String] = []
        var members: [String: Member] = [:]
        let isObject = bytes.withUnsafeBytes { buffer -> Bool in
            var scanner = JSONScanner(buffer)
            guard let fields = try? scanner.scanTopLevelObject() else { return false }
            for field in fields {
                let key = scanner.key(of: field)
                keys.append(key)
                guard members[key] == nil else { continue }
                members[key] = Member(kind: field.kind, raw: scanner.raw(of: field), value: try? scanner.tree(of: field))
            }
            return true
        }
        guard isObject else { return nil }
        self.keys = keys
        self.members = members
    }

    public subscript(key: String) -> Member? { members[key] }

    /// The first occurrence of `key` when it is a string.
    public func string(_ key: String) -> String? { members[key]?.value?.stringValue }

    /// The first occurrence of `key` when it is an integer.
    public func integer(_ key: String) -> Int64? { members[key]?.value?.intValue }

    /// "o12" read as 12 for prefix "o"; nil for anything else.
    public func number(_ key: String, prefix: Character) -> Int? {
        guard let text = string(key), text.first == prefix else { return nil }
        return Int(text.dropFirst())
    }

    /// Present and not null.
    public func isGiven(_ key: String) -> Bool {
        guard let m = members[key] else { return false }
        return m.kind != .null
    }

    /// Whether the keys are exactly `expected`, each once.
    public func hasExactly(_ expected: Set<String>) -> Bool {
        keys.count == expected.count && Set(keys) == expected
    }

    /// The first key that is not in `allowed` or repeats an earlier one.
    public func firstOffendingKey(allowed: Set<String>) -> String? {
        var seen = Set<String>()
        for key in keys {
            if !allowed.contains(key) || !seen.insert(key).inserted { return key }
        }
        return nil
    }

    /// A member whose scanner kind disagrees with its tree, described; nil when they all agree.
    public func kindMismatch() -> String? {
        for (key, member) in members {
            if let value = member.value, !JSONObjectView.kind(member.kind, matches: value) {
                return "the scanner calls '\(key)' a \(member.kind) but its tree is \(value)"
            }
        }
        return nil
    }

    /// Whether a scanner kind and a tree are the same sort of JSON value.
    public static func kind(_ kind: JSONKind, matches value: JSONValue) -> Bool {
        switch (kind, value) {
        case (.object, .object), (.array, .array), (.string, .string), (.bool, .bool), (.null, .null),
            (.number, .integer), (.number, .double):
            return true
        default:
            return false
        }
    }
}
