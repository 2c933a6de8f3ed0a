// The containers of a `JSONValue` tree: `JSONArray` and `JSONObject`, an `Array` and a
// `Dictionary` of values with value semantics (copy on write), each kept in a box of its own
// so that a tree of any depth is freed, compared and hashed without recursion. Freeing a tree
// by Swift's own release would recurse once per level (about 200 bytes of stack each): a
// box's `deinit` instead takes the children of every container that only it holds into one
// worklist and empties them before they are released, so each box dies empty.

/// The elements of a JSON array.
public struct JSONArray: Sendable, RandomAccessCollection, MutableCollection, RangeReplaceableCollection,
    ExpressibleByArrayLiteral
{
    var box: JSONArrayBox

    public init() { box = JSONArrayBox([]) }
    public init(_ elements: [JSONValue]) { box = JSONArrayBox(elements) }
    public init<S: Sequence>(_ elements: S) where S.Element == JSONValue { box = JSONArrayBox(Array(elements)) }
    public init(arrayLiteral elements: JSONValue...) { box = JSONArrayBox(elements) }

    /// The elements as an `Array` (no copy: the array shares the box's storage).
    public var elements: [JSONValue] { box.elements }

    public var startIndex: Int { 0 }
    public var endIndex: Int { box.elements.count }
    public var count: Int { box.elements.count }
    public var isEmpty: Bool { box.elements.isEmpty }

    public subscript(position: Int) -> JSONValue {
        get { box.elements[position] }
        set { mutate { $0[position] = newValue } }
    }

    public mutating func append(_ element: JSONValue) { mutate { $0.append(element) } }

    public mutating func append<S: Sequence>(contentsOf elements: S) where S.Element == JSONValue {
        mutate { $0.append(contentsOf: elements) }
    }

    public mutating func replaceSubrange<C: Collection>(_ range: Range<Int>, with elements: C) where C.Element == JSONValue {
        mutate { $0.replaceSubrange(range, with: elements) }
    }

    public mutating func reserveCapacity(_ n: Int) { mutate { $0.reserveCapacity(n) } }

    /// Runs `body` on storage only this array holds: copied first if it is shared.
    mutating func mutate<R>(_ body: (inout [JSONValue]) -> R) -> R {
        if !isKnownUniquelyReferenced(&box) { box = JSONArrayBox(box.elements) }
        return body(&box.elements)
    }
}

/// The members of a JSON object, by key.
public struct JSONObject: Sendable, Collection, ExpressibleByDictionaryLiteral {
    var box: JSONObjectBox

    public init() { box = JSONObjectBox([:]) }
    public init(_ members: [String: JSONValue]) { box = JSONObjectBox(members) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var members: [String: JSONValue] = [:]
        for (k, v) in elements { members[k] = v }
        box = JSONObjectBox(members)
    }

    /// The members as a `Dictionary` (no copy: the dictionary shares the box's storage).
    public var members: [String: JSONValue] { box.members }

    public typealias Index = Dictionary<String, JSONValue>.Index
    public typealias Element = (key: String, value: JSONValue)

    public var startIndex: Index { box.members.startIndex }
    public var endIndex: Index { box.members.endIndex }
    public func index(after i: Index) -> Index { box.members.index(after: i) }
    public subscript(position: Index) -> Element { box.members[position] }
    public var count: Int { box.members.count }
    public var isEmpty: Bool { box.members.isEmpty }
    public var keys: Dictionary<String, JSONValue>.Keys { box.members.keys }
    public var values: Dictionary<String, JSONValue>.Values { box.members.values }

    public subscript(key: String) -> JSONValue? {
        get { box.members[key] }
        set { mutate { $0[key] = newValue } }
    }

    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSONValue? { mutate { $0.removeValue(forKey: key) } }

    @discardableResult
    public mutating func updateValue(_ value: JSONValue, forKey key: String) -> JSONValue? {
        mutate { $0.updateValue(value, forKey: key) }
    }

    public func mapValues(_ transform: (JSONValue) throws -> JSONValue) rethrows -> JSONObject {
        JSONObject(try box.members.mapValues(transform))
    }

    /// Runs `body` on storage only this object holds: copied first if it is shared.
    mutating func mutate<R>(_ body: (inout [String: JSONValue]) -> R) -> R {
        if !isKnownUniquelyReferenced(&box) { box = JSONObjectBox(box.members) }
        return body(&box.members)
    }
}

