// Codable through JSONValue: application types encode to the JSONValue a payload, result
// or slot value carries, and decode from it, without Foundation. Conversions only; it
// sends nothing.
import NotifBusProtocol

extension JSONValue {
    /// The JSON form of `value`, as its `Encodable` conformance writes it:
    ///
    ///     struct Launch: Codable { var emailId: String }
    ///     try await bus.put("launch", JSONValue(encoding: Launch(emailId: "e-1")))
    ///
    /// Throws `EncodingError` for a value JSON cannot hold (a NaN, an unsigned integer
    /// above `Int64.max`) or a type that encodes nothing.
    public init<T: Encodable>(encoding value: T) throws {
        let root = EncodingNode()
        try root.store(value, at: [])
        guard let encoded = root.resolved else {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "\(T.self) encoded no value"))
        }
        self = encoded
    }

    /// This JSON decoded as `type`, as its `Decodable` conformance reads it:
    ///
    ///     let launch = try await bus.take("launch")?.decode(Launch.self)
    ///
    /// Throws `DecodingError` naming the coding path where the JSON does not fit.
    public func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try JSONValueDecoder(self, codingPath: []).unbox(type)
    }
}

/// One value being encoded; containers fill it in place, so nested containers work.
final class EncodingNode {
    var value: JSONValue? = nil
    var members: [String: EncodingNode]? = nil
    var elements: [EncodingNode]? = nil

    var resolved: JSONValue? {
        if let members { return .object(members.compactMapValues(\.resolved)) }
        if let elements { return .array(elements.map { $0.resolved ?? .null }) }
        return value
    }

    func store<T: Encodable>(_ value: T, at path: [any CodingKey]) throws {
        if let json = value as? JSONValue {
            self.value = json
            return
        }
        try value.encode(to: JSONValueEncoder(node: self, codingPath: path))
    }

    func object() -> EncodingNode {
        if members == nil { members = [:] }
        return self
    }

    func array() -> EncodingNode {
        if elements == nil { elements = [] }
        return self
    }
}

/// A key for array positions and super encoders in coding paths.
struct IndexKey: CodingKey {
    let stringValue: String
    let intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue; intValue = nil }
    init(intValue: Int) { stringValue = String(intValue); self.intValue = intValue }
    static let superKey = IndexKey(stringValue: "super")
}

struct JSONValueEncoder: Encoder {
    let node: EncodingNode
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedEncoder<Key>(node: node.object(), codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedEncoder(node: node.array(), codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleEncoder(node: node, codingPath: codingPath)
    }
}

struct KeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    func child(_ key: Key) -> EncodingNode {
        let child = EncodingNode()
        node.members![key.stringValue] = child
        return child
    }

