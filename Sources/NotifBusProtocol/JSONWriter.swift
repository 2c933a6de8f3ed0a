// Writes compact JSON into one buffer: `FrameBuilder` (one string escaper, one integer
// writer) and the `JSONValue` tree writer on top of it. Strings are escaped per RFC 8259;
// raw user data is copied byte for byte, never re-encoded.

/// JSON output of a `JSONValue` tree (clients, tests, the CLI). The broker's frames are
/// written by `OutboundFrame` through `FrameBuilder` directly, never through a tree.
public enum JSONWriter {
    /// Appends `value`, object keys sorted. Trees of any depth: containers are walked with
    /// an explicit stack, so the call stack never grows with the input.
    public static func append(_ value: JSONValue, to out: inout FrameBuilder) {
        // Each open container: its remaining elements, or its remaining sorted keys and members.
        enum Open {
            case array(IndexingIterator<[JSONValue]>, first: Bool)
            case object(IndexingIterator<[String]>, [String: JSONValue], first: Bool)
        }
        var stack: [Open] = []
        var next: JSONValue? = value
        while true {
            if let value = next {
                next = nil
                switch value {
                case .null: out.literal("null")
                case .bool(let b): out.literal(b ? "true" : "false")
                case .integer(let i): out.int(i)
                case .double(let d): appendDouble(d, to: &out)
                case .string(let s): out.string(s)
                case .array(let elements):
                    out.byte(UInt8(ascii: "["))
                    stack.append(.array(elements.elements.makeIterator(), first: true))
                case .object(let members):
                    out.byte(UInt8(ascii: "{"))
                    stack.append(.object(members.keys.sorted().makeIterator(), members.members, first: true))
                }
            }
            guard let top = stack.popLast() else { return }
            switch top {
            case .array(var elements, let first):
                if let element = elements.next() {
                    if !first { out.byte(UInt8(ascii: ",")) }
                    stack.append(.array(elements, first: false))
                    next = element
                } else {
                    out.byte(UInt8(ascii: "]"))
                }
            case .object(var keys, let members, let first):
                if let key = keys.next() {
                    if !first { out.byte(UInt8(ascii: ",")) }
                    out.string(key)
                    out.byte(UInt8(ascii: ":"))
                    stack.append(.object(keys, members, first: false))
                    next = members[key]!
                } else {
                    out.byte(UInt8(ascii: "}"))
                }
            }
        }
    }

    /// Non-finite numbers have no JSON form and are written as null.
    static func appendDouble(_ value: Double, to out: inout FrameBuilder) {
        guard value.isFinite else { return out.literal("null") }
        out.rawText(value.description)
    }
}

/// Names one frame in an `OutputStore`: where it starts, how many bytes it has (its length
/// prefix included), and the store's generation when it was written. The store hands out
/// these values only; reading one after the store was reset traps (`OutputStore.withBytes`).
public struct OutputRange: Sendable, Equatable {
    public let offset: Int
    public let count: Int
    public let generation: UInt64

    /// The two frames as one range, when `next` follows this one directly in the same
    /// generation (frames queued back to back for one connection); nil otherwise.
    public func joined(to next: OutputRange) -> OutputRange? {
        guard next.generation == generation && next.offset == offset + count else { return nil }
        return OutputRange(offset: offset, count: count + next.count, generation: generation)
    }
}

/// The broker's outgoing frames, one after another in one growable buffer, from the last
/// reset on: `frame(upTo:_:)` (a frame whose size is bounded first) or
/// `FrameBuilder(appendingTo:)` (one that is not) encodes a frame at its end, and the frame is named
/// by an `OutputRange` (offsets, not pointers, so the buffer may move when it grows). The
/// owner resets it once every range handed out is consumed; the generation then moves on,
/// so that a range kept beyond its reset traps instead of reading another frame's bytes.
/// One builder at a time: the owner encodes its frames one by one.
public final class OutputStore {
    /// Capacity at first, and what a reset shrinks back to.
    static let initialBytes = 16 << 10
    /// A reset keeps at most this capacity (1 MiB), so that one large frame does not pin
    /// its memory for the life of the broker.
    static let keptBytes = 1 << 20

