// Frames built one after another in an OutputStore are the frames built alone, a frame larger
// than the space left there (a large payload) is written whole, a reset starts the store again
// in a new generation, and frames at the edges of the room their encoders make for them are
// written whole and read back as what they stand for; a write past the room a frame made
// traps in a debug build before it is made.
import Testing

@testable import NotifBusProtocol

struct OutboundScratchTests {
    static let big = Array("[\"".utf8) + Array(repeating: UInt8(ascii: "x"), count: 40_000) + Array("\"]".utf8)

    /// The frames the store builds one after another, by index (frames are not `Escapable`,
    /// so no array holds them).
    @_lifetime(immortal)
    static func frame(_ i: Int) -> OutboundFrame {
        switch i {
        case 0: .reply(.integer(7), .value(Array("{\"a\":[1,2]}".utf8)))
        case 1: .call(call: 3, handler: 2, channel: JSONName("ch"), method: JSONName("m\"q"), arguments: JSONBytes(big), from: 1)
        case 2: .error(.string("r"), .badRequest, message: "bad \n thing")
        case 3: .event(event: 9, observer: 4, name: "e", payload: nil)
        case 4: .reply(.integer(8), .value(big))
        default: .handlerEvicted(1, by: 2)
        }
    }

    @Test func framesBuiltInTheStoreAreTheSameBytes() {
        let store = OutputStore()
        let frames = 0..<6
        for round in 0..<2 {
            // Every range stays readable, with its own bytes, until the reset; the frames
            // beyond the store's first 16 KiB were built apart and copied in.
            let ranges = frames.map { Self.frame($0).encode(into: store) }
            var end = 0
            for (frame, range) in zip(frames, ranges) {
                #expect(range.offset == end && range.generation == UInt64(round))
                #expect(store.bytes(of: range) == Self.frame(frame).encoded())
                end += range.count
            }
            #expect(store.count == end)
            let body = Array("{\"op\":\"ping\",\"id\":1}".utf8)
            let mirrored = body.withUnsafeBytes { bytes in
                (
                    OutboundFrame.seen(inbound: true, client: 3, frame: bytes, into: store),
                    OutboundFrame.seen(inbound: true, client: 3, frame: bytes)
                )
            }
            #expect(store.bytes(of: mirrored.0) == mirrored.1)
            let ping = OutboundFrame.reply(.integer(1), .empty)
            let sent = ping.encode(into: store)
            let out = OutboundFrame.seen(sent: sent, client: 5, into: store)
            let expected = ping.encoded().withUnsafeBytes {
                OutboundFrame.seen(inbound: false, client: 5, frame: UnsafeRawBufferPointer(rebasing: $0[4...]))
            }
            #expect(store.bytes(of: out) == expected)
            store.reset()
            #expect(store.count == 0 && store.generation == UInt64(round + 1))
        }
    }

    @Test func integersAreWrittenAsTheirDecimalForm() {
        var values: [Int64] = [0, 9, 10, 99, 100, 101, 999, 1000, 12_345, Int64.max, Int64.min, Int64.min + 1, -1, -10, -99, -100]
        var p: Int64 = 1
        for _ in 0..<18 {
            p *= 10
            values += [p - 1, p, p + 1, -p, -(p - 1)]
        }
        // And a spread of every length: a fixed-seed generator, numbers shifted to each width.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<4000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            values.append(Int64(bitPattern: state) >> (state % 64))
        }
        for value in values {
            var f = FrameBuilder(capacity: 8, lengthPrefix: false)
            f.int(value)
            f.literal(",")  // what follows the digits is written where their word's zeros were
            #expect(String(decoding: f.finish(), as: UTF8.self) == String(value) + ",")
        }
    }

    /// The longest of what each encoder reckons with: ids at their largest, string ids and
    /// names whose every byte needs an escape, many trace entries of the longest kind.
    @Test func framesAtTheEdgesOfTheirRoom() throws {
        let controls = String(repeating: "\u{1}\"\\", count: 90)
        let rid = RequestID.string(String(repeating: "\\\"", count: 128))  // 256 bytes, as written
        let big = Int.max
        func json(_ frame: OutboundFrame) throws -> JSONValue {
            let store = OutputStore()
            let bytes = store.bytes(of: frame.encode(into: store))
            #expect(bytes == frame.encoded())
            return try JSONValue(parsing: bytes[4...])
        }
        let error = try json(.error(rid, .badRequest, message: controls))
        #expect(error["id"]?.stringValue == String(repeating: "\"", count: 128))
        #expect(error["error"]?["message"]?.stringValue == controls)
        let superseded = try json(.superseded(.integer(Int64.min), message: controls, by: controls))
        #expect(superseded["id"]?.intValue == Int64.min && superseded["error"]?["details"]?["by"]?.stringValue == controls)
        let call = try json(
            .call(call: Int64.max, handler: big, channel: JSONName(controls), method: JSONName(controls), arguments: nil, from: big))
        #expect(call["channel"]?.stringValue == controls && call["method"]?.stringValue == controls)
        #expect(call["call"]?.intValue == Int64.max && call["from"]?.stringValue == "c\(big)")
        let event = try json(.event(event: Int64.max, observer: big, name: controls, payload: nil))
        #expect(event["name"]?.stringValue == controls && event["observer"]?.stringValue == "o\(big)")
        let hello = try json(.reply(rid, .hello(server: controls, client: big, maxFrame: big)))
        #expect(hello["result"]?["server"]?.stringValue == controls)
        let trace = (0..<200).map { TraceHop(observer: big - $0, reply: $0 % 2 == 0 ? .complete : .skipped) }
        let post = PostReply(event: Int64.max, outcome: .unhandled, by: big, value: nil, retained: true, trace: trace)
        let result = try json(.reply(rid, .posted(post)))
        #expect(result["result"]?["trace"]?.arrayValue?.count == 200)
        #expect(result["result"]?["trace"]?.arrayValue?.last?["observer"]?.stringValue == "o\(big - 199)")
    }

    /// Every test runs a debug build, where a cursor checks each write against the room its
    /// frame made: an encoder that counts its room short traps at the write, before any
    /// memory past the room is touched.
    @Test func aWritePastTheRoomTrapsBeforeItIsMade() async {
        #if DEBUG
        await #expect(processExitsWith: .failure) {
            let store = OutputStore()
            _ = store.frame(upTo: 4) { $0.literal("12345678") }
        }
        await #expect(processExitsWith: .failure) {
            var builder = FrameBuilder(capacity: 64, lengthPrefix: false)
            builder.reserving(3) { $0.int(123_456_789) }
        }
        #endif
        // Within the room, both write what they were given.
        let store = OutputStore()
        let range = store.frame(upTo: 8) { $0.literal("12345678") }
        #expect(range.count == 12)
        var builder = FrameBuilder(capacity: 64, lengthPrefix: false)
        builder.reserving(FrameCursor.maxIntBytes) { $0.int(123_456_789) }
        #expect(builder.finish() == Array("123456789".utf8))
    }
}