    mutating func encodeNil(forKey key: Key) throws { child(key).value = .null }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try child(key).store(value, at: codingPath + [key]) }
    mutating func encodeGeneric<T: Encodable>(_ value: T, forKey key: Key) throws { try child(key).store(value, at: codingPath + [key]) }

    mutating func encode(_ value: Bool, forKey key: Key) throws { try encodeGeneric(value, forKey: key) }
    mutating func encode(_ value: String, forKey key: Key) throws { try encodeGeneric(value, forKey: key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try encodeGeneric(value, forKey: key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try encodeGeneric(value, forKey: key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try encodeGeneric(value, forKey: key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try encodeGeneric(value, forKey: key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try encodeGeneric(value, forKey: key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try encodeGeneric(value, forKey: key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try encodeGeneric(value, forKey: key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try encodeGeneric(value, forKey: key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try encodeGeneric(value, forKey: key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try encodeGeneric(value, forKey: key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try encodeGeneric(value, forKey: key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try encodeGeneric(value, forKey: key) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(KeyedEncoder<NestedKey>(node: child(key).object(), codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        UnkeyedEncoder(node: child(key).array(), codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder {
        let child = EncodingNode()
        node.members![IndexKey.superKey.stringValue] = child
        return JSONValueEncoder(node: child, codingPath: codingPath + [IndexKey.superKey])
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        JSONValueEncoder(node: child(key), codingPath: codingPath + [key])
    }
}

struct UnkeyedEncoder: UnkeyedEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]
    var count: Int { node.elements!.count }

    func next() -> (EncodingNode, [any CodingKey]) {
        let child = EncodingNode()
        let path = codingPath + [IndexKey(intValue: node.elements!.count)]
        node.elements!.append(child)
        return (child, path)
    }

    mutating func encodeNil() throws { next().0.value = .null }
    mutating func encode<T: Encodable>(_ value: T) throws { let (child, path) = next(); try child.store(value, at: path) }
    mutating func encodeGeneric<T: Encodable>(_ value: T) throws { let (child, path) = next(); try child.store(value, at: path) }

    mutating func encode(_ value: Bool) throws { try encodeGeneric(value) }
    mutating func encode(_ value: String) throws { try encodeGeneric(value) }
    mutating func encode(_ value: Double) throws { try encodeGeneric(value) }
    mutating func encode(_ value: Float) throws { try encodeGeneric(value) }
    mutating func encode(_ value: Int) throws { try encodeGeneric(value) }
    mutating func encode(_ value: Int8) throws { try encodeGeneric(value) }
    mutating func encode(_ value: Int16) throws { try encodeGeneric(value) }
    mutating func encode(_ value: Int32) throws { try encodeGeneric(value) }
    mutating func encode(_ value: Int64) throws { try encodeGeneric(value) }
    mutating func encode(_ value: UInt) throws { try encodeGeneric(value) }
    mutating func encode(_ value: UInt8) throws { try encodeGeneric(value) }
    mutating func encode(_ value: UInt16) throws { try encodeGeneric(value) }
    mutating func encode(_ value: UInt32) throws { try encodeGeneric(value) }
    mutating func encode(_ value: UInt64) throws { try encodeGeneric(value) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let (child, path) = next()
        return KeyedEncodingContainer(KeyedEncoder<NestedKey>(node: child.object(), codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let (child, path) = next()
        return UnkeyedEncoder(node: child.array(), codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let (child, path) = next()
        return JSONValueEncoder(node: child, codingPath: path)
    }
}

struct SingleEncoder: SingleValueEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { node.value = .null }
    mutating func encode(_ value: Bool) throws { node.value = .bool(value) }
    mutating func encode(_ value: String) throws { node.value = .string(value) }
    mutating func encode(_ value: Double) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "JSON has no \(value)"))
        }
        node.value = .double(value)
    }
    mutating func encode(_ value: Float) throws { try encode(Double(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws { try node.store(value, at: codingPath) }
    mutating func integer<T: BinaryInteger>(_ value: T) throws {
        guard let exact = Int64(exactly: value) else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "\(value) does not fit a JSON integer (Int64)"))
        }
        node.value = .integer(exact)
    }

    mutating func encode(_ value: Int) throws { try integer(value) }
    mutating func encode(_ value: Int8) throws { try integer(value) }
    mutating func encode(_ value: Int16) throws { try integer(value) }
    mutating func encode(_ value: Int32) throws { try integer(value) }
    mutating func encode(_ value: Int64) throws { try integer(value) }
    mutating func encode(_ value: UInt) throws { try integer(value) }
    mutating func encode(_ value: UInt8) throws { try integer(value) }
    mutating func encode(_ value: UInt16) throws { try integer(value) }
    mutating func encode(_ value: UInt32) throws { try integer(value) }
    mutating func encode(_ value: UInt64) throws { try integer(value) }
}

/// Reads one JSONValue for a `Decodable` type.
struct JSONValueDecoder: Decoder {
    let value: JSONValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(_ value: JSONValue, codingPath: [any CodingKey]) {
        self.value = value
        self.codingPath = codingPath
    }

    func unbox<T: Decodable>(_ type: T.Type) throws -> T {
        if let json = value as? T { return json }
        return try T(from: self)
    }

    func mismatch(_ expected: String) -> DecodingError {
        DecodingError.typeMismatch(Any.self, .init(codingPath: codingPath, debugDescription: "expected \(expected), found \(value.text)"))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = value else { throw mismatch("an object") }
        return KeyedDecodingContainer(KeyedDecoder<Key>(members: members.members, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw mismatch("an array") }
        return UnkeyedDecoder(elements: elements.elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }
}

extension JSONValueDecoder: SingleValueDecodingContainer {
    func decodeNil() -> Bool { value.isNull }
    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let b) = value else { throw mismatch("a boolean") }
        return b
    }
    func decode(_ type: String.Type) throws -> String {
        guard case .string(let s) = value else { throw mismatch("a string") }
        return s
    }
    func decode(_ type: Double.Type) throws -> Double {
        switch value {
        case .double(let d): return d
        case .integer(let i): return Double(i)
        default: throw mismatch("a number")
        }
    }
    func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try unbox(type) }
    func integer<T: BinaryInteger>(_ type: T.Type) throws -> T {
        let exact: T?
        switch value {
        case .integer(let i): exact = T(exactly: i)
        case .double(let d): exact = d.rounded() == d ? T(exactly: d) : nil
        default: throw mismatch("an integer")
        }
        guard let exact else { throw mismatch("an integer that fits \(T.self)") }
        return exact
    }

    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }
}

struct KeyedDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [String: JSONValue]
    let codingPath: [any CodingKey]
    var allKeys: [Key] { members.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

    func child(_ key: Key) throws -> JSONValueDecoder {
        guard let value = members[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no member '\(key.stringValue)'"))
        }
        return JSONValueDecoder(value, codingPath: codingPath + [key])
    }

    func decodeNil(forKey key: Key) throws -> Bool { try child(key).value.isNull }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try child(key).unbox(type) }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try child(key).unbox(type) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try child(key).unbox(type) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try child(key).unbox(type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try child(key).unbox(type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try child(key).unbox(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try child(key).unbox(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try child(key).unbox(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try child(key).unbox(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try child(key).unbox(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try child(key).unbox(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try child(key).unbox(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try child(key).unbox(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try child(key).unbox(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try child(key).unbox(type) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try child(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try child(key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        JSONValueDecoder(members[IndexKey.superKey.stringValue] ?? .null, codingPath: codingPath + [IndexKey.superKey])
    }

    func superDecoder(forKey key: Key) throws -> any Decoder { try child(key) }
}

struct UnkeyedDecoder: UnkeyedDecodingContainer {
    let elements: [JSONValue]
    let codingPath: [any CodingKey]
    private(set) var currentIndex = 0
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    init(elements: [JSONValue], codingPath: [any CodingKey]) {
        self.elements = elements
        self.codingPath = codingPath
    }

    mutating func next() throws -> JSONValueDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                Any.self,
                .init(
                    codingPath: codingPath + [IndexKey(intValue: currentIndex)],
                    debugDescription: "the array has only \(elements.count) elements"))
        }
        defer { currentIndex += 1 }
        return JSONValueDecoder(elements[currentIndex], codingPath: codingPath + [IndexKey(intValue: currentIndex)])
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, elements[currentIndex].isNull else { return false }
        currentIndex += 1
        return true
    }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().unbox(type) }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next().unbox(type) }
    mutating func decode(_ type: String.Type) throws -> String { try next().unbox(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next().unbox(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next().unbox(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next().unbox(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next().unbox(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next().unbox(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next().unbox(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next().unbox(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next().unbox(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next().unbox(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next().unbox(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next().unbox(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next().unbox(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }

    mutating func superDecoder() throws -> any Decoder { try next() }
}
