// The ordered chain without sockets: priority order and ties, unique keys, the FIFO queue,
// the chain taken at event start, every way a hop ends, removal before a turn, and answers
// that must be ignored.
import NotifBusProtocol
import Testing

@Suite struct ChainTests {
    @Test func priorityOrderWithTiesAndNegatives() {
        var h = CoreHarness()
        let a = h.connect(), b = h.connect(), c = h.connect(), poster = h.connect()
        let oa = h.subscribe(a, ["e"], priority: 10)
        let ob = h.subscribe(b, ["e"], priority: -5)
        let oc = h.subscribe(c, ["e"], priority: 10)
        h.send(poster, #"{"op":"post","id":9,"name":"e","payload":{"n":1}}"#)
        var ev = h.expectEvent(b)
        #expect(ev.observer == ob)
        h.send(b, "{\"op\":\"next\",\"event\":\(ev.event)}")
        ev = h.expectEvent(a)
        #expect(ev.observer == oa)
        h.send(a, "{\"op\":\"next\",\"event\":\(ev.event)}")
        ev = h.expectEvent(c)
        #expect(ev.observer == oc)
        h.send(c, "{\"op\":\"complete\",\"event\":\(ev.event),\"value\":{\"ok\":true}}")
        let reply = h.take(poster).frame
        #expect(reply["id"] == 9)
        #expect(reply["result"]?["outcome"] == "completed")
        #expect(reply["result"]?["by"] == .string(oc))
        #expect(reply["result"]?["value"] == ["ok": true])
        #expect(reply["result"]?["retained"] == .null)
        #expect(traceReplies(reply) == ["\(ob)=next", "\(oa)=next", "\(oc)=complete"])
    }

    @Test func eventFrameCarriesPayloadUnchanged() {
        var h = CoreHarness()
        let o = h.connect(), poster = h.connect()
        _ = h.subscribe(o, ["e"])
        h.send(poster, #"{"op":"post","id":1,"name":"e","payload":{"z":1.50,"a":[1e3,"\u00e9"]}}"#)
        let sent = h.sent.first { $0.to == o }!
        // The payload is forwarded byte for byte: key order, 1.50, 1e3 and the escape survive.
        #expect(sent.raw.hasSuffix(#""name":"e","payload":{"z":1.50,"a":[1e3,"\u00e9"]}}"#))
    }

    @Test func keyReplacementAcrossConnectionsEvicts() {
        var h = CoreHarness()
        let c1 = h.connect(), c2 = h.connect()
        let o1 = h.subscribe(c1, ["e"], key: "mail")
        let reply = h.request(c2, #"{"op":"subscribe","id":2,"events":["e"],"key":"mail"}"#)
        let o2 = reply["result"]?["observer"]?.stringValue ?? ""
        #expect(reply["result"]?["replaced"] == .array([.string(o1)]))
        let evicted = h.take(c1).frame
        #expect(evicted == ["op": "evicted", "observer": .string(o1), "by": .string(o2)])
        let status = h.request(c2, #"{"op":"status","id":3}"#)
        #expect(status["result"]?["observers"]?.arrayValue?.count == 1)
        // Without a key, alike observers coexist.
        let o3 = h.subscribe(c1, ["e"])
        let o4 = h.subscribe(c1, ["e"])
        #expect(o3 != o4)
    }

    @Test func fifoAcrossPostersAndChainTakenAtStart() {
        var h = CoreHarness()
        let o1c = h.connect(), p1 = h.connect(), p2 = h.connect(), late = h.connect()
        let o1 = h.subscribe(o1c, ["e"], priority: 1)
        h.send(p1, #"{"op":"post","id":"first","name":"e"}"#)
        h.send(p2, #"{"op":"post","id":"second","name":"e"}"#)
        let ev1 = h.expectEvent(o1c)
        #expect(h.nothingSent(to: o1c))  // one event at a time
        let oLate = h.subscribe(late, ["e"], priority: 2)  // joins after the first event started
        h.send(o1c, "{\"op\":\"next\",\"event\":\(ev1.event)}")
        let r1 = h.take(p1).frame
        #expect(r1["id"] == "first")
        #expect(r1["result"]?["outcome"] == "unhandled")
        #expect(traceReplies(r1) == ["\(o1)=next"])
        let ev2 = h.expectEvent(o1c)
        #expect(ev2.event == ev1.event + 1)
        h.send(o1c, "{\"op\":\"next\",\"event\":\(ev2.event)}")
        let evLate = h.expectEvent(late)
        #expect(evLate.observer == oLate)
        h.send(late, "{\"op\":\"stop\",\"event\":\(evLate.event)}")
        let r2 = h.take(p2).frame
        #expect(r2["result"]?["outcome"] == "stopped")
        #expect(r2["result"]?["by"] == .string(oLate))
        #expect(traceReplies(r2) == ["\(o1)=next", "\(oLate)=stop"])
    }

    @Test func noObserverMeansUnhandledAtOnce() {
        var h = CoreHarness()
        let p = h.connect()
        let reply = h.request(p, #"{"op":"post","id":1,"name":"nobody"}"#)
        #expect(reply["result"]?["outcome"] == "unhandled")
        #expect(reply["result"]?["trace"] == .array([]))
        #expect(reply["result"]?["by"] == .null)
    }

    @Test func hopTimeoutMovesOn() {
        var h = CoreHarness()
        let slow = h.connect(), fast = h.connect(), p = h.connect()
        let oSlow = h.subscribe(slow, ["e"], priority: 1)
        let oFast = h.subscribe(fast, ["e"], priority: 2)
        h.send(p, #"{"op":"post","id":1,"name":"e"}"#)
        let ev = h.expectEvent(slow)
        #expect(h.broker.nextDeadline == h.now + 1_000_000_000)
        h.advance(ms: 999)
        #expect(h.nothingSent(to: fast))
        h.advance(ms: 1)
        _ = h.expectEvent(fast)
        // The late answer of the timed-out hop is ignored.
        h.send(slow, "{\"op\":\"complete\",\"event\":\(ev.event)}")
        #expect(h.nothingSent(to: p))
        #expect(h.nothingSent(to: slow))
        h.send(fast, "{\"op\":\"next\",\"event\":\(ev.event)}")
        let reply = h.take(p).frame
        #expect(traceReplies(reply) == ["\(oSlow)=timeout", "\(oFast)=next"])
        let status = h.request(p, #"{"op":"status","id":2}"#)
        #expect(status["result"]?["counters"]?["hopTimeouts"] == 1)
        #expect(status["result"]?["counters"]?["unhandled"] == 1)
    }

    @Test func disconnectMidHopIsGone() {
        var h = CoreHarness()
        let dying = h.connect(), next = h.connect(), p = h.connect()
        let oDying = h.subscribe(dying, ["e"], priority: 1)
        let oNext = h.subscribe(next, ["e"], priority: 2)
        h.send(p, #"{"op":"post","id":1,"name":"e"}"#)
        _ = h.expectEvent(dying)
        h.disconnect(dying)
        let ev = h.expectEvent(next)
        h.send(next, "{\"op\":\"complete\",\"event\":\(ev.event),\"value\":7}")
        let reply = h.take(p).frame
        #expect(traceReplies(reply) == ["\(oDying)=gone", "\(oNext)=complete"])
        #expect(reply["result"]?["value"] == 7)
    }

    @Test func unsubscribeAndEvictionMidHopAreGone() {
        var h = CoreHarness()
        let a = h.connect(), b = h.connect(), p = h.connect(), admin = h.connect()
        let oa = h.subscribe(a, ["e"], priority: 1, key: "k")
        let ob = h.subscribe(b, ["e"], priority: 2)
        h.send(p, #"{"op":"post","id":1,"name":"e"}"#)
        _ = h.expectEvent(a)
        // Another connection takes the key: the running hop ends as gone.
        let replacement = h.subscribe(admin, ["other"], key: "k")
        #expect(h.take(a).frame["op"] == "evicted")
        let ev = h.expectEvent(b)
        h.send(p, #"{"op":"unsubscribe","id":2,"observer":"\#(ob)"}"#)
        #expect(h.take(p).frame["result"] == ["removed": .array([.string(ob)])])
        let reply = h.take(p).frame
        #expect(traceReplies(reply) == ["\(oa)=gone", "\(ob)=gone"])
        #expect(reply["result"]?["outcome"] == "unhandled")
        _ = ev
        _ = replacement
    }

    @Test func removedBeforeItsTurnIsSkipped() {
        var h = CoreHarness()
        let a = h.connect(), b = h.connect(), c = h.connect(), p = h.connect()
        let oa = h.subscribe(a, ["e"], priority: 1)
        let ob = h.subscribe(b, ["e"], priority: 2, key: "bee")
        let oc = h.subscribe(c, ["e"], priority: 3)
        h.send(p, #"{"op":"post","id":1,"name":"e"}"#)
        let ev = h.expectEvent(a)
        #expect(h.request(p, #"{"op":"unsubscribe","id":2,"key":"bee"}"#)["result"] == ["removed": .array([.string(ob)])])
        h.send(a, "{\"op\":\"next\",\"event\":\(ev.event)}")
        #expect(h.nothingSent(to: b))
        _ = h.expectEvent(c)
        h.send(c, "{\"op\":\"next\",\"event\":\(ev.event)}")
        #expect(traceReplies(h.take(p).frame) == ["\(oa)=next", "\(oc)=next"])
    }

    @Test func lateSecondAndForeignAnswersAreIgnored() {
        var h = CoreHarness()
        let a = h.connect(), b = h.connect(), intruder = h.connect(), p = h.connect()
        _ = h.subscribe(a, ["e"], priority: 1)
        _ = h.subscribe(b, ["e"], priority: 2)
        h.send(p, #"{"op":"post","id":1,"name":"e"}"#)
        let ev = h.expectEvent(a)
        h.send(intruder, "{\"op\":\"complete\",\"event\":\(ev.event)}")  // another connection
        h.send(a, "{\"op\":\"complete\",\"event\":\(ev.event + 5)}")  // another event
        #expect(h.sent.isEmpty)
        h.send(a, "{\"op\":\"next\",\"event\":\(ev.event)}")
        _ = h.expectEvent(b)
        h.send(a, "{\"op\":\"stop\",\"event\":\(ev.event)}")  // second answer, hop already ended
        #expect(h.sent.isEmpty)
        h.send(b, "{\"op\":\"next\",\"event\":\(ev.event)}")
        #expect(h.take(p).frame["result"]?["outcome"] == "unhandled")
    }

    @Test func malformedAnswerIsNotAnAnswer() {
        var h = CoreHarness()
        let a = h.connect(), p = h.connect()
        _ = h.subscribe(a, ["e"])
        h.send(p, #"{"op":"post","id":1,"name":"e"}"#)
        let ev = h.expectEvent(a)
        h.send(a, "{\"op\":\"next\",\"event\":\(ev.event).0}")
        #expect(errorCode(h.take(a).frame) == "bad_request")
        h.send(a, "{\"op\":\"next\",\"event\":\(ev.event),\"extra\":1}")
        let error = h.take(a).frame
        #expect(errorCode(error) == "bad_request")
        #expect(error["id"] == .null)
        #expect(h.nothingSent(to: p))
        h.send(a, "{\"op\":\"next\",\"event\":\(ev.event)}")
        #expect(h.take(p).frame["result"]?["outcome"] == "unhandled")
    }

    @Test func invalidWillPresentCompletionMovesOn() {
        var h = CoreHarness()
        let a = h.connect(), b = h.connect(), p = h.connect()
        let oa = h.subscribe(a, ["willPresent"], priority: 1)
        let ob = h.subscribe(b, ["willPresent"], priority: 2)
        h.send(p, #"{"op":"post","id":1,"name":"willPresent","payload":{"notification":{"identifier":"n","content":{}}}}"#)
        let ev = h.expectEvent(a)
        h.send(a, "{\"op\":\"complete\",\"event\":\(ev.event),\"value\":[\"banner\",\"banner\"]}")
        #expect(errorCode(h.take(a).frame) == "bad_request")
        _ = h.expectEvent(b)
        h.send(b, "{\"op\":\"complete\",\"event\":\(ev.event),\"value\":[\"banner\",\"sound\"]}")
        let reply = h.take(p).frame
        #expect(traceReplies(reply) == ["\(oa)=invalid", "\(ob)=complete"])
        #expect(reply["result"]?["value"] == ["banner", "sound"])
        #expect(h.request(p, #"{"op":"status","id":2}"#)["result"]?["counters"]?["invalid"] == 1)
    }

    @Test func queueFullAnswersAtOnce() {
        var h = CoreHarness { $0.maxQueue = 1 }
        let a = h.connect(), p = h.connect()
        _ = h.subscribe(a, ["e"])
        h.send(p, #"{"op":"post","id":1,"name":"e"}"#)  // running
        h.send(p, #"{"op":"post","id":2,"name":"e"}"#)  // waiting
        let full = h.request(p, #"{"op":"post","id":3,"name":"e"}"#)
        #expect(full["id"] == 3)
        #expect(errorCode(full) == "queue_full")
        let status = h.request(p, #"{"op":"status","id":4}"#)
        #expect(status["result"]?["queue"] == ["pending": 1, "current": 1])
        #expect(status["result"]?["counters"]?["posted"] == 2)
    }

    @Test func posterGoneStillRunsTheEvent() {
        var h = CoreHarness()
        let a = h.connect(), p = h.connect()
        _ = h.subscribe(a, ["e"])
        h.send(p, #"{"op":"post","id":1,"name":"e"}"#)
        let ev = h.expectEvent(a)
        h.disconnect(p)
        h.send(a, "{\"op\":\"complete\",\"event\":\(ev.event)}")
        #expect(h.sent.isEmpty)
        #expect(h.request(a, #"{"op":"status","id":2}"#)["result"]?["counters"]?["completed"] == 1)
    }

    @Test func observerLimitPerConnection() {
        var h = CoreHarness()
        let c = h.connect()
        for _ in 0..<Limits.maxObserversPerConnection { _ = h.subscribe(c, ["e"]) }
        let reply = h.request(c, #"{"op":"subscribe","id":1,"events":["e"]}"#)
        #expect(errorCode(reply) == "bad_request")
    }

    /// Once a connection's hops in an event took a hop timeout in all, its further observers
    /// in that event are skipped (traced `skipped`), so one silent connection holds an event
    /// up for one hop timeout, not one per observer; other connections still get their turn.
    @Test func aConnectionThatTimedOutIsSkippedForTheRestOfTheEvent() {
        var h = CoreHarness { $0.hopTimeoutMs = 50 }
        let silent = h.connect(), other = h.connect(), poster = h.connect()
        let s1 = h.subscribe(silent, ["e"], priority: 1)
        let s2 = h.subscribe(silent, ["e"], priority: 2)
        let o = h.subscribe(other, ["e"], priority: 3)
        let s3 = h.subscribe(silent, ["e"], priority: 4)
        h.send(poster, #"{"op":"post","id":1,"name":"e"}"#)
        _ = h.expectEvent(silent)
        h.advance(ms: 50)
        let ev = h.expectEvent(other)
        #expect(ev.observer == o)
        #expect(h.nothingSent(to: silent))
        h.send(other, "{\"op\":\"next\",\"event\":\(ev.event)}")
        let reply = h.take(poster).frame
        #expect(reply["result"]?["outcome"] == "unhandled")
        #expect(traceReplies(reply) == ["\(s1)=timeout", "\(s2)=skipped", "\(o)=next", "\(s3)=skipped"])
        #expect(h.nothingSent(to: silent))
        // The next event starts afresh: the silent connection gets its turn again.
        h.send(poster, #"{"op":"post","id":2,"name":"e"}"#)
        #expect(h.expectEvent(silent).observer == s1)
        let status = h.request(other, #"{"op":"status","id":3}"#)
        #expect(status["result"]?["counters"]?["skipped"] == 2)
        #expect(status["result"]?["counters"]?["hopTimeouts"] == 1)
    }

    /// A connection that answers each hop just before its timeout is cut short the same way:
    /// its hops in one event take less than two hop timeouts together.
    @Test func slowAnswersUseUpTheSameBudget() {
        var h = CoreHarness { $0.hopTimeoutMs = 100 }
        let slow = h.connect(), poster = h.connect()
        let observers = (0..<5).map { _ in h.subscribe(slow, ["e"]) }
        h.send(poster, #"{"op":"post","id":1,"name":"e"}"#)
        for _ in 0..<2 {
            let ev = h.expectEvent(slow)
            h.advance(ms: 99)
            h.send(slow, "{\"op\":\"next\",\"event\":\(ev.event)}")
        }
        let reply = h.take(poster).frame
        #expect(traceReplies(reply) == ["\(observers[0])=next", "\(observers[1])=next"] + observers[2...].map { "\($0)=skipped" })
        #expect(h.nothingSent(to: slow))
    }

    /// Quick answers use up nothing that matters: every observer of a prompt connection runs.
    @Test func promptConnectionsAreNeverSkipped() {
        var h = CoreHarness { $0.hopTimeoutMs = 100 }
        let c = h.connect(), poster = h.connect()
        let observers = (0..<20).map { _ in h.subscribe(c, ["e"]) }
        h.send(poster, #"{"op":"post","id":1,"name":"e"}"#)
        for _ in 0..<20 {
            let ev = h.expectEvent(c)
            h.advance(ms: 4)
            h.send(c, "{\"op\":\"next\",\"event\":\(ev.event)}")
        }
        #expect(traceReplies(h.take(poster).frame) == observers.map { "\($0)=next" })
    }
}