    @usableFromInline private(set) var base: UnsafeMutablePointer<UInt8>
    private(set) var capacity: Int
    /// Bytes written since the last reset.
    public private(set) var count = 0
    /// How many resets there were; a range is valid only in the generation it was written in.
    public private(set) var generation: UInt64 = 0

    public init() {
        base = .allocate(capacity: OutputStore.initialBytes)
        capacity = OutputStore.initialBytes
    }

    deinit {
        base.deallocate()
    }

    /// Lends the bytes of `range` (its length prefix included) to `body`, which must not
    /// keep them. Traps when `range` is not a frame of this generation: the store was reset
    /// since it was written.
    /// Inlinable, so that the transport's write from a range is one check and a `send`.
    @inlinable @inline(__always)
    public func withBytes<R>(of range: OutputRange, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        precondition(
            range.generation == generation && range.offset >= 0 && range.count >= 0 && range.count <= count - range.offset,
            "an output range read after the store was reset")
        return try body(UnsafeRawBufferPointer(start: base + range.offset, count: range.count))
    }

    /// A copy of the bytes of `range`, for tests and tools; traps like `withBytes`.
    public func bytes(of range: OutputRange) -> [UInt8] {
        withBytes(of: range) { Array($0) }
    }

    /// Every range handed out so far has been consumed: the store starts again at its
    /// beginning, keeping its capacity (up to `keptBytes`), and the generation moves on.
    package func reset() {
        count = 0
        generation &+= 1
        if capacity > OutputStore.keptBytes {
            base.deallocate()
            base = .allocate(capacity: OutputStore.initialBytes)
            capacity = OutputStore.initialBytes
        }
    }

    /// Makes room for `n` more bytes; the memory may move (no frame is being built).
    @inline(__always)
    func reserve(_ n: Int) {
        if capacity &- count < n { grow(count &+ n) }
    }

    private func grow(_ needed: Int) {
        var size = capacity * 2
        while size < needed { size *= 2 }
        let bigger = UnsafeMutablePointer<UInt8>.allocate(capacity: size)
        bigger.update(from: base, count: count)
        base.deallocate()
        base = bigger
        capacity = size
    }

    /// Encodes one frame at the end of the store, its JSON written by `body` through a
    /// cursor into room for `n` bytes made once, its length prefix patched in front: a frame
    /// whose size is bounded before it is written needs no builder and no check per write.
    /// `body` must write at most `n` bytes (checked once it is done).
    @inline(__always)
    func frame(upTo n: Int, _ body: (inout FrameCursor) -> Void) -> OutputRange {
        reserve(Limits.headerBytes &+ n)
        let start = base + count
        var cursor = FrameCursor(start + Limits.headerBytes, end: start + Limits.headerBytes + n)
        body(&cursor)
        let length = start.distance(to: cursor.p)
        precondition(length &- Limits.headerBytes <= n, "a frame wrote more than the room it made")
        UnsafeMutableRawPointer(start).storeBytes(of: UInt32(truncatingIfNeeded: length &- Limits.headerBytes).bigEndian, as: UInt32.self)
        let range = OutputRange(offset: count, count: length, generation: generation)
        count &+= length
        return range
    }

    /// Appends a frame built elsewhere (one that outgrew the space left here).
    func append(_ bytes: UnsafePointer<UInt8>, _ n: Int) -> OutputRange {
        reserve(n)
        (base + count).update(from: bytes, count: n)
        let range = OutputRange(offset: count, count: n, generation: generation)
        count += n
        return range
    }

    /// Ends a frame that `FrameBuilder(appendingTo:)` wrote in place, from `start` to `end`.
    @inline(__always)
    func commit(from start: Int, to end: Int) -> OutputRange {
        precondition(start == count && end <= capacity, "two frames were built into the output store at once")
        count = end
        return OutputRange(offset: start, count: end - start, generation: generation)
    }
}

