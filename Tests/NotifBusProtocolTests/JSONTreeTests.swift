// JSONValue trees of user data at every depth and width the tests can afford: built by
// `init(parsingAnyDepth:)` and by hand, then compared, hashed, encoded, copied with a change
// and freed. A 100,000-deep tree takes tens of megabytes of stack for any of these done by
// recursion (about 200 bytes a level), more than a thread has: these tests crash a tree type
// that recurses. How the time grows is `notifbus-microbench tree-growth` (Benchmarks/).
import NotifBusProtocol
import TestSupport
import Testing

@Suite struct JSONTreeTests {
    static func nestedArrays(_ depth: Int) -> [UInt8] {
        Array((String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth)).utf8)
    }

    static func nestedObjects(_ depth: Int) -> [UInt8] {
        Array((String(repeating: "{\"a\":", count: depth) + "1" + String(repeating: "}", count: depth)).utf8)
    }

    /// Every operation on one tree: its twin parsed apart is equal with an equal hash, it
    /// encodes to its text, a changed copy differs while the original stays as it was, and
    /// all of it is freed at the end of the scope.
    static func everyOperation(_ text: [UInt8], depth expected: Int) throws {
        let value = try JSONValue(parsingAnyDepth: text)
        let twin = try JSONValue(parsingAnyDepth: text)
        #expect(depth(of: value) == expected)
        #expect(value == twin)
        #expect(value.hashValue == twin.hashValue)
        #expect(value.encoded == text)
        let copy = changedCopy(of: value)
        #expect(copy != value)
        #expect(value == twin)
        #expect(value.encoded == text)
        #expect(copy.encoded != text)
    }

    @Test(arguments: [100, 1_000, 10_000, 100_000])
    func deepArrays(depth: Int) throws {
        try JSONTreeTests.everyOperation(JSONTreeTests.nestedArrays(depth), depth: depth)
    }

    @Test(arguments: [100, 1_000, 10_000, 100_000])
    func deepObjects(depth: Int) throws {
        try JSONTreeTests.everyOperation(JSONTreeTests.nestedObjects(depth), depth: depth)
    }

    @Test(arguments: [1_000, 10_000, 100_000])
    func wideArraysAndObjects(width: Int) throws {
        let array = Array(("[" + (0..<width).map { String($0) }.joined(separator: ",") + "]").utf8)
        try JSONTreeTests.everyOperation(array, depth: 1)
        #expect(try JSONValue(parsingAnyDepth: array).arrayValue?.count == width)
        let keys = (0..<width).map { "k\($0)" }.sorted()
        let object = Array(("{" + keys.enumerated().map { "\"\($1)\":\($0)" }.joined(separator: ",") + "}").utf8)
        try JSONTreeTests.everyOperation(object, depth: 1)
        #expect(try JSONValue(parsingAnyDepth: object).objectValue?.count == width)
    }

    /// A tree built by hand, not parsed, 100,000 deep, of arrays and objects in turn, with a
    /// subtree shared by two parents: compared, hashed, encoded and freed.
    @Test func deepTreeBuiltByHand() {
        var value: JSONValue = .integer(7)
        for level in 0..<100_000 { value = level % 2 == 0 ? .array([value]) : .object(["a": value]) }
        let shared = value
        var both: JSONValue = .array([value, shared])
        #expect(depth(of: both) == 100_001)
        #expect(both == .array([shared, value]))
        #expect(both.hashValue == JSONValue.array([shared, value]).hashValue)
        #expect(both.encoded.count == 2 * (100_000 / 2 * 8 + 1) + 3)
        value = .null
        #expect(depth(of: shared) == 100_000)
        both = .null
        #expect(depth(of: shared) == 100_000)
    }

    /// Equality tells trees apart at the bottom and by kind, and hashing agrees with it.
    @Test func equalityAndHashAtTheBottom() throws {
        let a = try JSONValue(parsingAnyDepth: JSONTreeTests.nestedArrays(50_000))
        let b = try JSONValue(parsingAnyDepth: JSONTreeTests.nestedArrays(50_000).map { $0 == UInt8(ascii: "1") ? UInt8(ascii: "2") : $0 })
        #expect(a != b)
        #expect(JSONValue.integer(1) != JSONValue.double(1))
        #expect(JSONValue.object(["a": 1, "b": [2]]) == JSONValue.object(["b": [2], "a": 1]))
        #expect(JSONValue.object(["a": 1, "b": [2]]).hashValue == JSONValue.object(["b": [2], "a": 1]).hashValue)
        #expect(JSONValue.object(["a": 1]) != JSONValue.object(["b": 1]))
        #expect(JSONValue.array([1, 2]) != JSONValue.array([2, 1]))
        let set: Set<JSONValue> = [a, b, a]
        #expect(set.count == 2)
    }
}
