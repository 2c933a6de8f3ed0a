// A JSON object as the fuzzer reads what the broker wrote: every key in order, and each
// key's first occurrence as raw bytes and, unless it nests too deeply, as a tree. Raw
// bytes matter because user data is relayed byte for byte and may nest beyond the tree limit.
import NotifBusProtocol

struct FrameView {
    struct Member {
        let kind: JSONKind
        let raw: [UInt8]
        let value: JSONValue?
    }

    let keys: [String]
    let members: [String: Member]

    /// Nil when `bytes` are not one JSON object.
    init?(_ bytes: [UInt8]) {
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

    subscript(key: String) -> Member? { members[key] }

    func string(_ key: String) -> String? { members[key]?.value?.stringValue }

    func integer(_ key: String) -> Int64? { members[key]?.value?.intValue }

    /// "o12" read as 12 for prefix "o"; nil for anything else.
    func number(_ key: String, prefix: Character) -> Int? {
        guard let text = string(key), text.first == prefix else { return nil }
        return Int(text.dropFirst())
    }

    /// Whether the keys are exactly `expected`, each once.
    func hasExactly(_ expected: Set<String>) -> Bool {
        keys.count == expected.count && Set(keys) == expected
    }
}