/// Builds one length-prefixed frame: reserve the 4-byte length, write JSON, patch it (or,
/// with `lengthPrefix: false`, just the JSON text).
/// It writes through a pointer (each append is a bounds check and a copy, not a trip through
/// Array's generic append) into memory of its own, or at the end of an `OutputStore` while
/// the frame fits there (beyond, it moves to memory of its own and is copied in at
/// `finish(into:)`). `finish` hands the bytes over as one exactly sized array,
/// `finish(into:)` as a range of the store. Noncopyable, so its memory has exactly one owner.
public struct FrameBuilder: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var count: Int
    /// Where this frame starts in `base` (0 in memory of its own).
    private var start: Int
    private let prefixed: Bool
    /// Whether `base` is this builder's own memory (not an `OutputStore`'s).
    private var owned: Bool

    /// A builder in memory of its own that reserves `capacity` bytes at first.
    @inline(__always)
    public init(capacity: Int = 128, lengthPrefix: Bool = true) {
        let size = Swift.max(capacity, 32)
        base = .allocate(capacity: size)
        self.capacity = size
        owned = true
        start = 0
        prefixed = lengthPrefix
        count = lengthPrefix ? Limits.headerBytes : 0
    }

    /// A length-prefixed frame written at the end of `store`; end it with
    /// `finish(into:)` on the same store, before any other frame is built into it. The
    /// store's memory may move here (never later, while the frame is built), so a pointer
    /// into it is to be taken after this.
    /// Always inlined: called apart, it retains and releases `store`.
    @inline(__always)
    public init(appendingTo store: OutputStore) {
        store.reserve(FrameBuilder.storeHeadroom)
        base = store.base
        capacity = store.capacity
        start = store.count
        count = store.count + Limits.headerBytes
        owned = false
        prefixed = true
    }

    deinit {
        if owned { base.deallocate() }
    }

    /// Room made in a store for each frame started there: its length prefix and more.
    static let storeHeadroom = 256

    /// Bytes of this frame written so far, the length prefix (if any) included.
    public var byteCount: Int { count - start }

    @inline(__always)
    private mutating func reserve(_ n: Int) {
        if count + n > capacity { grow(count + n) }
    }

    /// Makes room for `n` more bytes and lends `body` a cursor at the frame's end; the frame
    /// then ends where the cursor stopped. The cursor checks nothing: `body` writes at most
    /// `n` bytes, which is what lets a frame of known shape be written with one check.
    @inline(__always)
    mutating func reserving<R>(_ n: Int, _ body: (inout FrameCursor) -> R) -> R {
        reserve(n)
        var cursor = FrameCursor(base + count, end: base + count + n)
        let result = body(&cursor)
        count = base.distance(to: cursor.p)
        return result
    }

    /// Moves the frame to memory of its own that holds `needed - start` bytes: an
    /// `OutputStore`'s memory is left as it is (frames before this one stay where they are).
    private mutating func grow(_ needed: Int) {
        let used = count - start
        var size = Swift.max(used * 2, 64)
        while size < needed - start { size *= 2 }
        let bigger = UnsafeMutablePointer<UInt8>.allocate(capacity: size)
        bigger.update(from: base + start, count: used)
        if owned { base.deallocate() }
        base = bigger
        owned = true
        capacity = size
        count = used
        start = 0
    }

    @inline(__always)
    private mutating func write(_ source: UnsafePointer<UInt8>, _ n: Int) {
        reserve(n)
        (base + count).update(from: source, count: n)
        count += n
    }

    @inline(__always)
    public mutating func byte(_ b: UInt8) {
        reserve(1)
        base[count] = b
        count += 1
    }

    @inline(__always)
    public mutating func literal(_ text: StaticString) {
        write(text.utf8Start, text.utf8CodeUnitCount)
    }

    /// A JSON string, escaped per RFC 8259.
    public mutating func string(_ text: String) {
        reserving(FrameCursor.maxStringBytes(text.utf8.count)) { $0.string(text) }
    }

    /// The decimal form of `value`.
    public mutating func int(_ value: Int64) {
        reserving(FrameCursor.maxIntBytes) { $0.int(value) }
    }

    public mutating func raw(_ value: [UInt8]) {
        value.withUnsafeBufferPointer { buffer in
            if let start = buffer.baseAddress { write(start, buffer.count) }
        }
    }

    public mutating func raw(_ value: UnsafeRawBufferPointer) {
        guard let start = value.baseAddress else { return }
        write(start.assumingMemoryBound(to: UInt8.self), value.count)
    }

    /// UTF-8 bytes of text written as they are (for text known to be valid JSON).
    public mutating func rawText(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            if let start = utf8.baseAddress { write(start, utf8.count) }
        }
    }

    public mutating func value(_ value: JSONValue) {
        JSONWriter.append(value, to: &self)
    }

    /// A string, or `null` for nil.
    public mutating func optionalString(_ text: String?) {
        if let text { string(text) } else { literal("null") }
    }

    /// Raw JSON, or `null` for nil.
    public mutating func optionalRaw(_ value: [UInt8]?) {
        if let value { raw(value) } else { literal("null") }
    }

    @inline(__always)
    private func patchLength() {
        guard prefixed else { return }
        let n = UInt32(count - start - Limits.headerBytes)
        // One unaligned big-endian store (the frame may start at any offset of a store).
        UnsafeMutableRawPointer(base + start).storeBytes(of: n.bigEndian, as: UInt32.self)
    }

    /// Patches the length prefix (if any) and returns the bytes.
    public consuming func finish() -> [UInt8] {
        patchLength()
        // Copied from a buffer pointer, the array is made by the stdlib's UInt8-specialized
        // path; `init(unsafeUninitializedCapacity:)` looks the array's storage type up at
        // run time on every frame, which costs more than the copy.
        return Array(UnsafeBufferPointer(start: base + start, count: count - start))
    }

    /// Patches the length prefix and ends the frame in `store`: in place when it was written
    /// there (`init(appendingTo:)` on the same store), otherwise copied to its end.
    @inline(__always)
    public consuming func finish(into store: OutputStore) -> OutputRange {
        patchLength()
        if owned { return store.append(base, count) }
        precondition(base == store.base, "a frame finished into another output store")
        return store.commit(from: start, to: count)
    }
}

