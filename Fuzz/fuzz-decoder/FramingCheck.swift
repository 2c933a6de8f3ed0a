// Framing invariants: FrameHeader.split walked over a whole stream is the reference, and
// FrameDecoder must give the same bodies and the same end however the bytes arrive.
import FuzzDriver
import NotifBusProtocol

enum FramingCheck {
    /// The broker's default read limit, and a tiny one under which most lengths are too large.
    static let maxFrames = [Limits.defaultMaxFrame, 24]

    /// Where a stream ends up: waiting with some bytes pending, or refused for a length.
    enum End: Equatable {
        case waiting(pending: Int)
        case tooLarge(length: UInt32)
    }

    struct Outcome: Equatable {
        var bodies: [[UInt8]] = []
        var end: End = .waiting(pending: 0)
    }

    /// Checks the stream under each limit; returns the bodies found under the default one.
    static func run(_ stream: [UInt8]) -> [[UInt8]] {
        var found: [[UInt8]] = []
        for (index, maxFrame) in maxFrames.enumerated() {
            let reference = split(stream, maxFrame: maxFrame)
            expectSame(reference, decode(stream, maxFrame: maxFrame, chunks: [stream.count]), "in one piece")
            if index == 0 {
                found = reference.bodies
                expectSame(reference, decode(stream, maxFrame: maxFrame, chunks: [1]), "byte by byte")
                expectSame(reference, decode(stream, maxFrame: maxFrame, chunks: chunkSizes(for: stream)), "in uneven chunks")
            }
        }
        return found
    }

    /// The reference: split at successive offsets, each answer checked against the header.
    static func split(_ stream: [UInt8], maxFrame: Int) -> Outcome {
        var outcome = Outcome()
        var offset = 0
        stream.withUnsafeBytes { bytes in
            while true {
                let available = bytes.count - offset
                let announced: UInt32? =
                    available >= 4
                    ? UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
                    : nil
                switch FrameHeader.split(bytes, at: offset, maxFrame: maxFrame) {
                case .needMore:
                    if let n = announced, n >= 1, Int(n) <= maxFrame, available - 4 >= Int(n) {
                        violation("split waits at offset \(offset) although a \(n)-byte frame is complete")
                    }
                    if let n = announced, n == 0 || Int(n) > maxFrame {
                        violation("split waits at offset \(offset) on length \(n), outside 1...\(maxFrame)")
                    }
                    outcome.end = .waiting(pending: available)
                    return
                case .tooLarge(let length):
                    guard let n = announced, n == length, n == 0 || Int(n) > maxFrame else {
                        violation("split calls length \(length) at offset \(offset) too large; the header says \(String(describing: announced))")
                    }
                    outcome.end = .tooLarge(length: length)
                    return
                case .frame(let bodyStart, let length):
                    guard let n = announced, Int(n) == length, bodyStart == offset + 4, length >= 1, length <= maxFrame,
                        bodyStart + length <= bytes.count
                    else {
                        violation("split found a frame at \(bodyStart) of \(length) bytes at offset \(offset) in \(bytes.count) bytes")
                    }
                    let header = Array(bytes[offset..<bodyStart])
                    if FrameHeader.encode(length: length) != header {
                        violation("encode(length: \(length)) is not the header \(header)")
                    }
                    outcome.bodies.append(Array(bytes[bodyStart..<(bodyStart + length)]))
                    offset = bodyStart + length
                }
            }
        }
        return outcome
    }

    /// Feeds the stream to a FrameDecoder in chunks of the given sizes (cycled), taking
    /// frames after each chunk, and stops at the first error as a reader must.
    static func decode(_ stream: [UInt8], maxFrame: Int, chunks: [Int]) -> Outcome {
        var decoder = FrameDecoder(maxFrame: maxFrame)
        var outcome = Outcome()
        var offset = 0
        var chunk = 0
        repeat {
            let size = Swift.max(1, chunks[chunk % chunks.count])
            chunk += 1
            let end = Swift.min(stream.count, offset + size)
            decoder.append(stream[offset..<end])
            offset = end
            do {
                while let body = try decoder.next() {
                    if body.count > stream.count { violation("a \(body.count)-byte body out of a \(stream.count)-byte stream") }
                    outcome.bodies.append(body)
                }
            } catch {
                guard case .tooLarge(let length) = error else { violation("unexpected error \(error)") }
                outcome.end = .tooLarge(length: length)
                return outcome
            }
            if decoder.pendingByteCount > offset { violation("\(decoder.pendingByteCount) bytes pending after \(offset) received") }
        } while offset < stream.count
        outcome.end = .waiting(pending: decoder.pendingByteCount)
        return outcome
    }

    static func expectSame(_ reference: Outcome, _ decoded: Outcome, _ how: String) {
        guard reference != decoded else { return }
        violation(
            """
            FrameDecoder fed \(how) disagrees with FrameHeader.split: \(decoded.bodies.count) bodies, \
            end \(decoded.end); the reference has \(reference.bodies.count) bodies, end \(reference.end)
            """)
    }

    /// Chunk sizes from 1 to 64 derived from the stream itself, so a run is reproducible.
    static func chunkSizes(for stream: [UInt8]) -> [Int] {
        var state: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in stream.prefix(64) { state = (state ^ UInt64(b)) &* 0x100_0000_01b3 }
        return (0..<16).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(state >> 58) + 1
        }
    }
}
