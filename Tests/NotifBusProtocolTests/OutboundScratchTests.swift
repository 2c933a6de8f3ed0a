// Frames built in a shared FrameScratch are the frames built alone, one after another, and a
// frame that outgrows the scratch (a large payload) moves to memory of its own intact.
import NotifBusProtocol
import Testing

struct OutboundScratchTests {
    @Test func framesBuiltInTheScratchAreTheSameBytes() {
        let scratch = FrameScratch()
        let big = Array("[\"".utf8) + Array(repeating: UInt8(ascii: "x"), count: 40_000) + Array("\"]".utf8)
        let frames: [OutboundFrame] = [
            .reply(.integer(7), .value(Array("{\"a\":[1,2]}".utf8))),
            .call(call: 3, handler: 2, channel: "ch", method: "m\"q", arguments: JSONBytes(big), from: 1),
            .error(.string("r"), .badRequest, message: "bad \n thing"),
            .event(event: 9, observer: 4, name: "e", payload: nil),
            .reply(.integer(8), .value(big)),
            .handlerEvicted(1, by: 2),
        ]
        for frame in frames {
            #expect(frame.encoded(using: scratch) == frame.encoded())
        }
        let body = Array("{\"op\":\"ping\",\"id\":1}".utf8)
        let seen = body.withUnsafeBytes { bytes in
            (
                OutboundFrame.seen(inbound: true, client: 3, frame: bytes, scratch: scratch),
                OutboundFrame.seen(inbound: true, client: 3, frame: bytes)
            )
        }
        #expect(seen.0 == seen.1)
    }

    @Test func integersAreWrittenAsTheirDecimalForm() {
        var values: [Int64] = [0, 9, 10, 99, 100, 101, 999, 1000, 12_345, Int64.max, Int64.min, Int64.min + 1, -1, -10, -99, -100]
        var p: Int64 = 1
        for _ in 0..<18 {
            p *= 10
            values += [p - 1, p, p + 1, -p, -(p - 1)]
        }
        for value in values {
            var f = FrameBuilder(capacity: 8, lengthPrefix: false)
            f.int(value)
            #expect(String(decoding: f.finish(), as: UTF8.self) == String(value))
        }
    }
}
