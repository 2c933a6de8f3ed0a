// JSONValue trees of user data of any nesting depth, for clients: built and written with an
// explicit stack, so the call stack never grows with the input. It must not recurse; the one
// recursion left is Swift's own release of a tree's nested arrays and objects (about 200
// bytes of stack per level, measured), which is why clients keep user data as bytes and build
// a tree only when the application reads one.

extension JSONValue {
    /// Parses one JSON document of any nesting depth (UTF-8 bytes), rejecting trailing
    /// content. Duplicate object keys keep the last value, as `init(parsing:)` does.
    public init(parsingAnyDepth bytes: some Collection<UInt8>) throws(JSONError) {
        let array = Array(bytes)
        let result: Result<JSONValue, JSONError> = array.withUnsafeBytes { buffer in
            var scanner = JSONScanner(buffer)
            do throws(JSONError) { return .success(try scanner.parseDocumentAnyDepth()) } catch { return .failure(error) }
        }
        self = try result.get()
    }

    /// The compact UTF-8 encoding, object keys sorted, as `encoded`, for trees of any depth.
    public var encodedAnyDepth: [UInt8] {
        var out: [UInt8] = []
        appendAnyDepth(to: &out)
        return out
    }

    /// Appends the compact encoding (object keys sorted) with an explicit stack.
    public func appendAnyDepth(to out: inout [UInt8]) {
        // Each open container: its remaining elements, or its remaining sorted keys and members.
        enum Open {
            case array(IndexingIterator<[JSONValue]>, first: Bool)
            case object(IndexingIterator<[String]>, [String: JSONValue], first: Bool)
        }
        var stack: [Open] = []
        var next: JSONValue? = self
        while true {
            if let value = next {
                next = nil
                switch value {
                case .array(let elements):
                    out.append(UInt8(ascii: "["))
                    stack.append(.array(elements.makeIterator(), first: true))
                case .object(let members):
                    out.append(UInt8(ascii: "{"))
                    stack.append(.object(members.keys.sorted().makeIterator(), members, first: true))
                default:
                    JSONWriter.append(value, to: &out)  // a scalar: no nesting
                }
            }
            guard let top = stack.popLast() else { return }
            switch top {
            case .array(var elements, let first):
                if let element = elements.next() {
                    if !first { out.append(UInt8(ascii: ",")) }
                    stack.append(.array(elements, first: false))
                    next = element
                } else {
                    out.append(UInt8(ascii: "]"))
                }
            case .object(var keys, let members, let first):
                if let key = keys.next() {
                    if !first { out.append(UInt8(ascii: ",")) }
                    JSONWriter.appendString(key, to: &out)
                    out.append(UInt8(ascii: ":"))
                    stack.append(.object(keys, members, first: false))
                    next = members[key]!
                } else {
                    out.append(UInt8(ascii: "}"))
                }
            }
        }
    }
}

extension JSONScanner {
    /// A container being filled: its elements so far, or its members so far and the key whose
    /// value comes next.
    private enum Partial {
        case array([JSONValue])
        case object([String: JSONValue], key: String)
    }

    /// Parses a whole document of any depth into a tree, rejecting trailing bytes.
    public mutating func parseDocumentAnyDepth() throws(JSONError) -> JSONValue {
        var stack: [Partial] = []
        parsing: while true {
            skipWhitespace()
            guard position < count else { throw fail("expected a value") }
            var value: JSONValue
            switch base[position] {
            case UInt8(ascii: "{"):
                position += 1
                skipWhitespace()
                if position < count, base[position] == UInt8(ascii: "}") {
                    position += 1
                    value = .object([:])
                } else {
                    stack.append(.object([:], key: try readKeyAndColonForTree()))
                    continue parsing
                }
            case UInt8(ascii: "["):
                position += 1
                skipWhitespace()
                if position < count, base[position] == UInt8(ascii: "]") {
                    position += 1
                    value = .array([])
                } else {
                    stack.append(.array([]))
                    continue parsing
                }
            case UInt8(ascii: "\""):
                value = .string(try readString())
            case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
                let first = base[position]
                value = try skipValue() == .null ? .null : .bool(first == UInt8(ascii: "t"))
            default:
                let start = position
                guard base[start] == UInt8(ascii: "-") || (base[start] >= 0x30 && base[start] <= 0x39) else {
                    throw fail("unexpected byte")
                }
                let integral = try skipNumber()
                value = JSONScanner.number(UnsafeRawBufferPointer(rebasing: bytes[start..<position]), integral: integral)
            }
            // A value is complete: put it into the containers it closes, innermost first.
            while let open = stack.popLast() {
                skipWhitespace()
                guard position < count else { throw fail("unterminated container") }
                let b = base[position]
                position += 1
                switch open {
                case .array(var elements):
                    elements.append(value)
                    if b == UInt8(ascii: ",") {
                        stack.append(.array(elements))
                        continue parsing
                    }
                    guard b == UInt8(ascii: "]") else { throw fail("expected ',' or ']'", at: position - 1) }
                    value = .array(elements)
                case .object(var members, let key):
                    members[key] = value
                    if b == UInt8(ascii: ",") {
                        stack.append(.object(members, key: try readKeyAndColonForTree()))
                        continue parsing
                    }
                    guard b == UInt8(ascii: "}") else { throw fail("expected ',' or '}'", at: position - 1) }
                    value = .object(members)
                }
            }
            skipWhitespace()
            if position != count { throw fail("trailing bytes after the value") }
            return value
        }
    }

    private mutating func readKeyAndColonForTree() throws(JSONError) -> String {
        skipWhitespace()
        guard position < count, base[position] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
        let key = try readString()
        skipWhitespace()
        guard position < count, base[position] == UInt8(ascii: ":") else { throw fail("expected ':'") }
        position += 1
        return key
    }
}
