// The JSON scanner, tree parser and writer, byte-level: grammar edge cases, UTF-8
// validation, escapes, deep nesting without recursion, and exact numbers.
import NotifBusProtocol
import TestSupport
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
        #expect(try JSONValue(parsing: "9223372036854775808") == .double(9_223_372_036_854_775_808))
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

// MARK: The wide-step scanner against the byte-at-a-time reference

/// What a scan of a whole document came to, comparable between the two scanners.
enum ScanOutcome: Equatable, CustomStringConvertible {
    case members([[Int]])
    case failed(JSONError)

    var description: String {
        switch self {
        case .members(let m): "members \(m)"
        case .failed(let e): "failed: \(e)"
        }
    }
}

func kindCode(_ kind: JSONKind) -> Int {
    switch kind {
    case .object: 0
    case .array: 1
    case .string: 2
    case .number: 3
    case .bool: 4
    case .null: 5
    }
}

/// The product scanner's outcome and the reference's for the same bytes, by
/// `scanTopLevelObject` and by `isValidDocument`.
func bothScans(_ bytes: [UInt8]) -> (fast: ScanOutcome, reference: ScanOutcome, fastValid: Bool, referenceValid: Bool) {
    bytes.withUnsafeBytes { buffer in
        var fast = JSONScanner(buffer)
        var reference = ReferenceScanner(buffer)
        let a: ScanOutcome
        do throws(JSONError) {
            a = .members(try fast.scanTopLevelObject().map { [$0.keyStart, $0.keyEnd, $0.keyEscaped ? 1 : 0, $0.start, $0.end, kindCode($0.kind)] })
        } catch {
            a = .failed(error)
        }
        let b: ScanOutcome
        do throws(JSONError) {
            b = .members(
                try reference.scanTopLevelObject().map { [$0.keyStart, $0.keyEnd, $0.keyEscaped ? 1 : 0, $0.start, $0.end, kindCode($0.kind)] })
        } catch {
            b = .failed(error)
        }
        var r = ReferenceScanner(buffer)
        r.skipWhitespace()
        var referenceValid = (try? r.skipValue()) != nil
        r.skipWhitespace()
        referenceValid = referenceValid && r.position == buffer.count
        return (a, b, JSONScanner.isValidDocument(bytes), referenceValid)
    }
}

func expectSameScan(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
    let r = bothScans(bytes)
    #expect(r.fast == r.reference, "\(bytes)", sourceLocation: sourceLocation)
    #expect(r.fastValid == r.referenceValid, "\(bytes)", sourceLocation: sourceLocation)
}

