// JSONValue trees of user data of any nesting depth, for clients: parsed with an explicit
// stack whose open containers grow in place (each value appended once: time linear in the
// input), so the call stack never grows with the input. JSONWriter writes trees the same
// way, and a tree's containers free, compare and hash themselves with worklists
// (`JSONContainers.swift`).

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
    /// value comes next. Kept on the stack and grown where it lies, never copied.
    private struct Partial {
        var isObject: Bool
        var elements: [JSONValue] = []
        var members: [String: JSONValue] = [:]
        var key: String = ""
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
                    value = .object(JSONObject())
                } else {
                    stack.append(Partial(isObject: true, key: try readKeyAndColonForTree()))
                    continue parsing
                }
            case UInt8(ascii: "["):
                position += 1
                skipWhitespace()
                if position < count, base[position] == UInt8(ascii: "]") {
                    position += 1
                    value = .array(JSONArray())
                } else {
                    stack.append(Partial(isObject: false))
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
            while !stack.isEmpty {
                skipWhitespace()
                guard position < count else { throw fail("unterminated container") }
                let b = base[position]
                position += 1
                let top = stack.count - 1
                if stack[top].isObject {
                    stack[top].members[stack[top].key] = value
                    if b == UInt8(ascii: ",") {
                        stack[top].key = try readKeyAndColonForTree()
                        continue parsing
                    }
                    guard b == UInt8(ascii: "}") else { throw fail("expected ',' or '}'", at: position - 1) }
                    value = .object(JSONObject(stack.removeLast().members))
                } else {
                    stack[top].elements.append(value)
                    if b == UInt8(ascii: ",") { continue parsing }
                    guard b == UInt8(ascii: "]") else { throw fail("expected ',' or ']'", at: position - 1) }
                    value = .array(JSONArray(stack.removeLast().elements))
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
