// The `resume` flag of `subscribe` and `handle` (PROTOCOL.md §13): a registration a client
// makes again after reconnecting yields to a live holder instead of evicting it.
// Fake clock, frames in, exact frames out; no sockets.
import NotifBusCore
import NotifBusProtocol
import Testing

@Suite struct ResumeTests {
    @Test func resumedSubscribeYieldsToANewerKeyHolder() {
        var h = CoreHarness()
        let newer = h.connect(), resumed = h.connect()
        let holder = h.subscribe(newer, ["e"], key: "chat")
        let reply = h.request(resumed, #"{"op":"subscribe","id":7,"events":["e"],"key":"chat","resume":true}"#)
        #expect(
            reply == [
                "op": "reply", "id": 7,
                "error": [
                    "code": "superseded",
                    "message": .string("key 'chat' is held by \(holder), registered since; the resumed registration yields"),
                    "details": ["by": .string(holder)],
                ],
            ])
        // The holder keeps its key and hears nothing; nothing was added to the chain.
        #expect(h.nothingSent(to: newer))
        let status = h.request(resumed, #"{"op":"status","id":8}"#)
        let observers = status["result"]?["observers"]?.arrayValue ?? []
        #expect(observers.count == 1 && observers.first?["observer"] == .string(holder))
    }

    @Test func resumedSubscribeTakesAFreeKeyAndIsEvictedByALaterOne() {
        var h = CoreHarness()
        let resumed = h.connect(), later = h.connect()
        let reply = h.request(resumed, #"{"op":"subscribe","id":1,"events":["e"],"key":"chat","resume":true}"#)
        let o = reply["result"]?["observer"]?.stringValue ?? ""
        #expect(reply["result"]?["replaced"] == .array([]))
        // A fresh subscription is newer than any resumed one: it evicts as usual.
        let o2 = h.subscribe(later, ["e"], key: "chat")
        #expect(h.take(resumed).frame == ["op": "evicted", "observer": .string(o), "by": .string(o2)])
    }

    @Test func resumeWithoutKeyOrFalseChangesNothing() {
        var h = CoreHarness()
        let a = h.connect(), b = h.connect()
        let first = h.request(a, #"{"op":"subscribe","id":1,"events":["e"],"resume":true}"#)
        let second = h.request(b, #"{"op":"subscribe","id":2,"events":["e"],"resume":true}"#)
        #expect(first["result"]?["observer"] != nil && second["result"]?["observer"] != nil)
        let o1 = h.subscribe(a, ["e"], key: "k")
        let replacing = h.request(b, #"{"op":"subscribe","id":3,"events":["e"],"key":"k","resume":false}"#)
        #expect(replacing["result"]?["replaced"] == .array([.string(o1)]))
        #expect(h.take(a).frame["op"] == "evicted")
        let nulled = h.request(a, #"{"op":"subscribe","id":4,"events":["e"],"key":"k","resume":null}"#)
        #expect(nulled["result"]?["replaced"]?.arrayValue?.count == 1)
    }

    @Test func resumeMustBeABoolean() {
        var h = CoreHarness()
        let c = h.connect()
        let reply = h.request(c, #"{"op":"subscribe","id":1,"events":["e"],"resume":1}"#)
        #expect(reply == ["op": "reply", "id": 1, "error": ["code": "bad_request", "message": "'resume' must be a boolean"]])
        let handle = h.request(c, #"{"op":"handle","id":2,"channel":"ch","resume":"yes"}"#)
        #expect(errorCode(handle) == "bad_request")
    }

    @Test func resumedHandleYieldsToANewerRouteHolder() {
        var h = CoreHarness()
        let newer = h.connect(), resumed = h.connect(), caller = h.connect()
        #expect(h.request(newer, #"{"op":"handle","id":1,"channel":"ch","method":"m"}"#)["result"] == ["handler": "h1", "replaced": .null])
        let reply = h.request(resumed, #"{"op":"handle","id":2,"channel":"ch","method":"m","resume":true}"#)
        #expect(
            reply == [
                "op": "reply", "id": 2,
                "error": [
                    "code": "superseded",
                    "message": "route 'ch' method 'm' is held by h1, registered since; the resumed registration yields",
                    "details": ["by": "h1"],
                ],
            ])
        #expect(h.nothingSent(to: newer))
        // A free route is taken, whole channel included; calls reach the holder.
        let whole = h.request(resumed, #"{"op":"handle","id":3,"channel":"ch","resume":true}"#)
        #expect(whole["result"] == ["handler": "h2", "replaced": .null])
        h.send(caller, #"{"op":"invoke","id":4,"channel":"ch","method":"m"}"#)
        #expect(h.take(newer).frame["handler"] == "h1")
        let wholeAgain = h.request(caller, #"{"op":"handle","id":5,"channel":"ch","resume":true}"#)
        #expect(errorCode(wholeAgain) == "superseded" && wholeAgain["error"]?["details"] == ["by": "h2"])
    }
}
