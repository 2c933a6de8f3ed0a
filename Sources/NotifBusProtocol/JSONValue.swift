// A JSON document as a Swift value, for clients, tests and the few broker paths that
// need a tree. The broker's hot path never builds one: it forwards user data as raw bytes.

/// A JSON value. Integers written without fraction or exponent that fit in 64 bits are
/// `.integer`; every other number is `.double`. A tree of any depth is built, compared,
/// hashed, encoded and freed without recursion (`JSONContainers.swift`, `JSONWriter`,
/// `init(parsingAnyDepth:)`).
public enum JSONValue: Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array(JSONArray)
    case object(JSONObject)

    /// Parses one JSON document (UTF-8 bytes), rejecting trailing content.
    public init(parsing bytes: some Collection<UInt8>) throws(JSONError) {
        let array = Array(bytes)
        let result: Result<JSONValue, JSONError> = array.withUnsafeBytes { buffer in
            var scanner = JSONScanner(buffer)
            do throws(JSONError) { return .success(try scanner.parseDocument()) } catch { return .failure(error) }
        }
        self = try result.get()
    }

    /// The compact encoding of a protocol message, an object: `op` first, then the members
    /// of the per-event frames in the order PROTOCOL.md lists them, then any other member by
    /// name; every value as `encoded` writes it. Member order means nothing on the wire, but
    /// the broker reads the per-event frames fastest in this order (PROTOCOL.md 3.4). Anything
    /// but an object is `encoded`.
    public var messageEncoded: [UInt8] {
        guard case .object(let members) = self else { return encoded }
        var out = FrameBuilder(capacity: 64, lengthPrefix: false)
        out.byte(UInt8(ascii: "{"))
        let keys = members.keys.sorted { a, b in
            let (ra, rb) = (JSONValue.messageRank(a), JSONValue.messageRank(b))
            return ra != rb ? ra < rb : a < b
        }
        for (i, key) in keys.enumerated() {
            if i > 0 { out.byte(UInt8(ascii: ",")) }
            out.string(key)
            out.byte(UInt8(ascii: ":"))
            JSONWriter.append(members[key]!, to: &out)
        }
        out.byte(UInt8(ascii: "}"))
        return out.finish()
    }

    /// Where a top-level member goes in `messageEncoded`: the listed ones in this order, any
    /// other after them.
    static func messageRank(_ key: String) -> Int {
        switch key {
        case "op": 0
        case "id": 1
        case "call": 2
        case "event": 3
        case "channel": 4
        case "method": 5
        case "name": 6
        case "arguments", "once": 7
        case "payload": 8
        case "result": 9
        case "value": 10
        default: 11
        }
    }

    /// Parses one JSON document from text.
    public init(parsing text: String) throws(JSONError) {
        try self.init(parsing: Array(text.utf8))
    }

    /// The compact UTF-8 encoding, object keys sorted so the output is deterministic.
    public var encoded: [UInt8] {
        var out = FrameBuilder(capacity: 64, lengthPrefix: false)
        JSONWriter.append(self, to: &out)
        return out.finish()
    }

    /// The compact encoding as text.
    public var text: String { String(decoding: encoded, as: UTF8.self) }

    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var intValue: Int64? {
        if case .integer(let i) = self { return i }
        return nil
    }

    public var doubleValue: Double? {
        switch self {
        case .integer(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a.elements }
        return nil
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o.members }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

extension JSONValue: ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var members: [String: JSONValue] = [:]
        for (k, v) in elements { members[k] = v }
        self = .object(JSONObject(members))
    }
}

extension JSONValue: CustomStringConvertible {
    public var description: String { text }
}

/// Why bytes are not a JSON document.
public struct JSONError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Byte offset where the problem was found.
    public let offset: Int
    public let reason: String

    public init(offset: Int, reason: String) {
        self.offset = offset
        self.reason = reason
    }

    public var description: String { "\(reason) at byte \(offset)" }
}
