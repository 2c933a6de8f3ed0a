// The message decoder's classification and rejections, at the protocol layer.
import Glibc
import NotifBusProtocol
import TestSupport
import Testing

@_lifetime(immortal)
func decode(_ text: String) -> DecodeResult {
    MessageDecoder.decode(Array(text.utf8))
}

@Suite struct MessageDecoderTests {
    @Test func requestsDecode() {
        guard
            case .decoded(.request(let id, .subscribe(let events, let priority, let key, false)), false) =
                decode(#"{"op":"subscribe","id":"s1","events":["a","b"],"priority":-3,"key":"k"}"#)
        else {
            Issue.record("subscribe did not decode")
            return
        }
        #expect(id == .string("s1") && events == ["a", "b"] && priority == -3 && key == "k")
        guard
            case .decoded(.request(_, .post(let name, let payload, let profile)), false) =
                decode(#"{"op":"post","id":1,"name":"e","payload": [1, {"a":2}] }"#)
        else {
            Issue.record("post did not decode")
            return
        }
        #expect(name == "e" && profile == nil)
        guard
            case .decoded(.request(_, .keyed("k-1", .post("e", nil, nil))), false) =
                decode(#"{"op":"post","id":1,"name":"e","once":"k-1"}"#),
            case .decoded(.request(_, .keyed("t", .take("s", 5))), false) = decode(#"{"op":"take","id":1,"slot":"s","wait":5,"once":"t"}"#),
            case .decoded(.request(_, .put("s", nil)), false) = decode(#"{"op":"put","id":1,"slot":"s","value":null,"once":null}"#)
        else {
            Issue.record("keyed requests did not decode")
            return
        }
        for (text, message) in [
            (#"{"op":"ping","id":1,"once":"k"}"#, "unknown field 'once'"),
            (#"{"op":"post","id":1,"name":"e","once":""}"#, "'once' must be 1 to 256 bytes"),
            (#"{"op":"post","id":1,"name":"e","once":7}"#, "'once' must be a string"),
            (#"{"op":"put","id":1,"slot":"s","value":1,"once":"\#(String(repeating: "k", count: 257))"}"#, "'once' must be 1 to 256 bytes"),
        ] {
            guard case .rejected(let r, false) = decode(text) else {
                Issue.record("accepted: \(text)")
                continue
            }
            #expect(r.reason == .malformed && r.message == message, "\(text)")
        }
        #expect(String(decoding: payload?.bytes ?? [], as: UTF8.self) == #"[1, {"a":2}]"#)
        guard case .decoded(.request(_, .hello(1, nil)), true) = decode(#"{"op":"hello","id":0,"protocol":1,"name":null}"#) else {
            Issue.record("hello did not decode")
            return
        }
    }

    @Test func answersDecodeWithoutID() {
        guard case .decoded(.answer(.complete(12, let value)), false) = decode(#"{"op":"complete","event":12,"value":{"x":[]}}"#) else {
            Issue.record("complete did not decode")
            return
        }
        #expect(value.map { String(decoding: $0, as: UTF8.self) } == #"{"x":[]}"#)
        guard case .decoded(.answer(.complete(1, nil)), false) = decode(#"{"op":"complete","event":1,"value":null}"#) else {
            Issue.record("complete with null value did not decode")
            return
        }
        guard case .rejected(let r, false) = decode(#"{"op":"next","event":1,"id":3}"#) else {
            Issue.record("answer with id accepted")
            return
        }
        #expect(r.id == nil && r.reason == .malformed)
        guard case .decoded(.callReturn(let ret), false) = decode(#"{"op":"return","call":4,"result":null}"#),
            case .result(let raw) = ret.body
        else {
            Issue.record("return did not decode")
            return
        }
        #expect(ret.call == 4 && raw.bytes == Array("null".utf8))
    }

    @Test func rejectionsCarryReasonsAndIDs() {
        let cases: [(String, RequestID?, Rejection.Reason)] = [
            (#"{"op":"ping"}"#, nil, .malformed),
            (#"{"id":1}"#, .integer(1), .malformed),
            (#"{"op":"what","id":2}"#, .integer(2), .unknownOp),
            (#"{"op":"ping","id":3,"x":1}"#, .integer(3), .malformed),
            (#"{"op":"post","id":4,"name":"willPresent","payload":{}}"#, .integer(4), .invalidPayload),
            (#"{"op":"setCategories","id":5,"categories":[{"identifier":"A","actions":[],"options":["x"]}]}"#, .integer(5), .malformed),
        ]
        for (text, id, reason) in cases {
            guard case .rejected(let r, _) = decode(text) else {
                Issue.record("accepted: \(text)")
                continue
            }
            #expect(r.id == id && r.reason == reason, "\(text): \(r)")
        }
        guard case .badJSON = decode("[1]") else {
            Issue.record("array accepted")
            return
        }
    }
}

// MARK: The one-pass decoder against the reference decoder

/// A frame as its members, so that tests can reorder, repeat, drop and retype them.
typealias Members = [(key: String, value: String)]

func frameText(_ members: Members) -> String {
    "{" + members.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
}

/// One valid frame of every op, every optional field given.
let decoderTemplates: [Members] = [
    [("op", #""hello""#), ("id", "0"), ("protocol", "1"), ("name", #""client""#)],
    [("op", #""ping""#), ("id", "12345")],
    [("op", #""status""#), ("id", #""s""#), ("page", "\"\(StatusPage.client(12).cursor)\"")],
    [("op", #""subscribe""#), ("id", "1"), ("events", #"["a","b"]"#), ("priority", "-3"), ("key", #""k""#), ("resume", "true")],
    [("op", #""unsubscribe""#), ("id", "2"), ("observer", #""o1""#)],
    [("op", #""unsubscribe""#), ("id", "2"), ("key", #""k""#)],
    [("op", #""post""#), ("id", "3"), ("name", #""e""#), ("payload", #"{"a":[1,2.5,"x",null]}"#)],
    [
        ("op", #""post""#), ("id", "3"), ("name", #""willPresent""#),
        ("payload", #"{"notification":{"identifier":"n1","content":{"title":"t","categoryIdentifier":"C"}}}"#),
    ],
    [("op", #""post""#), ("id", "3"), ("name", #""openSettings""#)],
    [("op", #""post""#), ("id", "3"), ("name", #""e""#), ("once", #""k-1""#), ("payload", #"{"a":1}"#)],
    [("op", #""handle""#), ("id", "4"), ("channel", #""mail""#), ("method", #""open""#), ("resume", "false")],
    [("op", #""unhandle""#), ("id", "5"), ("handler", #""h1""#)],
    [("op", #""invoke""#), ("id", "6"), ("channel", #""mail""#), ("method", #""open""#), ("arguments", #"{"id":"e-1"}"#)],
    [("op", #""put""#), ("id", "7"), ("slot", #""s""#), ("value", #"[1]"#)],
    [("op", #""put""#), ("id", "7"), ("slot", #""s""#), ("value", #"[1]"#), ("once", #""nats/d/42""#)],
    [("op", #""take""#), ("id", "8"), ("slot", #""s""#), ("wait", "100")],
    [("op", #""take""#), ("id", "8"), ("slot", #""s""#), ("wait", "100"), ("once", #""t""#)],
    [("op", #""peek""#), ("id", "9"), ("slot", #""s""#)],
    [("op", #""setCategories""#), ("id", "10"), ("categories", #"[{"identifier":"A","actions":[],"options":[]}]"#)],
    [("op", #""setCategories""#), ("id", "10"), ("categories", "[]"), ("once", #""c""#)],
    [("op", #""getCategories""#), ("id", "11")],
    [("op", #""monitor""#), ("id", "12")],
    [("op", #""next""#), ("event", "13")],
    [("op", #""stop""#), ("event", "14")],
    [("op", #""complete""#), ("event", "15"), ("value", #"{"x":[]}"#)],
    [("op", #""return""#), ("call", "16"), ("result", "null")],
    [("op", #""return""#), ("call", "17"), ("error", #"{"code":"c","message":"m","details":[1]}"#)],
]

/// Values a mutation puts in place of a member's value.
let decoderValues = [
    "0", "1", "-1", "1.5", "1e3", "9007199254740992", "9007199254740991", "-0", "2147483648", "-2147483649", "600001",
    "123456789012345678", "-123456789012345678", "1234567890123456789", "9223372036854775807", "9223372036854775808",
    "-9223372036854775808", "-9223372036854775809", "99999999999999999999", "0.0", "-1E2", "5e-1",
    #""""#, #""x""#, #""ping""#, #""return""#, #""p\u0069ng""#, #""\ud800""#, #""c1""#, #""o-3:4""#, #""h2""#,
    #""s\"lot""#, "\"" + String(repeating: "n", count: 257) + "\"", "\"" + String(repeating: "i", count: 256) + "\"",
    "true", "false", "null", "[]", "{}", #"["a","a"]"#, #"["a",1]"#, #"{"code":"c"}"#, #"{"code":"c","message":"m","x":1}"#,
    #"{"code":1,"message":"m"}"#, #"{"code":"c","code":"d","message":"m"}"#,
]

/// Keys a mutation adds or renames to: unknown names, known names of other ops, escaped spellings.
let decoderKeys = [
    "x", "opx", "o", "ids", "id", "op", "event", "call", "name", "payload", "value", "arguments", "categories", "once", "onc",
    "\\u006fnce",
    "\\u006fp", "i\\u0064", "\\u0063hannel", "n\\u0061me", "argumentsX", "categorie", "protocol", "protocolX",
    "a-very-long-key-of-more-than-sixteen-bytes", "é", "\\ud800",
]

/// `MessageDecoder.decode` (the direct path where it decodes) and the full decoder alone each
/// give the reference decoder's result.
func sameDecoding(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
    let reference = ReferenceDecoder.decode(bytes)
    sameResult(MessageDecoder.decode(bytes), reference, bytes, sourceLocation: sourceLocation)
    bytes.withUnsafeBytes { sameResult(MessageDecoder.decodeFull($0), reference, bytes, sourceLocation: sourceLocation) }
}

func sameResult(_ fast: DecodeResult, _ reference: DecodeResult, _ bytes: [UInt8], sourceLocation: SourceLocation) {
    // A category set holds dictionaries, whose printed order may differ between two equal
    // values: compare those by value, everything else by its full description.
    if case .decoded(.request(let a, .setCategories(let x)), let h1) = fast,
        case .decoded(.request(let b, .setCategories(let y)), let h2) = reference
    {
        #expect(a == b && x == y && h1 == h2, "\(String(decoding: bytes, as: UTF8.self))", sourceLocation: sourceLocation)
        return
    }
    #expect(
        fast.summary == reference.summary, "\(String(decoding: bytes, as: UTF8.self))",
        sourceLocation: sourceLocation)
}

@Suite struct OnePassDecoderTests {
    @Test func templatesDecodeAsTheReferenceDoes() {
        for t in decoderTemplates {
            sameDecoding(Array(frameText(t).utf8))
            guard case .decoded = MessageDecoder.decode(Array(frameText(t).utf8)) else {
                Issue.record("template rejected: \(frameText(t))")
                continue
            }
        }
    }

    @Test func everyMemberRetypedRepeatedDroppedAndRenamed() {
        for t in decoderTemplates {
            for i in t.indices {
                var dropped = t
                dropped.remove(at: i)
                sameDecoding(Array(frameText(dropped).utf8))
                for v in decoderValues {
                    var retyped = t
                    retyped[i].value = v
                    sameDecoding(Array(frameText(retyped).utf8))
                    sameDecoding(Array(frameText(t + [(t[i].key, v)]).utf8))
                    sameDecoding(Array(frameText([(t[i].key, v)] + t).utf8))
                }
                for k in decoderKeys {
                    var renamed = t
                    renamed[i].key = k
                    sameDecoding(Array(frameText(renamed).utf8))
                    var withExtra = t
                    withExtra.insert((k, "1"), at: i)
                    sameDecoding(Array(frameText(withExtra).utf8))
                }
            }
        }
    }

    @Test func keysNearEveryKnownName() {
        let names = [
            "op", "id", "protocol", "name", "page", "events", "priority", "key", "resume", "observer", "payload", "channel",
            "method", "handler", "arguments", "slot", "value", "wait", "categories", "event", "call", "result", "error", "once",
        ]
        for name in names {
            let bytes = Array(name.utf8)
            // Escaped NUL bytes decode to text that must not pack as the name without them.
            var variants = [
                name + "s", "x" + name, String(name.dropLast()), name + name, name.uppercased(), name + #"\u0000"#,
                name + #"\u0000\u0000"#, #"\u0000"# + name,
            ]
            for i in bytes.indices {
                var changed = bytes
                changed[i] ^= 0x01
                variants.append(String(decoding: changed, as: UTF8.self))
            }
            for key in [name] + variants {
                for t in [decoderTemplates[1], decoderTemplates[11], decoderTemplates[18]] {
                    // The key last (nearest the end of the buffer, where a word cannot be read
                    // past it), first, and given twice.
                    sameDecoding(Array(frameText(t + [(key, "1")]).utf8))
                    sameDecoding(Array(frameText([(key, "1")] + t).utf8))
                    sameDecoding(Array(frameText(t + [(key, "1"), (key, "2")]).utf8))
                    sameDecoding(Array("{\"\(key)\":1}".utf8))
                }
            }
        }
        for op in [
            "hello", "ping", "subscribe", "unsubscribe", "post", "handle", "unhandle", "invoke", "put", "take", "peek",
            "setCategories", "getCategories", "status", "monitor", "next", "complete", "stop", "return",
        ] {
            for text in [op, op + "x", String(op.dropLast()), "x" + op, op.uppercased(), op + #"\u0000"#, op + #"\u0000\u0000"#] {
                sameDecoding(Array(#"{"id":1,"op":"\#(text)"}"#.utf8))
                sameDecoding(Array(#"{"op":"\#(text)","id":1,"event":2,"call":3}"#.utf8))
            }
        }
    }

    /// Up to 8 digits are read as one word that ends with the number: short frames (the
    /// number within the first 8 bytes), signs, fractions and exponents, every length.
    /// Seeded: a failure names its seed (Swift Testing prints a failing case's arguments).
    @Test(arguments: [UInt64(0x1D_5EED)]) func integersOfEveryLengthInEveryNumberField(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var numbers = ["0", "-0", "7", "-7", "1.5", "12e3", "1E+2", "9.0", "00", "01", "1.", "-"]
        for digits in 1...20 {
            for _ in 0..<12 {
                var text = String(1 + random.below(9))
                for _ in 1..<digits { text += String(random.below(10)) }
                numbers += [text, "-" + text, text + ".5", text + "e1", String(repeating: "9", count: digits)]
            }
        }
        let frames: [(String) -> String] = [
            { #"{"id":\#($0)}"# }, { #"{"op":"ping","id":\#($0)}"# }, { #"{"id":\#($0),"op":"ping"}"# },
            { #"{"op":"next","event":\#($0)}"# }, { #"{"op":"return","call":\#($0),"result":1}"# },
            { #"{"op":"hello","id":1,"protocol":\#($0)}"# }, { #"{"op":"subscribe","id":1,"events":["e"],"priority":\#($0)}"# },
            { #"{"op":"take","id":1,"slot":"s","wait":\#($0)}"# }, { #"{"op":"stop","event":\#($0) }"# },
        ]
        for n in numbers {
            for frame in frames { sameDecoding(Array(frame(n).utf8)) }
        }
    }

    /// Seeded: a failure names its seed (Swift Testing prints a failing case's arguments).
    @Test(arguments: [UInt64(0xDEC0DE)]) func randomOrdersAndMixtures(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        for _ in 0..<20000 {
            var m = decoderTemplates[random.below(decoderTemplates.count)]
            for _ in 0..<random.below(4) {
                switch random.below(5) {
                case 0: m.swapAt(random.below(m.count), random.below(m.count))
                case 1: m.append((decoderKeys[random.below(decoderKeys.count)], decoderValues[random.below(decoderValues.count)]))
                case 2: if m.count > 1 { m.remove(at: random.below(m.count)) }
                case 3: m[random.below(m.count)].value = decoderValues[random.below(decoderValues.count)]
                default:
                    let other = decoderTemplates[random.below(decoderTemplates.count)]
                    m.append(other[random.below(other.count)])
                }
            }
            sameDecoding(Array(frameText(m).utf8))
        }
    }

    @Test func fuzzCorpusDecodesAsTheReferenceDoes() throws {
        let folder = "Fuzz/corpus/decoder"
        guard let dir = opendir(folder) else {
            Issue.record("no corpus at \(folder)")
            return
        }
        defer { closedir(dir) }
        var seen = 0
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            guard !name.hasPrefix(".") else { continue }
            guard let file = fopen("\(folder)/\(name)", "rb") else { continue }
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = fread(&chunk, 1, chunk.count, file)
                if n <= 0 { break }
                bytes += chunk[..<n]
            }
            fclose(file)
            seen += 1
            sameDecoding(bytes)
            if bytes.count > 4 { sameDecoding(Array(bytes[4...])) }
        }
        #expect(seen > 0)
    }
}