@Suite struct WideStepScannerTests {
    /// Bytes that end a run of plain string bytes, or look like they might.
    static let stringSpecials: [[UInt8]] = [
        [0x22], [0x5C, 0x6E], [0x5C, 0x75, 0x30, 0x30, 0x65, 0x39], [0x5C], [0x5C, 0x78], [0x5C, 0x75, 0x31, 0x32],
        [0x00], [0x1F], [0x0A], [0x09], [0x20], [0x7F], [0x21], [0x23], [0x5B], [0x5D],
        [0xC3, 0xA9], [0xE6, 0x97, 0xA5], [0xF0, 0x9F, 0x98, 0x80], [0xF4, 0x8F, 0xBF, 0xBF], [0xEF, 0xBF, 0xBF],
        [0xC0, 0xAF], [0xC1, 0xBF], [0xE0, 0x80, 0xAF], [0xE0, 0x9F, 0xBF], [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF],
        [0xF0, 0x8F, 0xBF, 0xBF], [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF], [0x80], [0xBF],
        [0xC3], [0xE2, 0x82], [0xF0, 0x9F, 0x98], [0xC3, 0x28], [0xE2, 0x28, 0xA1], [0xF0, 0x9F, 0x28, 0x80],
        // Two-byte sequences at the edges of the inline test: first bytes C2 and DF, second
        // bytes 80 and BF, and second bytes just outside (7F, C0).
        [0xC2, 0x80], [0xDF, 0xBF], [0xC2, 0x7F], [0xDF, 0xC0], [0xC2, 0xC2, 0x80], [0xDF], [0xE0, 0xA0, 0x80],
        // `\u` escapes: every hex class and the bytes around each range, in every digit place.
        Array(#"\uABCD"#.utf8), Array(#"\uabcd"#.utf8), Array(#"\uFfF0"#.utf8), Array(#"\u09af"#.utf8),
        Array(#"\u/000"#.utf8), Array(#"\u0:00"#.utf8), Array(#"\u00@0"#.utf8), Array(#"\u000G"#.utf8),
        Array(#"\u`000"#.utf8), Array(#"\u0g00"#.utf8), Array(#"\u00"#.utf8), Array(#"\u00e"#.utf8),
        [0x5C, 0x75, 0x30, 0x10, 0x30, 0x30], [0x5C, 0x75, 0x30, 0x30, 0x19, 0x30], [0x5C, 0x75, 0x30, 0x30, 0x30, 0xB0],
        [0x5C, 0x75, 0xC1, 0x30, 0x30, 0x30], [0x5C, 0x75, 0x30, 0x30, 0x30, 0x41, 0x5C, 0x75, 0x44, 0x43, 0x30, 0x30],
    ]

    @Test func everySpecialByteAtEveryPositionOfAWord() {
        for special in WideStepScannerTests.stringSpecials {
            for before in 0..<19 {
                let plain = Array(repeating: UInt8(ascii: "x"), count: before)
                let head = Array(#"{"a":""#.utf8) + plain + special
                // Closed normally, cut at the special bytes (end of buffer), and closed after
                // a few more plain bytes so that the special bytes sit inside a word.
                expectSameScan(head + Array(#""}"#.utf8))
                expectSameScan(head)
                expectSameScan(head + Array("yyyyyyyyy\"}".utf8))
                // The same in a key, and nested in user data.
                expectSameScan(Array(#"{""#.utf8) + plain + special + Array(#"":1}"#.utf8))
                // A key cut short, or closed, at the end of the buffer, and one a whole word
                // before it (the member loop reads a short key from its first word).
                expectSameScan(Array(#"{""#.utf8) + plain + special)
                expectSameScan(Array(#"{""#.utf8) + plain + special + [UInt8(ascii: "\"")])
                expectSameScan(Array(#"{""#.utf8) + plain + special + Array(#"":"abcdefgh"}"#.utf8))
                expectSameScan(Array(#"{"a":[{"b":""#.utf8) + plain + special + Array(#""}]}"#.utf8))
            }
        }
    }

    @Test func everyByteInEveryPlaceOfAUnicodeEscape() {
        for place in 0..<4 {
            for byte in 0...255 {
                var digits = Array("0a9F".utf8)
                digits[place] = UInt8(byte)
                expectSameScan(Array(#"{"a":"\u"#.utf8) + digits + Array(#""}"#.utf8))
                expectSameScan(Array(#"{"a":"xyz\u"#.utf8) + digits + Array(#"é"}"#.utf8))
            }
        }
    }

    @Test func everySecondByteOfATwoByteSequence() {
        for first: UInt8 in [0xC0, 0xC1, 0xC2, 0xD0, 0xDF, 0xE0] {
            for second in 0...255 {
                expectSameScan(Array(#"{"a":"x"#.utf8) + [first, UInt8(second)] + Array(#"yz"}"#.utf8))
                expectSameScan(Array(#"{"a":"1234567"#.utf8) + [first, UInt8(second)] + Array(#""}"#.utf8))
            }
        }
    }

    @Test func knownAnswersAtWordEdges() {
        for before in 0..<17 {
            let plain = String(repeating: "x", count: before)
            #expect(JSONScanner.isValidDocument(Array("\"\(plain)\"".utf8)))
            #expect(JSONScanner.isValidDocument(Array("\"\(plain)é日😀\\n\(plain)\"".utf8)))
            #expect(!JSONScanner.isValidDocument(Array("\"\(plain)".utf8)))
            #expect(!JSONScanner.isValidDocument(Array("\"\(plain)\u{1}\"".utf8)))
            #expect(!JSONScanner.isValidDocument(Array("\"\(plain)".utf8) + [0xED, 0xA0, 0x80, 0x22]))
            #expect(!JSONScanner.isValidDocument(Array("\"\(plain)".utf8) + [0xE0, 0x80, 0xAF, 0x22]))
            #expect(!JSONScanner.isValidDocument(Array("\"\(plain)".utf8) + [0xC3]))
            #expect(!JSONScanner.isValidDocument(Array("\"\(plain)\\".utf8)))
        }
    }

    @Test func numbersOfEveryLengthAndEnd() {
        let terminators = ["", "}", ",\"b\":1}", " }", "x}", ".}", "e}", ".5}", "e+}", "E-7}", ".25e1}", "0}"]
        for length in 1..<20 {
            let digits = (0..<length).map { String(($0 * 7 + 1) % 10) }.joined()
            for sign in ["", "-", "-0", "0"] {
                for end in terminators {
                    expectSameScan(Array("{\"a\":\(sign)\(digits)\(end)".utf8))
                    expectSameScan(Array("{\"a\":1.\(digits)\(end)".utf8))
                    expectSameScan(Array("{\"a\":1e\(digits)\(end)".utf8))
                    // Inside user data (array elements, nested members) and as a whole
                    // document, where numbers are skipped by `skipValue`.
                    for open in ["{\"a\":[", "{\"a\":[7,", "{\"a\":{\"b\":", ""] {
                        let tail = end.replacingOccurrences(of: "}", with: open.hasSuffix("[") || open.hasSuffix(",") ? "]}" : "}}")
                        expectSameScan(Array("\(open)\(sign)\(digits)\(tail)".utf8))
                        expectSameScan(Array("\(open)\(sign)\(digits)\(end)".utf8))
                        expectSameScan(Array("\(open)\(digits).\(digits)\(tail)".utf8))
                    }
                }
            }
        }
        for text in ["{\"a\":-}", "{\"a\":-", "{\"a\":1.", "{\"a\":1e", "{\"a\":tru", "{\"a\":true", "{\"a\":fals}", "{\"a\":nul}", "{\"a\":nulL}"] {
            expectSameScan(Array(text.utf8))
        }
    }

    @Test func deepNestingAroundTheInlineStack() {
        for depth in [1, 2, 62, 63, 64, 65, 66, 127, 128, 129, 300] {
            let open = (0..<depth).map { $0 % 3 == 0 ? "{\"k\":" : "[" }
            let close = (0..<depth).reversed().map { $0 % 3 == 0 ? "}" : "]" }
            let good = "{\"a\":" + open.joined() + "1" + close.joined() + ",\"b\":2}"
            #expect(JSONScanner.isValidDocument(Array(good.utf8)))
            expectSameScan(Array(good.utf8))
            // One closer of the wrong kind at each depth near the edges of the inline word.
            for wrong in [0, 1, depth / 2, max(0, depth - 64), max(0, depth - 65), depth - 1] where wrong < depth {
                var bad = close
                bad[wrong] = bad[wrong] == "}" ? "]" : "}"
                let text = "{\"a\":" + open.joined() + "1" + bad.joined() + "}"
                #expect(!JSONScanner.isValidDocument(Array(text.utf8)), "depth \(depth) wrong \(wrong)")
                expectSameScan(Array(text.utf8))
            }
            expectSameScan(Array(("{\"a\":" + open.joined() + "1" + close.dropLast().joined()).utf8))
        }
    }

    /// Seeded: a failure names its seed (Swift Testing prints a failing case's arguments).
    @Test(arguments: [UInt64(0x5EED)]) func randomDocumentsAndMutations(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        let pieces: [[UInt8]] = [
            Array(#"{"op":"post","id":1,"name":"n","payload":"#.utf8), Array("{".utf8), Array("}".utf8), Array("[".utf8),
            Array("]".utf8), Array(",".utf8), Array(":".utf8), Array(" ".utf8), Array("\n\t\r".utf8),
            Array(#""key""#.utf8), Array(#""a longer string of plain ASCII text""#.utf8), Array(#""esc \" \\ \/ \n \u00e9""#.utf8),
            Array("\"é日本😀\"".utf8), Array("123456789012".utf8), Array("-0.5e-3".utf8), Array("true".utf8), Array("false".utf8),
            Array("null".utf8), Array("\"".utf8), Array("\\".utf8), [0xC3], [0xA9], [0xED, 0xA0, 0x80], [0xF0, 0x9F], [0x01], [0xFF],
        ]
        let valid = Array(
            #"{"op":"post","id":1,"name":"n","payload":{"m":[{"s":"Re: \"x\" \u00e9té","t":["a@b.org"],"n":-3.25e1,"r":true,"z":null},[],{}]}}"#.utf8)
        for _ in 0..<20000 {
            var doc: [UInt8]
            if random.below(2) == 0 {
                doc = valid
                for _ in 0..<(1 + random.below(3)) {
                    let at = random.below(doc.count + 1)
                    switch random.below(3) {
                    case 0: if at < doc.count { doc.remove(at: at) }
                    case 1: doc.insert(contentsOf: pieces[random.below(pieces.count)], at: at)
                    default: if at < doc.count { doc[at] = UInt8(truncatingIfNeeded: random.next()) }
                    }
                }
                if random.below(4) == 0 { doc = Array(doc[..<random.below(doc.count + 1)]) }
            } else {
                doc = []
                for _ in 0..<(1 + random.below(12)) { doc += pieces[random.below(pieces.count)] }
            }
            expectSameScan(doc)
        }
    }
}
