// The JSON scanner, tree parser and writer, byte-level: grammar edge cases, UTF-8
// validation, escapes, deep nesting without recursion, and exact numbers.
import NotifBusProtocol
import Testing

func scanTop(_ text: String) -> Result<[JSONField], JSONError> {
    let bytes = Array(text.utf8)
    return bytes.withUnsafeBytes { buffer in
        var s = JSONScanner(buffer)
        do throws(JSONError) { return .success(try s.scanTopLevelObject()) } catch { return .failure(error) }
    }
}

@Suite struct JSONTests {
    @Test(arguments: [
        "{}", " {\"a\" : [1, -2.5e+3, true, false, null, \"x\"]} ", "{\"\\u00e9\\ud83d\\ude00\":{\"b\":{}}}",
        "{\"a\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}", "{\"a\":0}", "{\"a\":-0.0}", "{\"a\":1E5}", "{\"lone\":\"\\ud800\"}",
        "{\"é\":\"日本\"}",
    ])
    func validObjects(_ text: String) {
        guard case .success = scanTop(text) else {
            Issue.record("rejected: \(text)")
            return
        }
        #expect((try? JSONValue(parsing: text)) != nil)
    }

    @Test(arguments: [
        "", "[]", "1", "\"s\"", "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{,}", "{\"a\":01}", "{\"a\":1.}", "{\"a\":.5}",
        "{\"a\":1e}", "{\"a\":-}", "{\"a\":tru}", "{\"a\":NaN}", "{\"a\":\"\\x\"}", "{\"a\":\"\\u12g4\"}", "{\"a\":\"open}",
        "{\"a\":[1,2}", "{\"a\":1}}", "{\"a\":1} {", "{a:1}", "{\"a\":'x'}", "{\"a\":\"tab\there\"}", "{\"a\":[,1]}",
    ])
    func invalidObjects(_ text: String) {
        guard case .failure = scanTop(text) else {
            Issue.record("accepted: \(text)")
            return
        }
    }

    @Test func invalidUTF8IsRejected() {
        let cases: [[UInt8]] = [
            [0xFF], [0xC0, 0xAF], [0xE0, 0x80, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xC3], [0xE2, 0x82],
            [0x80], [0xF8, 0x88, 0x80, 0x80, 0x80],
        ]
        for bad in cases {
            let doc = Array("{\"a\":\"".utf8) + bad + Array("\"}".utf8)
            #expect(throws: JSONError.self, "\(bad)") { try JSONValue(parsing: doc) }
            let raw = doc.withUnsafeBytes { b -> Bool in
                var s = JSONScanner(b)
                return (try? s.scanTopLevelObject()) != nil
            }
            #expect(!raw, "\(bad)")
        }
        #expect((try? JSONValue(parsing: Array("{\"a\":\"\u{10FFFF}\u{E000}\"}".utf8))) != nil)
    }

    @Test func deepNestingIsValidatedWithoutRecursion() {
        let depth = 200_000
        let text = "{\"a\":" + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "}"
        guard case .success(let fields) = scanTop(text) else {
            Issue.record("deep document rejected")
            return
        }
        #expect(fields.count == 1 && fields[0].kind == .array)
        // The tree parser has a depth limit instead.
        #expect(throws: JSONError.self) { try JSONValue(parsing: text) }
        let unbalanced = "{\"a\":" + String(repeating: "[", count: depth) + "}"
        guard case .failure = scanTop(unbalanced) else {
            Issue.record("unbalanced deep document accepted")
            return
        }
    }

    @Test func numbers() throws {
        #expect(try JSONValue(parsing: "9223372036854775807") == .integer(Int64.max))
        #expect(try JSONValue(parsing: "-9223372036854775808") == .integer(Int64.min))
        #expect(try JSONValue(parsing: "9223372036854775808") == .double(9223372036854775808))
        #expect(try JSONValue(parsing: "1.5") == .double(1.5))
        #expect(try JSONValue(parsing: "2e3") == .double(2000))
    }

    @Test func stringsRoundTrip() throws {
        let samples = ["plain", "quote \" backslash \\ slash /", "control \u{1} \u{1F} \n \t", "é 日本 😀", ""]
        for s in samples {
            let encoded = JSONValue.string(s).encoded
            #expect(try JSONValue(parsing: encoded) == .string(s))
        }
        #expect(JSONValue.string("\u{1}").text == "\"\\u0001\"")
        #expect(try JSONValue(parsing: "\"\\ud83d\\ude00\"") == .string("😀"))
        #expect(try JSONValue(parsing: "\"\\ud800x\"") == .string("\u{FFFD}x"))
    }

    @Test func writerIsDeterministic() {
        let value: JSONValue = ["b": [1, 2.5, "x", .null, true], "a": ["nested": [:]]]
        #expect(value.text == "{\"a\":{\"nested\":{}},\"b\":[1,2.5,\"x\",null,true]}")
        #expect(JSONValue.double(.infinity).text == "null")
    }

    @Test func frameBuilderPrefixesLength() {
        var f = FrameBuilder()
        f.literal("{\"op\":\"ping\",\"id\":")
        f.int(7)
        f.literal("}")
        let frame = f.finish()
        #expect(frame[0..<4] == [0, 0, 0, 20])
        #expect(String(decoding: frame[4...], as: UTF8.self) == "{\"op\":\"ping\",\"id\":7}")
    }
}
