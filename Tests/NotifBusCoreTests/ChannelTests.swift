// Method channels and slots without sockets: routing, replacement, results and errors
// passed unchanged, handler_gone, call timeouts, take-once and waiting takes.
import NotifBusProtocol
import Testing

@Suite struct ChannelTests {
    @Test func routingPrefersMethodThenChannel() {
        var h = CoreHarness()
        let whole = h.connect(), specific = h.connect(), caller = h.connect()
        #expect(h.request(whole, #"{"op":"handle","id":1,"channel":"ni"}"#)["result"] == ["handler": "h1", "replaced": .null])
        #expect(h.request(specific, #"{"op":"handle","id":1,"channel":"ni","method":"m1"}"#)["result"] == ["handler": "h2", "replaced": .null])
        h.send(caller, #"{"op":"invoke","id":"a","channel":"ni","method":"m1","arguments":{"x":1}}"#)
        let call = h.take(specific).frame
        #expect(
            call == [
                "op": "call", "call": 1, "handler": "h2", "channel": "ni", "method": "m1", "arguments": ["x": 1],
                "from": .string("c\(caller)"),
            ])
        h.send(caller, #"{"op":"invoke","id":"b","channel":"ni","method":"other"}"#)
        let call2 = h.take(whole).frame
        #expect(call2["handler"] == "h1" && call2["arguments"] == .null && call2["method"] == "other")
        let missing = h.request(caller, #"{"op":"invoke","id":"c","channel":"nobody","method":"m"}"#)
        #expect(missing["id"] == "c" && errorCode(missing) == "not_implemented")
        // Returns answered out of order reach their own invokers.
        h.send(whole, #"{"op":"return","call":2,"result":"second"}"#)
        h.send(specific, #"{"op":"return","call":1,"result":"first"}"#)
        #expect(h.takeAll(caller) == [["op": "reply", "id": "b", "result": "second"], ["op": "reply", "id": "a", "result": "first"]])
        #expect(h.request(caller, #"{"op":"status","id":1}"#)["result"]?["counters"]?["invokes"] == 3)
    }

    @Test func errorsPassUnchanged() {
        var h = CoreHarness()
        let handler = h.connect(), caller = h.connect()
        _ = h.request(handler, #"{"op":"handle","id":1,"channel":"ch"}"#)
        for (i, error) in [
            #"{"code":"E1","message":"m","details":null}"#, #"{"code":"E2","message":"m"}"#,
            #"{"details":{"a":[1.0]},"message":"m","code":"E3"}"#,
        ].enumerated() {
            h.send(caller, "{\"op\":\"invoke\",\"id\":\(i),\"channel\":\"ch\",\"method\":\"m\"}")
            let call = h.take(handler).frame["call"]!.intValue!
            h.send(handler, "{\"op\":\"return\",\"call\":\(call),\"error\":\(error)}")
            let reply = h.sent.first { $0.to == caller }!
            #expect(reply.raw == "{\"op\":\"reply\",\"id\":\(i),\"error\":\(error)}")
            _ = h.take(caller)
        }
    }

    @Test func malformedReturnsKeepTheCallPending() {
        var h = CoreHarness()
        let handler = h.connect(), caller = h.connect(), other = h.connect()
        _ = h.request(handler, #"{"op":"handle","id":1,"channel":"ch","method":"m"}"#)
        h.send(caller, #"{"op":"invoke","id":1,"channel":"ch","method":"m"}"#)
        _ = h.take(handler)
        for bad in [
            #"{"op":"return","call":1}"#, #"{"op":"return","call":1,"result":1,"error":{"code":"c","message":"m"}}"#,
            #"{"op":"return","call":1,"error":{"code":"c"}}"#, #"{"op":"return","call":1,"error":{"code":"c","message":"m","x":1}}"#,
            #"{"op":"return","call":"1","result":1}"#, #"{"op":"return","call":1,"error":"oops"}"#,
        ] {
            #expect(errorCode(h.request(handler, bad)) == "bad_request", "\(bad)")
        }
        h.send(other, #"{"op":"return","call":1,"result":"forged"}"#)  // not the receiving connection
        #expect(h.sent.isEmpty)
        h.send(handler, #"{"op":"return","call":1,"result":null}"#)
        #expect(h.take(caller).frame == ["op": "reply", "id": 1, "result": .null])
        h.send(handler, #"{"op":"return","call":1,"result":"again"}"#)  // late: ignored
        #expect(h.sent.isEmpty)
    }

    @Test func replacementEvictsButDeliveredCallsStayReturnable() {
        var h = CoreHarness()
        let old = h.connect(), new = h.connect(), caller = h.connect()
        _ = h.request(old, #"{"op":"handle","id":1,"channel":"ch","method":"m"}"#)
        h.send(caller, #"{"op":"invoke","id":1,"channel":"ch","method":"m"}"#)
        _ = h.take(old)
        #expect(h.request(new, #"{"op":"handle","id":2,"channel":"ch","method":"m"}"#)["result"] == ["handler": "h2", "replaced": "h1"])
        #expect(h.take(old).frame == ["op": "evicted", "handler": "h1", "by": "h2"])
        h.send(old, #"{"op":"return","call":1,"result":"still mine"}"#)
        #expect(h.take(caller).frame["result"] == "still mine")
        #expect(errorCode(h.request(caller, #"{"op":"unhandle","id":3,"handler":"h1"}"#)) == "not_found")
        #expect(h.request(caller, #"{"op":"unhandle","id":4,"handler":"h2"}"#)["result"] == ["removed": ["h2"]])
        #expect(errorCode(h.request(caller, #"{"op":"invoke","id":5,"channel":"ch","method":"m"}"#)) == "not_implemented")
    }

    @Test func handlerGoneAndTimeout() {
        var h = CoreHarness()
        let handler = h.connect(), caller = h.connect()
        _ = h.request(handler, #"{"op":"handle","id":1,"channel":"ch"}"#)
        h.send(caller, #"{"op":"invoke","id":1,"channel":"ch","method":"a"}"#)
        h.send(caller, #"{"op":"invoke","id":2,"channel":"ch","method":"b"}"#)
        #expect(h.takeAll(handler).count == 2)
        h.disconnect(handler)
        let replies = h.takeAll(caller)
        #expect(replies.map { errorCode($0) } == ["handler_gone", "handler_gone"])
        let slow = h.connect()
        _ = h.request(slow, #"{"op":"handle","id":1,"channel":"ch"}"#)
        h.send(caller, #"{"op":"invoke","id":3,"channel":"ch","method":"a"}"#)
        _ = h.take(slow)
        h.advance(ms: 1999)
        #expect(h.nothingSent(to: caller))
        h.advance(ms: 1)
        let timeout = h.take(caller).frame
        #expect(timeout["id"] == 3 && errorCode(timeout) == "timeout")
        h.send(slow, #"{"op":"return","call":3,"result":1}"#)
        #expect(h.sent.isEmpty)
        #expect(h.request(caller, #"{"op":"status","id":1}"#)["result"]?["counters"]?["callTimeouts"] == 1)
    }

    @Test func callsAreNotHeldUpByARunningEvent() {
        var h = CoreHarness()
        let observer = h.connect(), handler = h.connect(), caller = h.connect()
        _ = h.subscribe(observer, ["e"])
        _ = h.request(handler, #"{"op":"handle","id":1,"channel":"ch"}"#)
        h.send(caller, #"{"op":"post","id":1,"name":"e"}"#)
        _ = h.expectEvent(observer)
        h.send(caller, #"{"op":"invoke","id":2,"channel":"ch","method":"m"}"#)
        #expect(h.take(handler).frame["op"] == "call")
    }

    @Test func takeOncePeekAndPut() {
        var h = CoreHarness()
        let a = h.connect(), b = h.connect()
        #expect(h.request(a, #"{"op":"put","id":1,"slot":"launch","value":{"emailId":"e-1"}}"#)["result"] == ["replaced": false, "delivered": false])
        #expect(h.request(b, #"{"op":"peek","id":2,"slot":"launch"}"#)["result"] == ["emailId": "e-1"])
        #expect(h.request(a, #"{"op":"put","id":1,"slot":"launch","value":{"emailId":"e-2"}}"#)["result"] == ["replaced": true, "delivered": false])
        #expect(h.request(b, #"{"op":"take","id":3,"slot":"launch"}"#)["result"] == ["emailId": "e-2"])
        #expect(h.request(b, #"{"op":"take","id":4,"slot":"launch"}"#)["result"] == .null)
        #expect(h.request(b, #"{"op":"peek","id":5,"slot":"launch"}"#)["result"] == .null)
        _ = h.request(a, #"{"op":"put","id":1,"slot":"s","value":1}"#)
        #expect(h.request(a, #"{"op":"put","id":1,"slot":"s","value":null}"#)["result"] == ["replaced": true, "delivered": false])
        #expect(h.request(a, #"{"op":"put","id":1,"slot":"s","value":null}"#)["result"] == ["replaced": false, "delivered": false])
    }

    @Test func waitingTakesAreServedOldestFirst() {
        var h = CoreHarness()
        let t1 = h.connect(), t2 = h.connect(), putter = h.connect()
        h.send(t1, #"{"op":"take","id":1,"slot":"s","wait":5000}"#)
        h.send(t2, #"{"op":"take","id":2,"slot":"s","wait":5000}"#)
        #expect(h.sent.isEmpty)
        #expect(h.request(t1, #"{"op":"ping","id":9}"#)["result"] == [:])  // other requests still flow
        #expect(h.request(putter, #"{"op":"put","id":3,"slot":"s","value":null}"#)["result"] == ["replaced": false, "delivered": false])
        #expect(h.sent.isEmpty)  // null never wakes a taker
        #expect(h.request(putter, #"{"op":"put","id":4,"slot":"s","value":"v1"}"#)["result"] == ["replaced": false, "delivered": true])
        #expect(h.take(t1).frame == ["op": "reply", "id": 1, "result": "v1"])
        #expect(h.request(putter, #"{"op":"peek","id":5,"slot":"s"}"#)["result"] == .null)
        h.advance(ms: 4999)
        #expect(h.sent.isEmpty)  // not a moment before its wait is over
        h.advance(ms: 1)
        #expect(h.take(t2).frame == ["op": "reply", "id": 2, "result": .null])
        // A taker that disconnects stops waiting.
        h.send(t1, #"{"op":"take","id":6,"slot":"q","wait":5000}"#)
        h.disconnect(t1)
        #expect(h.request(putter, #"{"op":"put","id":7,"slot":"q","value":1}"#)["result"] == ["replaced": false, "delivered": false])
    }

    @Test func slotChangesArePersistedBeforeReplies() {
        var h = CoreHarness()
        let c = h.connect()
        _ = h.request(c, #"{"op":"put","id":1,"slot":"s","value":[1,2]}"#)
        _ = h.request(c, #"{"op":"take","id":2,"slot":"s"}"#)
        let names = h.persisted.map { item -> String in
            if case .slot(let name, let value) = item.record { return "\(name)=\(value.map { String(decoding: $0, as: UTF8.self) } ?? "nil")" }
            return "?"
        }
        #expect(names == ["s=[1,2]", "s=nil"])
    }

    @Test func slotLimits() {
        var h = CoreHarness {
            $0.maxSlots = 2; $0.maxSlotBytes = 10
        }
        let c = h.connect()
        _ = h.request(c, #"{"op":"put","id":1,"slot":"a","value":1}"#)
        _ = h.request(c, #"{"op":"put","id":1,"slot":"b","value":2}"#)
        #expect(errorCode(h.request(c, #"{"op":"put","id":1,"slot":"c","value":3}"#)) == "bad_request")
        #expect(errorCode(h.request(c, #"{"op":"put","id":1,"slot":"a","value":"0123456789"}"#)) == "bad_request")
        #expect(h.request(c, #"{"op":"put","id":1,"slot":"a","value":"01234"}"#)["result"]?["replaced"] == true)
    }
}
