// Protocol/vectors/messages.json played through the protocol layer alone: each case's body,
// framed and decoded by FrameHeader and MessageDecoder, must give the reply the live broker
// gives, or be accepted where the core decides. No sockets, no broker, no clock.
import Foundation
import NotifBusProtocol
import Testing

/// One request/reply case of messages.json, with its body as play_messages.py sends it.
struct MessageCase: Sendable, CustomTestStringConvertible {
    let name: String
    let greeted: Bool
    let body: [UInt8]
    let expectedID: JSONValue
    /// The expected error code; nil when a result is expected.
    let expectedError: String?
    let closes: Bool
    var testDescription: String { name }

    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Protocol/vectors/messages.json").standardized

    /// Every case in file order; a file that cannot be read gives one case that fails.
    static let all: [MessageCase] = {
        do {
            return try load(Array(Data(contentsOf: file)))
        } catch {
            return [
                MessageCase(
                    name: "unreadable messages.json: \(error)", greeted: false, body: [], expectedID: .null,
                    expectedError: "?", closes: false)
            ]
        }
    }()

    static func load(_ bytes: [UInt8]) throws -> [MessageCase] {
        try bytes.withUnsafeBytes { buffer throws -> [MessageCase] in
            var scanner = JSONScanner(buffer)
            let top = try scanner.scanTopLevelObject()
            guard let casesField = top.first(where: { scanner.keyIs($0, "cases") }),
                let elements = scanner.elements(of: casesField)
            else { throw MessageVectorError("no 'cases' array") }
            return try elements.map { element in
                guard let members = scanner.members(of: element) else { throw MessageVectorError("a case is not an object") }
                func member(_ key: StaticString) -> JSONField? { members.first { scanner.keyIs($0, key) } }
                func tree(_ key: StaticString) throws -> JSONValue? { try member(key).map { try scanner.tree(of: $0) } }
                let name = try tree("name")?.stringValue ?? "?"
                let body: [UInt8]
                if let send = member("send") {
                    body = try compactUTF8(scanner.raw(of: send))
                } else if let text = try tree("sendText")?.stringValue {
                    body = Array(text.utf8)
                } else {
                    throw MessageVectorError("\(name): neither 'send' nor 'sendText'")
                }
                guard let expect = try tree("expect"), let id = expect["id"] else {
                    throw MessageVectorError("\(name): no 'expect' with an 'id'")
                }
                return MessageCase(
                    name: name, greeted: try tree("greeted")?.boolValue ?? false, body: body, expectedID: id,
                    expectedError: expect["error"]?.stringValue, closes: try tree("closes")?.boolValue ?? false)
            }
        }
    }

    /// The body play_messages.py sends for a `send` object: Python's
    /// `json.dumps(value, separators=(",", ":"), ensure_ascii=False)` encoded as UTF-8.
    /// The file holds the same value written by `json.dumps(ensure_ascii=True)`, so the
    /// body is that text with the whitespace between tokens removed and every `\uXXXX`
    /// escape of a character from U+007F up turned into the character's UTF-8 bytes
    /// (Python escapes the same control characters, quotes and backslashes either way).
    /// Member order and number spellings stay exactly as written.
    static func compactUTF8(_ raw: [UInt8]) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(raw.count)
        var i = 0
        var inString = false
        func hex4(_ at: Int) throws -> UInt32 {
            guard at + 4 <= raw.count, let v = UInt32(String(decoding: raw[at..<at + 4], as: UTF8.self), radix: 16) else {
                throw MessageVectorError("bad \\u escape at byte \(at)")
            }
            return v
        }
        while i < raw.count {
            let b = raw[i]
            if !inString {
                if b == UInt8(ascii: "\"") { inString = true }
                if b != 0x20 && b != 0x0A && b != 0x0D && b != 0x09 { out.append(b) }
                i += 1
                continue
            }
            if b == UInt8(ascii: "\"") {
                inString = false
                out.append(b)
                i += 1
            } else if b == UInt8(ascii: "\\"), i + 1 < raw.count, raw[i + 1] == UInt8(ascii: "u") {
                var scalar = try hex4(i + 2)
                var length = 6
                if scalar < 0x7F {
                    out.append(contentsOf: raw[i..<i + 6])
                    i += 6
                    continue
                }
                if (0xD800..<0xDC00).contains(scalar), i + 12 <= raw.count, raw[i + 6] == UInt8(ascii: "\\"),
                    raw[i + 7] == UInt8(ascii: "u")
                {
                    let low = try hex4(i + 8)
                    if (0xDC00..<0xE000).contains(low) {
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        length = 12
                    }
                }
                guard let character = Unicode.Scalar(scalar) else {
                    throw MessageVectorError("a lone surrogate \\u\(String(scalar, radix: 16)) cannot be sent as UTF-8")
                }
                out.append(contentsOf: Array(String(Character(character)).utf8))
                i += length
            } else if b == UInt8(ascii: "\\") {
                out.append(contentsOf: raw[i..<min(i + 2, raw.count)])
                i += 2
            } else {
                out.append(b)
                i += 1
            }
        }
        return out
    }
}

struct MessageVectorError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// What the protocol layer makes of one body on a connection that is greeted or not.
enum ProtocolVerdict: Equatable, CustomStringConvertible {
    /// The reply is decided here: this error code, echoing this id.
    case refused(code: String, id: JSONValue)
    /// Decoded; the core answers (with a result or an error of its own).
    case accepted(id: JSONValue)

    var description: String {
        switch self {
        case .refused(let code, let id): "refused \(code) with id \(id.text)"
        case .accepted(let id): "accepted with id \(id.text)"
        }
    }

