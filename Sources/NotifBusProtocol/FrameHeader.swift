// Splits a byte stream into frames: a 4-byte big-endian length N, then N bytes of body.
// Pure arithmetic over borrowed bytes; callers own their buffers and decide on limits.

/// What the bytes at the front of a stream hold.
public enum FrameSplit: Equatable, Sendable {
    /// A complete frame whose body is `bodyStart..<bodyStart+length`.
    case frame(bodyStart: Int, length: Int)
    /// More bytes are needed before anything can be said.
    case needMore
    /// The length is 0 or above the limit: the stream cannot be trusted any further.
    case tooLarge(length: UInt32)
}

public enum FrameHeader {
    /// Looks at `bytes[offset...]` for a frame of at most `maxFrame` bytes of body.
    /// Inlinable, so that the transport's loop over a read's frames has it inline.
    @inlinable @inline(__always)
    public static func split(_ bytes: UnsafeRawBufferPointer, at offset: Int, maxFrame: Int) -> FrameSplit {
        let available = bytes.count - offset
        guard available >= 4, let start = bytes.baseAddress else { return .needMore }
        let n = UInt32(bigEndian: (start + offset).loadUnaligned(as: UInt32.self))
        if n == 0 || Int(n) > maxFrame { return .tooLarge(length: n) }
        guard available - 4 >= Int(n) else { return .needMore }
        return .frame(bodyStart: offset + 4, length: Int(n))
    }

    /// The 4-byte prefix for a body of `length` bytes.
    public static func encode(length: Int) -> [UInt8] {
        let n = UInt32(length)
        return [
            UInt8(truncatingIfNeeded: n >> 24), UInt8(truncatingIfNeeded: n >> 16),
            UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n),
        ]
    }
}

/// A streaming decoder for clients and tests: feed bytes, take whole frame bodies.
public struct FrameDecoder: Sendable {
    public enum Failure: Error, Equatable, Sendable {
        case tooLarge(length: UInt32)
    }

    private var buffer: [UInt8] = []
    private var start = 0
    public let maxFrame: Int

    /// `maxFrame` bounds a body; clients reading from the broker pass `UInt32.max`-like
    /// limits because broker frames may exceed the broker's own read limit.
    public init(maxFrame: Int = Int(UInt32.max)) {
        self.maxFrame = maxFrame
    }

    /// Bytes received but not yet returned as frames.
    public var pendingByteCount: Int { buffer.count - start }

    public mutating func append(_ bytes: some Sequence<UInt8>) {
        buffer.append(contentsOf: bytes)
    }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
    }

    /// The next complete frame body, or nil when more bytes are needed.
    public mutating func next() throws(Failure) -> [UInt8]? {
        let split = buffer.withUnsafeBytes { FrameHeader.split($0, at: start, maxFrame: maxFrame) }
        switch split {
        case .needMore:
            if start > 0 && start == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                start = 0
            }
            return nil
        case .tooLarge(let n):
            throw .tooLarge(length: n)
        case .frame(let bodyStart, let length):
            let body = Array(buffer[bodyStart..<bodyStart + length])
            start = bodyStart + length
            if start >= 65536 && start * 2 >= buffer.count {
                buffer.removeFirst(start)
                start = 0
            }
            return body
        }
    }
}