/// What a frame of known shape is written through: `FrameCursor`, which writes its bytes
/// into room made for them, and `FrameRoom`, which counts the most room each part can take.
/// An encoder writes its shape once, generic over the writer, and runs it through both:
/// first to make the room, then to write, so that the room is reckoned from the same parts
/// that fill it (`FrameRoom.of(_:)`).
protocol FrameWriter {
    mutating func byte(_ b: UInt8)
    mutating func literal(_ text: StaticString)
    mutating func raw(_ start: UnsafePointer<UInt8>, _ n: Int)
    mutating func raw(_ bytes: UnsafeRawBufferPointer)
    /// A JSON string, escaped.
    mutating func string(_ text: String)
    /// UTF-8 bytes of text written as they are.
    mutating func rawText(_ text: String)
    mutating func int(_ value: Int64)
    /// A post's trace entries (`PostReply`), which the room counts at their longest.
    mutating func trace(_ trace: UnsafeBufferPointer<TraceHop>)
}

/// Counts the room a frame's parts take at most: a literal's length, raw bytes' count, 20
/// bytes per integer (`FrameCursor.maxIntBytes`), six per byte of a string and its quotes
/// (`FrameCursor.maxStringBytes`). Writes nothing.
struct FrameRoom: FrameWriter {
    private(set) var bytes = 0

    /// The room `shape` takes at most.
    @inline(__always)
    static func of(_ shape: (inout FrameRoom) -> Void) -> Int {
        var room = FrameRoom()
        shape(&room)
        return room.bytes
    }

    @inline(__always) mutating func byte(_ b: UInt8) { bytes &+= 1 }
    @inline(__always) mutating func literal(_ text: StaticString) { bytes &+= text.utf8CodeUnitCount }
    @inline(__always) mutating func raw(_ start: UnsafePointer<UInt8>, _ n: Int) { bytes &+= n }
    @inline(__always) mutating func raw(_ bytes: UnsafeRawBufferPointer) { self.bytes &+= bytes.count }
    @inline(__always) mutating func string(_ text: String) { bytes &+= FrameCursor.maxStringBytes(text.utf8.count) }
    @inline(__always) mutating func rawText(_ text: String) { bytes &+= text.utf8.count }
    @inline(__always) mutating func int(_ value: Int64) { bytes &+= FrameCursor.maxIntBytes }
    @inline(__always) mutating func reserve(_ n: Int) { bytes &+= n }
}

