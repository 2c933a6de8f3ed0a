// The bytes of one post's `event` frames that every hop shares, made once when the post is
// accepted (its name escaped, or kept as written when the post before had the same name; its
// payload copied): each hop then writes them around its observer's id. It decides nothing
// about hops, and holds nothing but these bytes.
import Glibc

/// One post's `event` frame less its observer, in memory of its own: the head
/// `{"op":"event","event":…,"observer":"o` and the tail `","name":…,"payload":…}`, one after
/// the other. A class, so that the queued post and its running event share one copy; the
/// owner may reuse one that nothing else holds for a later post (`reset`).
public final class EventFrame {
    private var base: UnsafeMutablePointer<UInt8>
    /// Bytes of memory held.
    public private(set) var capacity: Int
    /// Where the head ends and the tail starts.
    private var headCount = 0
    /// Bytes of head and tail together.
    private var count = 0
    /// Where the payload lies among the bytes; nil when the post has none (`null` is written).
    private var payloadRange: Range<Int>? = nil
    /// Bytes of the tail's name part, `","name":…,"payload":`, after the head.
    private var namePartCount = 0

    /// The frames of event `event`, posted as `name` with `payload` (copied: it may be a view
    /// of the frame it came in).
    public init(event: Int64, name: String, payload: JSONBytes?) {
        capacity = 0
        base = .allocate(capacity: 0)
        reset(event: event, name: name, payload: payload)
    }

    deinit {
        base.deallocate()
    }

    /// Makes these the frames of another post, in the same memory when it is large enough.
    public func reset(event: Int64, name: String, payload: JSONBytes?) {
        guard let payload else { return reset(event: event, name: name, bytes: nil) }
        payload.withUnsafeBytes { reset(event: event, name: name, bytes: $0) }
    }

    private func reset(event: Int64, name: String, bytes payload: UnsafeRawBufferPointer?) {
        let needed = EventFrame.maxBytes(name: name, payload: payload)
        if needed > capacity {
            base.deallocate()
            base = .allocate(capacity: needed)
            capacity = needed
            headCount = 0  // nothing of the last post's frames is kept
        }
        write(event: event, name: name, bytes: payload)
    }

    private func write(event: Int64, name: String, bytes payload: UnsafeRawBufferPointer?) {
        var w = FrameCursor(base, end: base + capacity)
        EventFrame.head(event: event, &w)
        let head = base.distance(to: w.p)
        // A post of the same name as the last one these bytes held, behind a head as long,
        // finds the name written already (most posts repeat a few names): its escaping is
        // skipped when its UTF-8 is the bytes between the quotes there.
        if head == headCount && holdsName(name, at: w.p) {
            w.skip(namePartCount)
        } else {
            let start = w.p
            EventFrame.namePart(name, &w)
            namePartCount = start.distance(to: w.p)
        }
        headCount = head
        EventFrame.payloadPart(payload, &w)
        count = base.distance(to: w.p)
        // The payload is what the tail ends with, before its closing brace.
        payloadRange = payload.map { (count - 1 - $0.count)..<(count - 1) }
    }

    /// Whether the name part at `p` was written for `name` with no escape: its length is
    /// the name's UTF-8 with the quotes and literals (so no byte was escaped), and the bytes
    /// between the quotes are the name's UTF-8.
    private func holdsName(_ name: String, at p: UnsafeMutablePointer<UInt8>) -> Bool {
        var name = name
        guard namePartCount == name.utf8.count &+ EventFrame.namePartLiterals else { return false }
        return name.withUTF8 { utf8 in
            utf8.isEmpty || memcmp(p + EventFrame.nameStart, utf8.baseAddress!, utf8.count) == 0
        }
    }

    /// The payload's bytes, copied out (nil when the post had none).
    public var payload: RawJSON? {
        payloadRange.map { Array(UnsafeBufferPointer(start: base + $0.lowerBound, count: $0.count)) }
    }

    /// How many bytes the payload has (0 when the post had none).
    public var payloadCount: Int { payloadRange?.count ?? 0 }

    /// The `event` frame for `observer`, encoded at the end of `store`: the head, the
    /// observer's number, the tail.
    public func encode(observer: Int, into store: OutputStore) -> OutputRange {
        @inline(__always) func shape<W: FrameWriter>(_ w: inout W) {
            w.raw(base, headCount)
            w.int(Int64(observer))
            w.raw(base + headCount, count &- headCount)
        }
        return store.frame(upTo: FrameRoom.of(shape)) { shape(&$0) }
    }

    /// Room the head and tail take at most.
    static func maxBytes(name: String, payload: UnsafeRawBufferPointer?) -> Int {
        FrameRoom.of { room in
            head(event: 0, &room)
            tail(name: name, payload: payload, &room)
        }
    }

    /// `{"op":"event","event":…,"observer":"o`; the observer's number follows.
    @inline(__always)
    static func head<W: FrameWriter>(event: Int64, _ w: inout W) {
        w.literal("{\"op\":\"event\",\"event\":")
        w.int(event)
        w.literal(",\"observer\":\"o")
    }

    /// `","name":…,"payload":…}`, after the observer's number.
    @inline(__always)
    static func tail<W: FrameWriter>(name: String, payload: UnsafeRawBufferPointer?, _ w: inout W) {
        namePart(name, &w)
        payloadPart(payload, &w)
    }

    /// `","name":…,"payload":`, the tail up to the payload.
    @inline(__always)
    static func namePart<W: FrameWriter>(_ name: String, _ w: inout W) {
        w.literal(EventFrame.beforeName)
        w.string(name)
        w.literal(EventFrame.afterName)
    }

    /// The name part's literals: before the name's string, and after it.
    static let beforeName: StaticString = "\",\"name\":"
    static let afterName: StaticString = ",\"payload\":"
    /// Where the name's bytes start in its part (after the literal and the opening quote),
    /// and the part's bytes besides them (the literals and the name's two quotes).
    static let nameStart = beforeName.utf8CodeUnitCount &+ 1
    static let namePartLiterals = beforeName.utf8CodeUnitCount &+ afterName.utf8CodeUnitCount &+ 2

    /// The payload, or `null`, and the closing brace.
    @inline(__always)
    static func payloadPart<W: FrameWriter>(_ payload: UnsafeRawBufferPointer?, _ w: inout W) {
        if let payload { w.raw(payload) } else { w.literal("null") }
        w.byte(UInt8(ascii: "}"))
    }
}
