// The core's durable writes with the transport's reports held back: a change takes effect
// and is answered only when its write is reported written; a failed write changes nothing
// and is answered storage_failed; requests that depend on a write in flight wait for it.
import NotifBusCore
import NotifBusProtocol
import Testing

@Suite struct DurableWriteTests {
    static let click =
        #"{"actionIdentifier":"com.apple.UNNotificationDefaultActionIdentifier","notification":{"identifier":"n1","content":{"userInfo":{"id":7}}}}"#

    /// A harness whose writes stay in flight until the test reports them.
    func holding() -> CoreHarness {
        var h = CoreHarness()
        h.holdWrites = true
        return h
    }

    @Test func putIsAnsweredAndVisibleOnlyOnceWritten() {
        var h = holding()
        let c = h.connect(), other = h.connect(), third = h.connect()
        h.send(c, #"{"op":"put","id":1,"slot":"s","value":"v"}"#)
        #expect(h.sent.isEmpty)
        #expect(h.persisted.map(\.record) == [.slot(name: "s", value: Array("\"v\"".utf8))])
        #expect(h.persisted.first?.acknowledges?.connection == c)
        #expect(h.persisted.first?.acknowledges?.requestID == .integer(1))
        // Another connection's peek of the slot waits for the write, and its later ping
        // behind the peek; a third connection's peek of another slot does not wait.
        h.send(other, #"{"op":"peek","id":2,"slot":"s"}"#)
        h.send(other, #"{"op":"ping","id":3}"#)
        #expect(h.request(third, #"{"op":"peek","id":4,"slot":"t"}"#)["result"] == .null)
        #expect(h.nothingSent(to: other))
        h.finishWrite()
        #expect(h.take(c).frame == ["op": "reply", "id": 1, "result": ["replaced": false, "delivered": false]])
        #expect(h.takeAll(other) == [["op": "reply", "id": 2, "result": "v"], ["op": "reply", "id": 3, "result": [:]]])
    }

    @Test func failedPutChangesNothing() {
        var h = holding()
        let c = h.connect()
        h.send(c, #"{"op":"put","id":1,"slot":"s","value":"old"}"#)
        h.finishWrite()
        _ = h.take(c)
        h.send(c, #"{"op":"put","id":2,"slot":"s","value":"new"}"#)
        h.send(c, #"{"op":"peek","id":3,"slot":"s"}"#)
        #expect(h.sent.isEmpty)
        h.finishWrite(written: false)
        #expect(errorCode(h.take(c).frame) == "storage_failed")
        #expect(h.take(c).frame == ["op": "reply", "id": 3, "result": "old"])
        #expect(h.inFlight.isEmpty)
    }

    @Test func failedTakeLeavesTheValue() {
        var h = holding()
        let c = h.connect()
        h.send(c, #"{"op":"put","id":1,"slot":"s","value":[1]}"#)
        h.finishWrite()
        _ = h.take(c)
        h.send(c, #"{"op":"take","id":2,"slot":"s"}"#)
        #expect(h.sent.isEmpty)
        #expect(h.persisted.last?.record == .slot(name: "s", value: nil))
        h.finishWrite(written: false)
        #expect(errorCode(h.take(c).frame) == "storage_failed")
        #expect(h.request(c, #"{"op":"peek","id":3,"slot":"s"}"#)["result"] == [1])
        h.send(c, #"{"op":"take","id":4,"slot":"s"}"#)
        h.finishWrite()
        #expect(h.take(c).frame == ["op": "reply", "id": 4, "result": [1]])
        #expect(h.request(c, #"{"op":"peek","id":5,"slot":"s"}"#)["result"] == .null)
    }

    @Test func failedEmptyingPutAndCategoriesChangeNothing() {
        var h = holding()
        let c = h.connect()
        h.send(c, #"{"op":"put","id":1,"slot":"s","value":1}"#)
        h.finishWrite()
        _ = h.take(c)
        h.send(c, #"{"op":"put","id":2,"slot":"s","value":null}"#)
        h.finishWrite(written: false)
        #expect(errorCode(h.take(c).frame) == "storage_failed")
        h.send(c, #"{"op":"setCategories","id":3,"categories":[{"identifier":"C","actions":[]}]}"#)
        h.send(c, #"{"op":"getCategories","id":4}"#)
        h.finishWrite(written: false)
        #expect(errorCode(h.take(c).frame) == "storage_failed")
        #expect(h.take(c).frame["result"]?["categories"] == [])
        #expect(h.request(c, #"{"op":"peek","id":5,"slot":"s"}"#)["result"] == 1)
    }

    @Test func oneConnectionsWritesToDifferentSlotsAreInFlightTogether() {
        var h = holding()
        let c = h.connect()
        h.send(c, #"{"op":"put","id":1,"slot":"a","value":1}"#)
        h.send(c, #"{"op":"put","id":2,"slot":"b","value":2}"#)
        h.send(c, #"{"op":"put","id":3,"slot":"a","value":3}"#)  // same slot: waits
        h.send(c, #"{"op":"ping","id":4}"#)  // answers in order: waits
        #expect(h.inFlight.count == 2)
        h.finishWrite()
        #expect(h.takeAll(c).map { $0["id"] } == [1])
        #expect(h.inFlight.count == 2)  // b, and now the second put of a
        h.finishWrite(written: false)
        #expect(h.takeAll(c).map { errorCode($0) } == ["storage_failed"])
        h.finishWrite()
        #expect(h.takeAll(c).map { $0["id"] } == [3, 4])
        #expect(h.request(c, #"{"op":"peek","id":5,"slot":"a"}"#)["result"] == 3)
        #expect(h.request(c, #"{"op":"peek","id":6,"slot":"b"}"#)["result"] == .null)
    }

    @Test func slotLimitsCountPutsInFlight() {
        var h = CoreHarness { $0.maxSlots = 2 }
        h.holdWrites = true
        let c = h.connect()
        h.send(c, #"{"op":"put","id":1,"slot":"a","value":1}"#)
        h.send(c, #"{"op":"put","id":2,"slot":"b","value":2}"#)
        h.send(c, #"{"op":"put","id":3,"slot":"c","value":3}"#)
        h.finishWrite()
        h.finishWrite()
        let replies = h.takeAll(c)
        #expect(replies.map { $0["id"] } == [1, 2, 3])
        #expect(errorCode(replies[2]) == "bad_request")
    }

    @Test func launchRetentionAnswersThePosterOnceWritten() {
        var h = holding()
        let c = h.connect()
        h.send(c, #"{"op":"post","id":1,"name":"didReceive","payload":\#(DurableWriteTests.click)}"#)
        #expect(h.sent.isEmpty)
        #expect(h.persisted.first?.acknowledges == nil)
        h.finishWrite()
        #expect(h.take(c).frame["result"]?["retained"] == "launch")
        h.send(c, #"{"op":"post","id":2,"name":"didReceive","payload":\#(DurableWriteTests.click)}"#)
        h.finishWrite(written: false)
        let reply = h.take(c).frame
        #expect(reply["result"]?["outcome"] == "unhandled")
        #expect(reply["result"]?["retained"] == .null)
        // The consumption of the retained payload is durable too.
        h.send(c, #"{"op":"take","id":3,"slot":"launch"}"#)
        h.finishWrite(written: false)
        #expect(errorCode(h.take(c).frame) == "storage_failed")
        h.send(c, #"{"op":"take","id":4,"slot":"launch"}"#)
        h.finishWrite()
        #expect(h.take(c).frame["result"]?["notification"]?["identifier"] == "n1")
    }

    /// Finishes one write per post in `ids`, each answering that post of `c` with its
    /// payload retained in `launch`, in order.
    static func expectRetentionsAnswered(
        _ h: inout CoreHarness, _ c: ConnectionID, _ ids: ClosedRange<Int64>, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for id in ids {
            h.finishWrite()
            let reply = h.take(c).frame
            #expect(reply["id"] == .integer(id) && reply["result"]?["retained"] == "launch", sourceLocation: sourceLocation)
        }
    }

    @Test func retentionsWaitingForLaunchCountAgainstTheQueue() {
        var h = CoreHarness { c in
            c.maxQueue = 2
            c.maxQueuePerClient = 10
        }
        h.holdWrites = true
        let c = h.connect(), observer = h.connect()
        // The first click's retention is written; the next two wait for `launch`.
        for id in 1...3 { h.send(c, #"{"op":"post","id":\#(id),"name":"didReceive","payload":\#(DurableWriteTests.click)}"#) }
        #expect(h.inFlight.count == 1 && h.sent.isEmpty)
        #expect(h.request(observer, #"{"op":"subscribe","id":1,"events":["x"]}"#)["result"] != nil)
        h.send(c, #"{"op":"post","id":4,"name":"x"}"#)
        #expect(h.take(observer).frame["op"] == "event")
        // Behind the running event, the two held retentions fill the queue of two.
        h.send(c, #"{"op":"post","id":5,"name":"x"}"#)
        let refused = h.take(c).frame
        #expect(refused["id"] == 5 && errorCode(refused) == "queue_full")
        // Each retention is answered once written, in order.
        DurableWriteTests.expectRetentionsAnswered(&h, c, 1...3)
    }

    @Test func retentionsWaitingForLaunchFillTheQueueWithNothingRunning() {
        var h = CoreHarness { c in
            c.maxQueue = 1
            c.maxQueuePerClient = 10
        }
        h.holdWrites = true
        let c = h.connect()
        // No observer: each click ends unhandled at once. The first one's retention is
        // written, the next two wait for `launch` (the queue of one, and the running place).
        for id in 1...3 { h.send(c, #"{"op":"post","id":\#(id),"name":"didReceive","payload":\#(DurableWriteTests.click)}"#) }
        #expect(h.inFlight.count == 1 && h.sent.isEmpty)
        h.send(c, #"{"op":"post","id":4,"name":"didReceive","payload":\#(DurableWriteTests.click)}"#)
        let refused = h.take(c).frame
        #expect(refused["id"] == 4 && errorCode(refused) == "queue_full")
        DurableWriteTests.expectRetentionsAnswered(&h, c, 1...3)
        // With nothing held any more, a click starts at once again.
        h.send(c, #"{"op":"post","id":5,"name":"didReceive","payload":\#(DurableWriteTests.click)}"#)
        #expect(h.inFlight.count == 1 && h.sent.isEmpty)
    }

    @Test func aWaitingTakeHandedAPutNeedsNoWrite() {
        var h = holding()
        let taker = h.connect(), putter = h.connect()
        h.send(taker, #"{"op":"take","id":1,"slot":"s","wait":5000}"#)
        #expect(h.request(putter, #"{"op":"put","id":2,"slot":"s","value":9}"#)["result"] == ["replaced": false, "delivered": true])
        #expect(h.take(taker).frame == ["op": "reply", "id": 1, "result": 9])
        #expect(h.persisted.isEmpty)
    }

    @Test func aWriteOfAConnectionThatLeftStillTakesEffect() {
        var h = holding()
        let c = h.connect(), other = h.connect()
        h.send(c, #"{"op":"put","id":1,"slot":"s","value":1}"#)
        h.send(c, #"{"op":"ping","id":2}"#)
        h.disconnect(c)
        h.finishWrite()
        #expect(h.nothingSent(to: c))
        #expect(h.request(other, #"{"op":"peek","id":3,"slot":"s"}"#)["result"] == 1)
    }

    @Test func shutdownClosesOnlyAfterTheLastWriteAndAnswersWhatWaited() {
        var h = holding()
        let c = h.connect()
        h.send(c, #"{"op":"put","id":1,"slot":"s","value":1}"#)
        h.send(c, #"{"op":"peek","id":2,"slot":"s"}"#)
        h.shutdown()
        h.collect()
        #expect(h.sent.isEmpty)
        #expect(h.closed.isEmpty)
        h.finishWrite()
        let frames = h.takeAll(c)
        #expect(frames.first == ["op": "reply", "id": 1, "result": ["replaced": false, "delivered": false]])
        #expect(frames.dropFirst().map { [$0["id"], errorCode($0).map { .string($0) }] } == [[2, "shutting_down"]])
        #expect(h.closed == [c])
    }

    @Test func withoutPersistenceChangesApplyAtOnce() {
        var h = CoreHarness { $0.persistsState = false }
        let c = h.connect()
        #expect(h.request(c, #"{"op":"put","id":1,"slot":"s","value":1}"#)["result"] == ["replaced": false, "delivered": false])
        #expect(h.request(c, #"{"op":"take","id":2,"slot":"s"}"#)["result"] == 1)
        #expect(h.persisted.isEmpty)
    }
}