extension JSONArray: Hashable {
    public static func == (a: JSONArray, b: JSONArray) -> Bool { JSONValue.array(a) == JSONValue.array(b) }
    public func hash(into hasher: inout Hasher) { JSONValue.array(self).hash(into: &hasher) }
}

extension JSONObject: Hashable {
    public static func == (a: JSONObject, b: JSONObject) -> Bool { JSONValue.object(a) == JSONValue.object(b) }
    public func hash(into hasher: inout Hasher) { JSONValue.object(self).hash(into: &hasher) }
}

/// A `JSONArray`'s storage. Only a `JSONArray` that holds it alone writes to it.
final class JSONArrayBox: @unchecked Sendable {
    var elements: [JSONValue]
    init(_ elements: [JSONValue]) { self.elements = elements }
    deinit { JSONValue.release(&elements) }
}

/// A `JSONObject`'s storage. Only a `JSONObject` that holds it alone writes to it.
final class JSONObjectBox: @unchecked Sendable {
    var members: [String: JSONValue]
    init(_ members: [String: JSONValue]) { self.members = members }
    deinit {
        guard !members.isEmpty else { return }
        var work = Array(members.values)
        members = [:]
        JSONValue.release(&work)
    }
}

extension JSONValue {
    /// An array value of these elements.
    public static func array(_ elements: [JSONValue]) -> JSONValue { .array(JSONArray(elements)) }

    /// An object value of these members.
    public static func object(_ members: [String: JSONValue]) -> JSONValue { .object(JSONObject(members)) }

    /// Releases the values of `work` with a worklist: a container that only `work` holds is
    /// emptied into it first, so the box released after it frees nothing nested. The box is
    /// taken out and the value dropped before the check, so that nothing but `box` holds it
    /// then; a shared container or a scalar is just released.
    static func release(_ work: inout [JSONValue]) {
        while !work.isEmpty {
            var value = work.removeLast()
            var array = value.arrayBox
            var object = value.objectBox
            value = .null
            if isKnownUniquelyReferenced(&array), let box = array, !box.elements.isEmpty {
                work.append(contentsOf: box.elements)
                box.elements = []
            } else if isKnownUniquelyReferenced(&object), let box = object, !box.members.isEmpty {
                work.append(contentsOf: box.members.values)
                box.members = [:]
            }
        }
    }

    var arrayBox: JSONArrayBox? {
        if case .array(let a) = self { return a.box }
        return nil
    }

    var objectBox: JSONObjectBox? {
        if case .object(let o) = self { return o.box }
        return nil
    }
}

extension JSONValue: Hashable {
    /// Equal trees: the same kinds, scalars and keys all the way down (an integer never
    /// equals a double). Compared with a worklist, in time linear in the trees.
    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        var pairs: [(JSONValue, JSONValue)] = [(a, b)]
        while let (x, y) = pairs.popLast() {
            switch (x, y) {
            case (.null, .null): continue
            case (.bool(let p), .bool(let q)): if p != q { return false }
            case (.integer(let p), .integer(let q)): if p != q { return false }
            case (.double(let p), .double(let q)): if p != q { return false }
            case (.string(let p), .string(let q)): if p != q { return false }
            case (.array(let p), .array(let q)):
                if p.box === q.box { continue }
                guard p.count == q.count else { return false }
                pairs.append(contentsOf: zip(p.box.elements, q.box.elements))
            case (.object(let p), .object(let q)):
                if p.box === q.box { continue }
                guard p.count == q.count else { return false }
                for (key, value) in p.box.members {
                    guard let other = q.box.members[key] else { return false }
                    pairs.append((value, other))
                }
            default:
                return false
            }
        }
        return true
    }

    /// Hashes the tree in one walk with a worklist: each node's kind and scalar, each
    /// container's size, an object's members in key order.
    public func hash(into hasher: inout Hasher) {
        func combine(_ kind: UInt8, _ value: some Hashable) {
            hasher.combine(kind)
            hasher.combine(value)
        }
        var work: [JSONValue] = [self]
        while let value = work.popLast() {
            switch value {
            case .null: hasher.combine(0 as UInt8)
            case .bool(let b): combine(1, b)
            case .integer(let i): combine(2, i)
            case .double(let d): combine(3, d)
            case .string(let s): combine(4, s)
            case .array(let a):
                combine(5, a.count)
                work.append(contentsOf: a.box.elements.reversed())
            case .object(let o):
                combine(6, o.count)
                let keys = o.box.members.keys.sorted()
                for key in keys { hasher.combine(key) }
                for key in keys.reversed() { work.append(o.box.members[key]!) }
            }
        }
    }
}
