// Review findings on durable writes (issue 10), as core scenarios with the writes held in
// flight: requests that must keep their connection's order around a write, and a take whose
// connection goes away while its removal is being written. Each test states the behaviour
// the contract asks for; `withKnownIssue` marks the ones today's core does not meet yet, so
// they pass now and fail (“known issue was not recorded”) once the core is fixed, when the
// wrapper is to be removed.
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
        withKnownIssue("the invoke is started at once (neverWaits) while the handle before it waits behind the put: not_implemented") {
            #expect(!frames.contains { $0["id"] == 3 && errorCode($0) == "not_implemented" })
            #expect(frames.contains { $0["op"] == "call" && $0["channel"] == "ch" })
        }
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
        withKnownIssue("the post runs before the held subscribe: an empty chain, answered unhandled ahead of the put's reply") {
            #expect(frames.contains { $0["op"] == "event" && $0["name"] == "e" })
            // Decision 29: "a connection's replies come in the order of its requests".
            #expect(frames.first { $0["op"] == "reply" }?["id"] == 1)
        }
    }

    /// A connection sets categories and, before the reply, posts a click on one of the new
    /// actions: checked against the set it sent first, the click is valid.
    @Test func didReceiveAfterItsConnectionsSetCategoriesSeesThem() {
        var h = holding()
        let c = h.connect()
        h.send(c, #"{"op":"setCategories","id":1,"categories":[{"identifier":"C","actions":[{"identifier":"A","title":"A"}]}]}"#)
        h.send(c, #"{"op":"post","id":2,"name":"didReceive","payload":{"actionIdentifier":"A","notification":{"identifier":"n","content":{"categoryIdentifier":"C"}}}}"#)
        h.finishWrite()
        let frames = h.takeAll(c)
        withKnownIssue("posts never wait, so the click is judged by the categories before the connection's own setCategories") {
            #expect(!frames.contains { errorCode($0) == "invalid_action" })
        }
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
        withKnownIssue("complete(.take) removes the value although clients[c] is gone: an acknowledged put is lost unread") {
            #expect(peek["result"] == "v")
        }
    }
}
