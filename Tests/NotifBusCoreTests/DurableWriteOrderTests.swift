// Durable writes and the order of requests, as core scenarios with the writes held in
// flight: requests that must keep their connection's order around a write, takes that keep
// their place, a take whose connection goes away while its removal is being written, the
// bound on held-back requests, and shutdown with requests held back.
import NotifBusCore
import NotifBusProtocol
import Testing

@Suite struct DurableWriteOrderTests {
    func holding() -> CoreHarness {
        var h = CoreHarness()
        h.holdWrites = true
        return h
    }

    /// A `handle` held behind its connection's `put`, then an `invoke` of that channel from
    /// the same connection: the invoke was sent after the handle, so it must reach it.
    @Test func invokeDoesNotOvertakeItsConnectionsHandle() {
        var h = holding()
        let c = h.connect()
        h.send(c, #"{"op":"put","id":1,"slot":"s","value":1}"#)
        h.send(c, #"{"op":"handle","id":2,"channel":"ch"}"#)
        h.send(c, #"{"op":"invoke","id":3,"channel":"ch","method":"m"}"#)
        h.finishWrite()
        let frames = h.takeAll(c)
        #expect(!frames.contains { $0["id"] == 3 && errorCode($0) == "not_implemented" })
        #expect(frames.contains { $0["op"] == "call" && $0["channel"] == "ch" })
    }

    /// A `subscribe` held behind its connection's `put`, then a `post` of that event from
    /// the same connection: the chain is taken when the event starts, after the subscribe.
    @Test func postDoesNotOvertakeItsConnectionsSubscribe() {
        var h = holding()
        let c = h.connect()
        h.send(c, #"{"op":"put","id":1,"slot":"s","value":1}"#)
        h.send(c, #"{"op":"subscribe","id":2,"events":["e"]}"#)
        h.send(c, #"{"op":"post","id":3,"name":"e"}"#)
        h.finishWrite()
        let frames = h.takeAll(c)
        #expect(frames.contains { $0["op"] == "event" && $0["name"] == "e" })
        // Decision 29: "a connection's replies come in the order of its requests".
        #expect(frames.first { $0["op"] == "reply" }?["id"] == 1)
    }

    /// A connection sets categories and, before the reply, posts a click on one of the new
    /// actions: checked against the set it sent first, the click is valid.
    @Test func didReceiveAfterItsConnectionsSetCategoriesSeesThem() {
        var h = holding()
        let c = h.connect()
        h.send(c, #"{"op":"setCategories","id":1,"categories":[{"identifier":"C","actions":[{"identifier":"A","title":"A"}]}]}"#)
        h.send(
            c,
            #"{"op":"post","id":2,"name":"didReceive","payload":{"actionIdentifier":"A","notification":{"identifier":"n","content":{"categoryIdentifier":"C"}}}}"#
        )
        h.finishWrite()
        let frames = h.takeAll(c)
        #expect(!frames.contains { errorCode($0) == "invalid_action" })
        #expect(frames.contains { $0["id"] == 1 && $0["result"]?["count"] == 1 })
    }

    /// The taker goes away while the removal of the value it took is being written: nobody
    /// received the value, and the broker knows it when the write is reported.
    @Test func takeWhoseConnectionLeftBeforeTheWriteKeepsTheValue() {
        var h = holding()
        let owner = h.connect(), taker = h.connect(), later = h.connect()
        h.send(owner, #"{"op":"put","id":1,"slot":"s","value":"v"}"#)
        h.finishWrite()
        _ = h.take(owner)
        h.send(taker, #"{"op":"take","id":2,"slot":"s"}"#)
        h.disconnect(taker)
        h.finishWrite()
        while !h.inFlight.isEmpty { h.finishWrite() }
        let peek = h.request(later, #"{"op":"peek","id":3,"slot":"s"}"#)
        #expect(peek["result"] == "v")
    }

    /// The same, with another taker waiting for the slot meanwhile: the value is written
    /// back, and then that taker takes it (its removal written in turn). Nobody else gets it,
    /// and it is handed out once.
    @Test func takeWhoseConnectionLeftGoesToTheNextTaker() {
        var h = holding()
        let owner = h.connect(), taker = h.connect(), waiter = h.connect()
        h.send(owner, #"{"op":"put","id":1,"slot":"s","value":"v"}"#)
        h.finishWrite()
        _ = h.take(owner)
        h.send(taker, #"{"op":"take","id":2,"slot":"s"}"#)
        h.send(waiter, #"{"op":"take","id":3,"slot":"s","wait":5000}"#)
        h.disconnect(taker)
        h.finishWrite()
        #expect(h.persisted.last?.record == .slot(name: "s", value: Array("\"v\"".utf8)))
        h.finishWrite()
        #expect(h.persisted.last?.record == .slot(name: "s", value: nil))
        #expect(h.nothingSent(to: waiter))
        h.finishWrite()
        #expect(h.take(waiter).frame == ["op": "reply", "id": 3, "result": "v"])
        #expect(h.inFlight.isEmpty)
        #expect(h.request(owner, #"{"op":"peek","id":4,"slot":"s"}"#)["result"] == .null)
    }

    /// A take that would wait, held behind its connection's write, keeps its place among the
    /// slot's takers: a later take from another connection is served after it.
    @Test func aHeldTakeKeepsItsPlaceAmongTheTakers() {
        var h = holding()
        let first = h.connect(), second = h.connect(), putter = h.connect()
        h.send(first, #"{"op":"put","id":1,"slot":"other","value":0}"#)
        h.send(first, #"{"op":"take","id":2,"slot":"s","wait":5000}"#)
        h.send(second, #"{"op":"take","id":3,"slot":"s","wait":5000}"#)
        // The put waits for the held take to start rather than hand its value past it.
        h.send(putter, #"{"op":"put","id":4,"slot":"s","value":"v"}"#)
        #expect(h.nothingSent(to: putter))
        h.finishWrite()
        #expect(
            h.takeAll(first) == [
                ["op": "reply", "id": 1, "result": ["replaced": false, "delivered": false]],
                ["op": "reply", "id": 2, "result": "v"],
            ])
        #expect(h.take(putter).frame == ["op": "reply", "id": 4, "result": ["replaced": false, "delivered": true]])
        #expect(h.nothingSent(to: second))
        h.send(putter, #"{"op":"put","id":5,"slot":"s","value":"w"}"#)
        #expect(h.take(second).frame == ["op": "reply", "id": 3, "result": "w"])
    }

    /// A held take's wait runs from when it starts, so it cannot answer null before the
    /// reply of the write ahead of it.
    @Test func aHeldTakeTimesOutOnlyAfterItStarts() {
        var h = holding()
        let c = h.connect()
        h.send(c, #"{"op":"put","id":1,"slot":"a","value":0}"#)
        h.send(c, #"{"op":"take","id":2,"slot":"s","wait":100}"#)
        h.advance(ms: 500)
        #expect(h.nothingSent(to: c))
        h.finishWrite()
        #expect(h.takeAll(c).map { $0["id"] } == [1])
        h.advance(ms: 100)
        #expect(h.take(c).frame == ["op": "reply", "id": 2, "result": .null])
    }

    /// Beyond `maxHeldBackPerConnection` held-back requests the transport is told to stop
    /// reading the connection, and to go on once they have drained.
    @Test func manyHeldBackRequestsStopTheConnectionsInput() {
        var h = CoreHarness { $0.maxHeldBackPerConnection = 4 }
        h.holdWrites = true
        let c = h.connect(), other = h.connect()
        for i in 1...5 { h.send(c, #"{"op":"put","id":\#(i),"slot":"s","value":\#(i)}"#) }
        let heldBack = h.broker.wantsInput(from: c), otherReads = h.broker.wantsInput(from: other)
        #expect(!heldBack)
        #expect(otherReads)
        while !h.inFlight.isEmpty { h.finishWrite() }
        let readsAgain = h.broker.wantsInput(from: c)
        #expect(readsAgain)
        #expect(h.takeAll(c).map { $0["id"] } == [1, 2, 3, 4, 5])
    }

    /// At shutdown a write in flight finishes and is answered; what waited behind it does not
    /// start (no new write) and is answered shutting_down after it, in order; a connection
    /// with nothing in flight has its held-back requests answered at once.
    @Test func shutdownStartsNothingThatWaited() {
        var h = holding()
        let c = h.connect(), other = h.connect()
        h.send(c, #"{"op":"put","id":1,"slot":"s","value":1}"#)
        h.send(c, #"{"op":"put","id":2,"slot":"s","value":2}"#)
        h.send(c, #"{"op":"ping","id":3}"#)
        h.send(other, #"{"op":"peek","id":4,"slot":"s"}"#)
        h.shutdown()
        h.collect()
        #expect(errorCode(h.take(other).frame) == "shutting_down")
        #expect(h.nothingSent(to: c))
        h.finishWrite()
        #expect(h.inFlight.isEmpty)
        let frames = h.takeAll(c)
        #expect(frames.map { $0["id"] } == [1, 2, 3])
        #expect(frames.dropFirst().map { errorCode($0) } == ["shutting_down", "shutting_down"])
        #expect(Set(h.closed) == [c, other])
    }

    /// At shutdown a connection that never greeted closes at once, though another's write
    /// is still in flight: it holds nothing, and its greeting can no longer arrive.
    @Test func shutdownClosesUngreetedAtOnce() {
        var h = holding()
        let c = h.connect(), silent = h.connect(greet: false)
        h.send(c, #"{"op":"put","id":1,"slot":"s","value":1}"#)
        h.shutdown()
        h.collect()
        #expect(h.closed == [silent])
        #expect(h.nothingSent(to: silent))
        h.advance(ms: 60_000)
        #expect(h.broker.nextDeadline == nil)
        h.finishWrite()
        #expect(h.takeAll(c).map { $0["id"] } == [1])
        #expect(h.closed == [silent, c])
    }

    /// Launch retentions that wait for a write of `launch` go on one by one, in order.
    @Test func waitingLaunchRetentionsGoOnInOrder() {
        var h = holding()
        let c = h.connect(), poster = h.connect()
        h.send(c, #"{"op":"put","id":1,"slot":"launch","value":0}"#)
        for i in 2...4 {
            h.send(poster, #"{"op":"post","id":\#(i),"name":"didReceive","payload":\#(DurableWriteTests.click)}"#)
        }
        for _ in 1...4 { h.finishWrite() }
        #expect(h.inFlight.isEmpty)
        #expect(h.takeAll(poster).map { $0["id"] } == [2, 3, 4])
    }

    /// A value waits only for held takes that arrived before it: two connections whose held
    /// puts and takes cross (each puts into the slot the other's later take waits for) both
    /// go on instead of waiting for each other forever.
    @Test func heldPutsAndTakesThatCrossDoNotWaitForEachOther() {
        var h = holding()
        let a = h.connect(), b = h.connect()
        h.send(a, #"{"op":"put","id":1,"slot":"x","value":0}"#)
        h.send(a, #"{"op":"peek","id":2,"slot":"x"}"#)
        h.send(a, #"{"op":"put","id":3,"slot":"s","value":"from a"}"#)
        h.send(a, #"{"op":"take","id":4,"slot":"u","wait":5000}"#)
        h.send(b, #"{"op":"put","id":5,"slot":"y","value":0}"#)
        h.send(b, #"{"op":"peek","id":6,"slot":"y"}"#)
        h.send(b, #"{"op":"put","id":7,"slot":"u","value":"from b"}"#)
        h.send(b, #"{"op":"take","id":8,"slot":"s","wait":5000}"#)
        var rounds = 0
        while !h.inFlight.isEmpty && rounds < 20 {
            h.finishWrite()
            rounds += 1
        }
        let fromA = h.takeAll(a), fromB = h.takeAll(b)
        #expect(fromA.map { $0["id"] } == [1, 2, 3, 4])
        #expect(fromA.last?["result"] == "from b")
        #expect(fromB.map { $0["id"] } == [5, 6, 7, 8])
        #expect(fromB.last?["result"] == "from a")
    }

    /// A held take that kept a value waiting goes away with its connection: the value goes
    /// on at once, not only when some later write is reported.
    @Test func aHeldTakeThatLeavesLetsTheValueGoOn() {
        var h = holding()
        let leaver = h.connect(), other = h.connect()
        h.send(leaver, #"{"op":"put","id":1,"slot":"x","value":0}"#)
        h.send(leaver, #"{"op":"take","id":2,"slot":"s","wait":5000}"#)
        h.send(other, #"{"op":"take","id":3,"slot":"s","wait":5000}"#)
        h.send(other, #"{"op":"put","id":4,"slot":"s","value":"v"}"#)
        #expect(h.nothingSent(to: other))
        h.disconnect(leaver)
        #expect(h.inFlight.count == 1)
        #expect(
            h.takeAll(other) == [
                ["op": "reply", "id": 3, "result": "v"],
                ["op": "reply", "id": 4, "result": ["replaced": false, "delivered": true]],
            ])
    }

    /// The same, with the leaver's observers: the requests that waited behind its take
    /// start once nothing of it is left, so a `status` no longer lists its observers and a
    /// post does not walk to them.
    @Test func whatWaitedBehindALeaversHeldTakeNoLongerSeesIt() {
        var h = holding()
        let leaver = h.connect(), other = h.connect()
        _ = h.subscribe(leaver, ["e"])
        h.send(leaver, #"{"op":"put","id":1,"slot":"x","value":0}"#)
        h.send(leaver, #"{"op":"take","id":2,"slot":"s","wait":5000}"#)
        h.send(other, #"{"op":"take","id":3,"slot":"s","wait":5000}"#)
        h.send(other, #"{"op":"status","id":4}"#)
        h.send(other, #"{"op":"post","id":5,"name":"e"}"#)
        #expect(h.nothingSent(to: other))
        h.disconnect(leaver)
        let frames = h.takeAll(other)
        let status = frames.first { $0["id"] == 4 }
        #expect(status?["result"]?["observers"] == [])
        let post = frames.first { $0["id"] == 5 }
        #expect(post?["result"]?["outcome"] == "unhandled")
        #expect(post?["result"]?["trace"] == [])
        #expect(!h.sent.contains { $0.to == leaver && $0.frame["op"] == "event" })
    }
}