/// Writes into room made for it beforehand (`OutputStore.frame(upTo:_:)`,
/// `FrameBuilder.reserving`, an `EventFrame`'s memory): each write is a store and a step of
/// the pointer, with no bounds check and no count kept in memory. The room is what
/// `FrameRoom` counts for the same parts; the cursor must not pass it.
struct FrameCursor: FrameWriter {
    var p: UnsafeMutablePointer<UInt8>
    #if DEBUG
    /// The end of the room made for the frame. Debug builds (every test runs one) check
    /// each write against it before it is made; release builds check the frame's length
    /// once it is written, as `OutputStore.frame` does.
    let end: UnsafeMutablePointer<UInt8>
    #endif

    /// A cursor at `p` that may write up to `end`.
    @inline(__always)
    init(_ p: UnsafeMutablePointer<UInt8>, end: UnsafeMutablePointer<UInt8>) {
        self.p = p
        #if DEBUG
        self.end = end
        #endif
    }

    /// Traps (debug builds) when `n` bytes from `at` would pass the room made for the frame.
    @inline(__always)
    func checkRoom(_ n: Int, at q: UnsafeMutablePointer<UInt8>? = nil) {
        #if DEBUG
        precondition((q ?? p).distance(to: end) >= n, "FrameCursor: a write of \(n) bytes passes the room made for the frame")
        #endif
    }

    /// Moves past `n` bytes written already (`EventFrame`'s kept name).
    @inline(__always)
    mutating func skip(_ n: Int) {
        checkRoom(n)
        p += n
    }

    /// Room an integer needs: 20 characters for any Int64 with its sign, which also covers
    /// the eight-byte stores of `int` (they may write past the digits, never past this).
    static let maxIntBytes = 20

    @inline(__always)
    mutating func byte(_ b: UInt8) {
        checkRoom(1)
        p.pointee = b
        p += 1
    }

    /// A literal's bytes: its length is known here, so the copy is a few fixed-size stores.
    @inline(__always)
    mutating func literal(_ text: StaticString) {
        checkRoom(text.utf8CodeUnitCount)
        UnsafeMutableRawPointer(p).copyMemory(from: text.utf8Start, byteCount: text.utf8CodeUnitCount)
        p += text.utf8CodeUnitCount
    }

    @inline(__always)
    mutating func raw(_ start: UnsafePointer<UInt8>, _ n: Int) {
        checkRoom(n)
        UnsafeMutableRawPointer(p).copyMemory(from: start, byteCount: n)
        p += n
    }

    @inline(__always)
    mutating func raw(_ bytes: UnsafeRawBufferPointer) {
        guard let start = bytes.baseAddress else { return }
        checkRoom(bytes.count)
        UnsafeMutableRawPointer(p).copyMemory(from: start, byteCount: bytes.count)
        p += bytes.count
    }

    /// Room a JSON string of `utf8Count` bytes needs at most: each byte escaped as
    /// `\u00XX`, and the quotes.
    @inline(__always)
    static func maxStringBytes(_ utf8Count: Int) -> Int { utf8Count &* 6 &+ 2 }

