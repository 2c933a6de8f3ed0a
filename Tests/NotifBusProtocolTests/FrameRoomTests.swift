// A frame's room is counted from the same parts that write it (FrameRoom): held here where
// it counts a part by a figure of its own instead, a trace entry at its longest; every
// other part is checked as it is written, by the cursor's bounds in debug builds.
import Testing

@testable import NotifBusProtocol

struct FrameRoomTests {
    @Test func aTraceEntryAtItsLongestHoldsEveryReplysEntry() {
        let rooms = HopReply.allCases.map { reply in
            FrameRoom.of { $0.traceEntry(TraceHop(observer: .max, reply: reply), first: false) }
        }
        #expect(rooms.max() == PostReply.traceEntryRoom)
        var trace = FrameRoom()
        [TraceHop(observer: 1, reply: .next), TraceHop(observer: 2, reply: .skipped)].withUnsafeBufferPointer { trace.trace($0) }
        #expect(trace.bytes == 2 * PostReply.traceEntryRoom)
    }

    @Test func aLiteralIsCountedByItsLength() {
        #expect(FrameRoom.of { $0.literal("{\"op\":\"reply\",\"id\":") } == 19)
        #expect(FrameRoom.of { $0.int(.min) } == FrameCursor.maxIntBytes)
        #expect(FrameRoom.of { $0.string("\u{1}ab") } == 3 * 6 + 2)
    }
}
