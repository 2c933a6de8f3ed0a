// JSONValue trees of user data of any nesting depth, for clients: parsed with an explicit
// stack (JSONWriter writes trees the same way), so the call stack never grows with the input.
// It must not recurse; the one recursion left is Swift's own release of a tree's nested
// arrays and objects (about 200 bytes of stack per level, measured), which is why clients
// keep user data as bytes and build a tree only when the application reads one.

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
