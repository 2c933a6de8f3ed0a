// The frame decoder against Protocol/vectors/framing.json: every vector whole, byte by
// byte, and all concatenated; invalid vectors give their error or wait for more bytes.
import Foundation
import NotifBusProtocol
import Testing

struct FramingVectors {
    struct Valid {
        let name: String
        let bytes: [UInt8]
        let json: JSONValue
    }

    struct Invalid {
        let name: String
        let bytes: [UInt8]
        let error: String
    }

    let maxFrame: Int
    let valid: [Valid]
    let invalid: [Invalid]

    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Protocol/vectors").standardized

    static func load() throws -> FramingVectors {
        let data = try Data(contentsOf: folder.appendingPathComponent("framing.json"))
        let root = try JSONValue(parsing: Array(data))
        func bytes(_ hex: JSONValue?) throws -> [UInt8] {
            guard let text = hex?.stringValue, text.count % 2 == 0 else { throw VectorError("bad hex") }
            var out: [UInt8] = []
            var i = text.startIndex
            while i < text.endIndex {
                let j = text.index(i, offsetBy: 2)
                guard let b = UInt8(text[i..<j], radix: 16) else { throw VectorError("bad hex \(text[i..<j])") }
                out.append(b)
                i = j
            }
            return out
        }
        let valid = try (root["valid"]?.arrayValue ?? []).map {
            Valid(name: $0["name"]?.stringValue ?? "?", bytes: try bytes($0["hex"]), json: $0["json"] ?? .null)
        }
        let invalid = try (root["invalid"]?.arrayValue ?? []).map {
            Invalid(name: $0["name"]?.stringValue ?? "?", bytes: try bytes($0["hex"]), error: $0["error"]?.stringValue ?? "?")
        }
        return FramingVectors(maxFrame: Int(root["maxFrame"]?.intValue ?? Int64(Limits.defaultMaxFrame)), valid: valid, invalid: invalid)
    }
}

struct VectorError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// What a whole stream decodes to: bodies until an error, or the point where it waits.
enum StreamOutcome: Equatable {
    case frames([[UInt8]], waiting: Bool)
    case tooLarge([[UInt8]])
}

func decodeStream(_ chunks: [[UInt8]], maxFrame: Int) -> StreamOutcome {
    var decoder = FrameDecoder(maxFrame: maxFrame)
    var bodies: [[UInt8]] = []
    for chunk in chunks {
        decoder.append(chunk)
        do {
            while let body = try decoder.next() { bodies.append(body) }
        } catch {
            return .tooLarge(bodies)
        }
    }
    return .frames(bodies, waiting: decoder.pendingByteCount > 0)
}

@Suite struct FramingVectorTests {
    let vectors: FramingVectors

    init() throws {
        vectors = try FramingVectors.load()
    }

    @Test func vectorsExist() {
        #expect(vectors.valid.count >= 12)
        #expect(vectors.invalid.count >= 8)
    }

    @Test func validWholeAndByteByByte() throws {
        for v in vectors.valid {
            let whole = decodeStream([v.bytes], maxFrame: vectors.maxFrame)
            guard case .frames(let bodies, waiting: false) = whole, bodies.count == 1 else {
                Issue.record("\(v.name): \(whole)")
                continue
            }
            #expect(try JSONValue(parsing: bodies[0]) == v.json, "\(v.name)")
            guard case .decoded = MessageDecoder.decode(bodies[0]) else {
                // Decoding may reject semantically (that is the message vectors' job), but
                // a valid frame is never bad JSON.
                if case .badJSON(let why) = MessageDecoder.decode(bodies[0]) { Issue.record("\(v.name): bad JSON: \(why)") }
                continue
            }
            let bytewise = decodeStream(v.bytes.map { [$0] }, maxFrame: vectors.maxFrame)
            #expect(bytewise == whole, "\(v.name) byte by byte")
        }
    }

    @Test func allValidConcatenated() throws {
        let stream = vectors.valid.flatMap(\.bytes)
        guard case .frames(let bodies, waiting: false) = decodeStream([stream], maxFrame: vectors.maxFrame) else {
            Issue.record("concatenated stream did not decode")
            return
        }
        #expect(try bodies.map { try JSONValue(parsing: $0) } == vectors.valid.map(\.json))
        // Split at every third byte as well.
        let chunks = stride(from: 0, to: stream.count, by: 3).map { Array(stream[$0..<min($0 + 3, stream.count)]) }
        #expect(decodeStream(chunks, maxFrame: vectors.maxFrame) == .frames(bodies, waiting: false))
    }

    @Test func invalidVectors() {
        for v in vectors.invalid {
            let outcome = decodeStream([v.bytes], maxFrame: vectors.maxFrame)
            switch v.error {
            case "frame_too_large":
                #expect(outcome == .tooLarge([]), "\(v.name)")
            case "incomplete":
                #expect(outcome == .frames([], waiting: true), "\(v.name)")
            case "bad_json":
                guard case .frames(let bodies, waiting: false) = outcome, bodies.count == 1 else {
                    Issue.record("\(v.name): \(outcome)")
                    continue
                }
                guard case .badJSON = MessageDecoder.decode(bodies[0]) else {
                    Issue.record("\(v.name): decoded although it is not a JSON object")
                    continue
                }
                #expect((try? JSONValue(parsing: bodies[0]))?.objectValue == nil, "\(v.name)")
            default:
                Issue.record("\(v.name): unknown expected error \(v.error)")
            }
        }
    }

    @Test func truncatedAtEveryPointWaits() {
        for v in vectors.valid {
            for cut in [1, 3, 4, v.bytes.count - 1] where cut < v.bytes.count && cut > 0 {
                #expect(decodeStream([Array(v.bytes[..<cut])], maxFrame: vectors.maxFrame) == .frames([], waiting: true), "\(v.name) cut at \(cut)")
            }
        }
    }

    @Test func oversizedAfterAValidFrame() {
        guard let first = vectors.valid.first else { return }
        let stream = first.bytes + [0x00, 0x10, 0x00, 0x01]
        #expect(decodeStream([stream], maxFrame: vectors.maxFrame) == .tooLarge([Array(first.bytes[4...])]))
        #expect(decodeStream([first.bytes + [0, 0, 0, 0]], maxFrame: vectors.maxFrame) == .tooLarge([Array(first.bytes[4...])]))
    }
}