    /// A JSON string, escaped per RFC 8259 (room: `maxStringBytes`).
    mutating func string(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            // Its room is the bound, whatever the escapes turn out to be.
            checkRoom(FrameCursor.maxStringBytes(utf8.count))
            var q = p
            q.pointee = UInt8(ascii: "\"")
            q += 1
            for b in utf8 {
                if b >= 0x20 && b != UInt8(ascii: "\"") && b != UInt8(ascii: "\\") {
                    q.pointee = b
                    q += 1
                    continue
                }
                q[0] = UInt8(ascii: "\\")
                switch b {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): q[1] = b; q += 2
                case 0x0A: q[1] = UInt8(ascii: "n"); q += 2
                case 0x0D: q[1] = UInt8(ascii: "r"); q += 2
                case 0x09: q[1] = UInt8(ascii: "t"); q += 2
                case 0x08: q[1] = UInt8(ascii: "b"); q += 2
                case 0x0C: q[1] = UInt8(ascii: "f"); q += 2
                default:
                    let hex: StaticString = "0123456789abcdef"
                    q[1] = UInt8(ascii: "u")
                    q[2] = 0x30
                    q[3] = 0x30
                    q[4] = hex.utf8Start[Int(b >> 4)]
                    q[5] = hex.utf8Start[Int(b & 0xF)]
                    q += 6
                }
            }
            q.pointee = UInt8(ascii: "\"")
            p = q + 1
        }
    }

    /// UTF-8 bytes of text written as they are (for text known to be valid JSON).
    mutating func rawText(_ text: String) {
        var text = text
        text.withUTF8 { raw(UnsafeRawBufferPointer($0)) }
    }

    /// The decimal form of `value`. Below 10^8 (every id in practice) its digits are made
    /// all at once in one word and stored as one; larger values take one such word per
    /// eight digits.
    @inline(__always)
    mutating func int(_ value: Int64) {
        if value < 0 {
            byte(UInt8(ascii: "-"))
        }
        decimal(value.magnitude)
    }

    @inline(__always)
    mutating func decimal(_ value: UInt64) {
        if value < 10 {
            byte(UInt8(truncatingIfNeeded: value) &+ 0x30)
        } else if value < 100 {
            checkRoom(2)
            let pairs = UnsafeRawPointer(FrameCursor.digitPairs.utf8Start)
            UnsafeMutableRawPointer(p).storeBytes(
                of: pairs.loadUnaligned(fromByteOffset: Int(truncatingIfNeeded: value) &* 2, as: UInt16.self), as: UInt16.self)
            p += 2
        } else if value < 100_000_000 {
            leadingDigits(value)
        } else {
            longDecimal(value)
        }
    }

    /// `decimal` of a value of nine digits or more: one word per eight digits.
    mutating func longDecimal(_ value: UInt64) {
        if value < 10_000_000_000_000_000 {
            leadingDigits(value / 100_000_000)
        } else {
            leadingDigits(value / 10_000_000_000_000_000)
            eightDigits(value / 100_000_000 % 100_000_000)
        }
        eightDigits(value % 100_000_000)
    }

    /// `value` (1 to 10^8 − 1) without leading zeros: its eight digits are stored as one
    /// word shifted past the zeros, so that the bytes after the digits are zeros the next
    /// write covers.
    @inline(__always)
    private mutating func leadingDigits(_ value: UInt64) {
        let digits = FrameCursor.digitBytes(value)
        let zeros = digits.trailingZeroBitCount & ~7  // the leading zero digits, in bits
        checkRoom(8)
        UnsafeMutableRawPointer(p).storeBytes(of: ((digits | FrameCursor.asciiZeros) &>> zeros).littleEndian, as: UInt64.self)
        p += 8 &- zeros &>> 3
    }

    /// `value` (below 10^8) as exactly eight digits, leading zeros included.
    @inline(__always)
    private mutating func eightDigits(_ value: UInt64) {
        checkRoom(8)
        UnsafeMutableRawPointer(p).storeBytes(of: (FrameCursor.digitBytes(value) | FrameCursor.asciiZeros).littleEndian, as: UInt64.self)
        p += 8
    }

    static let asciiZeros: UInt64 = 0x3030_3030_3030_3030

    /// The eight decimal digits of `value` (below 10^8) as the values 0 to 9 in the bytes of
    /// one word, the most significant digit in the lowest byte (first in memory on a
    /// little-endian machine). Division by multiplication, lane by lane: the two halves of
    /// four digits in 32-bit lanes, then pairs in 16-bit lanes, then digits in bytes.
    @inline(__always)
    static func digitBytes(_ value: UInt64) -> UInt64 {
        let high = value / 10_000
        let fours = high | (value &- high &* 10_000) << 32
        let hundreds = (fours &* 10_486) >> 20 & 0x0000_007F_0000_007F  // x / 100 for x < 10^4
        let pairs = (fours &- hundreds &* 100) << 16 | hundreds
        let tens = (pairs &* 103) >> 10 & 0x000F_000F_000F_000F  // x / 10 for x < 100
        return tens | (pairs &- tens &* 10) << 8
    }

    /// "00" through "99", for writing two digits at a time.
    static let digitPairs: StaticString =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"
}
