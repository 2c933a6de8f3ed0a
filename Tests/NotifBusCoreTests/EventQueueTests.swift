import NotifBusProtocol
import Testing

// EventQueue on its own, with a fake clock: posts in order with their bytes, and the
// chain state (idle, between, awaiting) moving as its file draws it.
@testable import NotifBusCore

struct EventQueueTests {
    static func enqueue(_ q: inout EventQueue, _ name: String, payload: String? = nil) -> Int64 {
        guard let payload else {
            return q.enqueue(poster: 9, requestID: .integer(1), name: name, payload: nil, isWillPresent: false, launchesApp: false)
        }
        return q.enqueue(
            poster: 9, requestID: .integer(1), name: name, payload: JSONBytes(Array(payload.utf8)), isWillPresent: false, launchesApp: false)
    }

    @Test func postsWaitInOrderAndCountTheirBytes() {
        var q = EventQueue()
        #expect(EventQueueTests.enqueue(&q, "a", payload: "[1]") == 1)
        #expect(EventQueueTests.enqueue(&q, "b") == 2)
        #expect(q.count == 2 && q.waitingBytes == 3)
        #expect(q.dequeue()?.post.name == "a")
        #expect(q.waitingBytes == 0)
        #expect(q.dequeue()?.post.name == "b")
        #expect(q.dequeue() == nil)
    }

    /// idle → between → awaiting → between → idle, with the trace and the hop that ended.
    @Test func theChainStateMovesAsDrawn() {
        var q = EventQueue()
        #expect(!q.isRunning && q.running == nil && q.awaited == nil)
        _ = EventQueueTests.enqueue(&q, "e")
        q.begin(q.dequeue()!, chain: [4, 5, 6])
        guard case .between = q.state else {
            Issue.record("not between after begin")
            return
        }
        #expect(q.isRunning && q.awaited == nil)
        #expect(q.nextInChain() == 4)
        q.skip(4)
        #expect(q.nextInChain() == 5)
        let hop = AwaitedHop(observer: 5, client: 2, deadline: 1_500, startedAt: 1_000)
        let store = OutputStore()
        let sent = q.awaitHop(hop, encodingInto: store)
        #expect(store.bytes(of: sent) == OutboundFrame.event(event: 1, observer: 5, name: "e", payload: nil).encoded())
        #expect(q.awaited == hop)
        #expect(q.nextInChain() == nil, "no walking while an answer is awaited")
        let ended1 = q.endHop(.next)
        let ended2 = q.endHop(.next)
        #expect(ended1 == hop && ended1?.duration(until: 1_200) == 200)
        #expect(ended2 == nil, "a second end of the same hop")
        #expect(q.nextInChain() == 6)
        #expect(q.nextInChain() == nil)
        let ended = q.finish()
        #expect(ended?.trace == [TraceHop(observer: 4, reply: .skipped), TraceHop(observer: 5, reply: .next)])
        #expect(!q.isRunning && q.finish() == nil)
    }

    /// Shutdown ends an event whose answer is awaited.
    @Test func finishEndsAnAwaitedEvent() {
        var q = EventQueue()
        _ = EventQueueTests.enqueue(&q, "e")
        q.begin(q.dequeue()!, chain: [1])
        _ = q.nextInChain()
        _ = q.awaitHop(AwaitedHop(observer: 1, client: 1, deadline: 10, startedAt: 0), encodingInto: OutputStore())
        #expect(q.finish()?.post.name == "e")
        #expect(q.awaited == nil && !q.isRunning)
    }

    /// An ended event's frames are written over for a later post only when nothing else
    /// holds them; the post's payload reads back from its frames either way.
    @Test func framesAreReusedOnlyWhenNothingElseHoldsThem() {
        var q = EventQueue()
        /// Runs a post through an empty chain and recycles its record; returns the capacity
        /// of its frames, and them if `keep`.
        func run(_ payload: String, keep: Bool = false) -> (capacity: Int, frame: EventFrame?) {
            _ = EventQueueTests.enqueue(&q, "e", payload: payload)
            q.begin(q.dequeue()!, chain: [])
            let event = q.finish()!
            #expect(event.post.payload == Array(payload.utf8) && event.post.payloadCount == payload.utf8.count)
            let result = (event.post.frame.capacity, keep ? event.post.frame : nil)
            q.recycle(event)
            return result
        }
        let large = "[" + String(repeating: "1,", count: 1000) + "1]"
        let held = run(large, keep: true)
        #expect(held.capacity > 2000)
        // The held frames are not written over: the next post's are new, just large enough.
        #expect(run("[2]").capacity < 200)
        #expect(held.frame?.payload == Array(large.utf8))
        // Frames nothing held are: a small post gets the large one's memory.
        #expect(run(large).capacity > 2000)
        #expect(run("{}").capacity > 2000)
    }

    /// A clock that went backwards charges nothing.
    @Test func aHopCannotTakeNegativeTime() {
        #expect(AwaitedHop(observer: 1, client: 7, deadline: 10, startedAt: 500).duration(until: 400) == 0)
    }

    /// A connection's hop time counts per event: a hop of a later event starts from zero.
    @Test func hopTimeIsCountedPerEvent() {
        let record = ClientRecord(id: 1, credentials: PeerCredentials(pid: 1, uid: 0, gid: 0))
        #expect(record.hopTime(in: 1) == 0)
        record.charge(200, in: 1)
        record.charge(50, in: 1)
        #expect(record.hopTime(in: 1) == 250 && record.hopTime(in: 2) == 0)
        record.charge(30, in: 2)
        #expect(record.hopTime(in: 2) == 30 && record.hopTime(in: 1) == 0)
    }
}