    /// The wire code the broker answers a decoder's reason with, as the vectors expect it
    /// (the broker's own map is `BrokerError.code`, which the core's vector players follow).
    static func code(of reason: Rejection.Reason) -> String {
        switch reason {
        case .malformed: ErrorCode.badRequest.rawValue
        case .unknownOp: ErrorCode.unknownOp.rawValue
        case .invalidPayload: ErrorCode.invalidPayload.rawValue
        }
    }

    /// The id the reply echoes, as the client wrote it.
    static func echoed(_ id: RequestID?) -> JSONValue {
        switch id {
        case .integer(let i)?: return .integer(i)
        // The decoder keeps the text between the quotes, escapes as written.
        case .string(let raw)?: return (try? JSONValue(parsing: "\"" + raw + "\"")) ?? .string("<unparsable \(raw)>")
        case nil: return .null
        }
    }

    /// The framing limit first (a zero or oversized length is `frame_too_large`), then the
    /// decoder, then the two rules that need only the greeting state: before `hello` any
    /// other frame is `hello_required`; after it, another `hello` is `bad_request`.
    init(body: [UInt8], greeted: Bool, maxFrame: Int = Limits.defaultMaxFrame) {
        let framed = FrameHeader.encode(length: body.count) + body
        if case .tooLarge = framed.withUnsafeBytes({ FrameHeader.split($0, at: 0, maxFrame: maxFrame) }) {
            self = .refused(code: ErrorCode.frameTooLarge.rawValue, id: .null)
            return
        }
        switch MessageDecoder.decode(body) {
        case .badJSON:
            self = .refused(code: ErrorCode.badJSON.rawValue, id: .null)
        case .rejected(let rejection, let isHello):
            if !greeted && !isHello {
                self = .refused(code: ErrorCode.helloRequired.rawValue, id: Self.echoed(rejection.id))
            } else if greeted && isHello && rejection.id != nil {
                self = .refused(code: ErrorCode.badRequest.rawValue, id: Self.echoed(rejection.id))
            } else {
                self = .refused(code: Self.code(of: rejection.reason), id: Self.echoed(rejection.id))
            }
        case .decoded(let inbound, let isHello):
            var id: RequestID? = nil
            if case .request(let rid, _) = inbound { id = rid }
            if !greeted && !isHello {
                self = .refused(code: ErrorCode.helloRequired.rawValue, id: Self.echoed(id))
            } else if greeted && isHello {
                self = .refused(code: ErrorCode.badRequest.rawValue, id: Self.echoed(id))
            } else {
                self = .accepted(id: Self.echoed(id))
            }
        }
    }
}

@Suite struct MessageVectorTests {
    @Test func casesArePresent() {
        let names = MessageCase.all.map(\.name)
        #expect(names.count >= 300)
        #expect(Set(names).count == names.count)
        #expect(!names.contains { $0.hasPrefix("unreadable") })
    }

    /// The body of a `send` case is what play_messages.py writes for it.
    @Test func bodiesAreEncodedAsThePythonPlayerSendsThem() throws {
        let raw = Array(#"{"op": "ping", "id": "A\n\"q\" \u00e9\u65e5\ud83d\ude00\u007f\u0001", "x": [1.5e+300, -0.0, {}]}"#.utf8)
        let expected = Array(#"{"op":"ping","id":"A\n\"q\" é日😀"#.utf8) + [0x7F] + Array(#"\u0001","x":[1.5e+300,-0.0,{}]}"#.utf8)
        #expect(try MessageCase.compactUTF8(raw) == expected)
        #expect(throws: MessageVectorError.self) { try MessageCase.compactUTF8(Array(#""\ud800""#.utf8)) }
    }

    /// Each case: where the protocol layer decides the reply, it is exactly the expected
    /// code and id; everything else must decode, with the id the core will echo.
    @Test(arguments: MessageCase.all) func messageCase(_ c: MessageCase) throws {
        let verdict = ProtocolVerdict(body: c.body, greeted: c.greeted)
        let body = String(decoding: c.body.prefix(200), as: UTF8.self)
        switch verdict {
        case .refused(let code, let id):
            #expect(
                c.expectedError == code && id == c.expectedID,
                "expected \(c.expectedError ?? "a result") with id \(c.expectedID.text), the protocol layer \(verdict): \(body)")
        case .accepted(let id):
            #expect(id == c.expectedID, "expected id \(c.expectedID.text), \(verdict): \(body)")
            if let code = c.expectedError {
                #expect(Self.coreCodes.contains(code), "expected \(code), which the protocol layer decides, but \(verdict): \(body)")
            }
        }
        // Whether the connection stays open follows from the code, by the table in Wire.swift.
        let closes = c.expectedError.map { ErrorCode(rawValue: $0)?.closesConnection } ?? false
        #expect(closes == c.closes, "\(c.expectedError ?? "a result") and closes=\(c.closes) disagree with ErrorCode.closesConnection")
    }

    /// Error codes only the core gives: they need the broker's state (registrations,
    /// categories, the running event) or its one protocol version.
    static let coreCodes: Set<String> = [
        ErrorCode.unsupportedProtocol, .notFound, .notImplemented, .invalidAction, .queueFull, .forbidden,
        .tooManyClients, .handlerGone, .timeout, .shuttingDown, .storageFailed, .superseded,
    ].reduce(into: []) { $0.insert($1.rawValue) }

    /// Both kinds of case occur, so the test shows the decoder deciding and deferring.
    @Test func verdictsCoverBothLayers() {
        let verdicts = MessageCase.all.map { ProtocolVerdict(body: $0.body, greeted: $0.greeted) }
        let refused = verdicts.filter { if case .refused = $0 { true } else { false } }.count
        #expect(refused > 100 && verdicts.count - refused > 20, "\(refused) refused of \(verdicts.count)")
    }
}
