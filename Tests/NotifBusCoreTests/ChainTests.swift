// The ordered chain without sockets: priority order and ties, unique keys, the FIFO queue,
// the chain taken at event start, every way a hop ends, removal before a turn, answers
// that must be ignored, and what one connection can cost the others (decisions 30, 41).
import NotifBusCore
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
        #expect(status["result"]?["queue"] == ["pending": 1, "current": 1, "maxPerClient": 1])
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
        let status = h.request(other, #"{"op":"status","id":3}"#)
        #expect(status["result"]?["counters"]?["skipped"] == 2)
        #expect(status["result"]?["counters"]?["hopTimeouts"] == 1)
        // Once it speaks again, the next event gives it its turn.
        _ = h.request(silent, #"{"op":"ping","id":4}"#)
        h.send(poster, #"{"op":"post","id":2,"name":"e"}"#)
        #expect(h.expectEvent(silent).observer == s1)
    }

    /// A connection that answers each hop just before its timeout is cut short the same way:
    /// its hops in one event take less than two hop timeouts together. The next event gives
    /// it a whole budget again.
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
        // The next event counts from zero: the connection's observers get their hops again.
        h.send(poster, #"{"op":"post","id":2,"name":"e"}"#)
        for observer in observers {
            let ev = h.expectEvent(slow)
            #expect(ev.observer == observer)
            h.advance(ms: 10)
            h.send(slow, "{\"op\":\"next\",\"event\":\(ev.event)}")
        }
        #expect(traceReplies(h.take(poster).frame) == observers.map { "\($0)=next" })
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

    // MARK: Unresponsive connections and the per-connection share of the queue

    /// The attack decision 30 closes: one client holds a silent observer of `e` and posts
    /// `e` as often as it may. Its observer times out once; every later event skips it at
    /// once, so another client's post waits one hop timeout in all, not one per event. Its
    /// own posts beyond its share of the queue get `queue_full`; another client's do not.
    @Test func aSilentObserverCostsOneHopTimeoutHoweverOftenItsEventIsPosted() {
        var h = CoreHarness { $0.hopTimeoutMs = 50 }
        let flooder = h.connect(), other = h.connect()
        let o = h.subscribe(flooder, ["e"])
        let share = h.broker.configuration.queueShare
        #expect(share == 1250)
        for i in 0..<2000 { h.send(flooder, "{\"op\":\"post\",\"id\":\(i),\"name\":\"e\"}") }
        let event = h.expectEvent(flooder)
        #expect(event.observer == o)
        let refused = h.takeAll(flooder)
        // One runs, `share` wait, and the rest are refused at once.
        #expect(refused.count == 2000 - 1 - share)
        #expect(refused.allSatisfy { errorCode($0) == "queue_full" })
        #expect(refused.first?["id"] == .integer(Int64(1 + share)))
        h.send(other, #"{"op":"post","id":"unrelated","name":"u"}"#)
        #expect(h.nothingSent(to: other), "another client's post is queued, not refused")
        let posted = h.now
        h.advance(ms: 50)
        let replies = h.takeAll(flooder)
        #expect(replies.count == 1 + share)
        #expect(traceReplies(replies[0]) == ["\(o)=timeout"])
        #expect(replies.dropFirst().allSatisfy { traceReplies($0) == ["\(o)=skipped"] })
        let unrelated = h.take(other).frame
        #expect(unrelated["result"]?["outcome"] == "unhandled")
        #expect(h.now - posted == 50_000_000, "answered after one hop timeout")
        #expect(h.nothingSent(to: flooder))
        let status = h.request(other, #"{"op":"status","id":1}"#)["result"]
        #expect(status?["counters"]?["hopTimeouts"] == 1)
        #expect(status?["counters"]?["skipped"] == .integer(Int64(share)))
        #expect(status?["clients"]?.arrayValue?.map { $0["unresponsive"] } == [true, false])
    }

    /// Unresponsive lasts until the connection sends a frame, whatever it is: a late answer
    /// (ignored as an answer), a ping, even one that is not JSON.
    @Test(arguments: [#"{"op":"next","event":1}"#, #"{"op":"ping","id":"p"}"#, "not json"])
    func anyFrameMakesAConnectionResponsiveAgain(_ frame: String) {
        var h = CoreHarness { $0.hopTimeoutMs = 50 }
        let silent = h.connect(), poster = h.connect()
        let o = h.subscribe(silent, ["e"])
        h.send(poster, #"{"op":"post","id":1,"name":"e"}"#)
        _ = h.expectEvent(silent)
        h.advance(ms: 50)
        #expect(traceReplies(h.take(poster).frame) == ["\(o)=timeout"])
        for id in 2...4 {
            h.send(poster, "{\"op\":\"post\",\"id\":\(id),\"name\":\"e\"}")
            #expect(traceReplies(h.take(poster).frame) == ["\(o)=skipped"])
        }
        #expect(h.nothingSent(to: silent))
        h.send(silent, frame)
        _ = h.takeAll(silent)  // the ping's reply or the bad_json error frame, if any
        #expect(h.request(poster, #"{"op":"status","id":5}"#)["result"]?["clients"]?.arrayValue?.first?["unresponsive"] == false)
        h.send(poster, #"{"op":"post","id":6,"name":"e"}"#)
        let ev = h.expectEvent(silent)
        h.send(silent, "{\"op\":\"next\",\"event\":\(ev.event)}")
        #expect(traceReplies(h.take(poster).frame) == ["\(o)=next"])
    }

    /// Frames sent while its hop runs do not stand for an answer: a connection that pings
    /// but lets its hop time out is unresponsive from then on, until its next frame.
    @Test func framesDuringTheHopDoNotPreventUnresponsive() {
        var h = CoreHarness { $0.hopTimeoutMs = 50 }
        let pinger = h.connect(), other = h.connect(), poster = h.connect()
        let o = h.subscribe(pinger, ["e"], priority: 1)
        let o2 = h.subscribe(other, ["e"], priority: 2)
        h.send(poster, #"{"op":"post","id":1,"name":"e"}"#)
        _ = h.expectEvent(pinger)
        h.advance(ms: 20)
        _ = h.request(pinger, #"{"op":"ping","id":1}"#)
        h.advance(ms: 30)
        var ev = h.expectEvent(other)
        h.send(other, "{\"op\":\"next\",\"event\":\(ev.event)}")
        #expect(traceReplies(h.take(poster).frame) == ["\(o)=timeout", "\(o2)=next"])
        h.send(poster, #"{"op":"post","id":2,"name":"e"}"#)
        ev = h.expectEvent(other)
        #expect(h.nothingSent(to: pinger))
        h.send(other, "{\"op\":\"next\",\"event\":\(ev.event)}")
        #expect(traceReplies(h.take(poster).frame) == ["\(o)=skipped", "\(o2)=next"])
    }

    /// What the rule cannot catch, stated in decision 30: a connection that answers each hop
    /// just before its timeout is never unresponsive, so it costs almost a hop timeout per
    /// event it is in (and less than two however many observers it holds there).
    @Test func answersJustInTimeKeepAConnectionResponsive() {
        var h = CoreHarness { $0.hopTimeoutMs = 50 }
        let slow = h.connect(), poster = h.connect()
        let o1 = h.subscribe(slow, ["e"])
        let o2 = h.subscribe(slow, ["e"])
        for id in 1...3 {
            h.send(poster, "{\"op\":\"post\",\"id\":\(id),\"name\":\"e\"}")
            let ev = h.expectEvent(slow)
            #expect(ev.observer == o1)
            h.advance(ms: 49)
            h.send(slow, "{\"op\":\"next\",\"event\":\(ev.event)}")
            let second = h.expectEvent(slow)
            h.advance(ms: 49)
            h.send(slow, "{\"op\":\"next\",\"event\":\(second.event)}")
            #expect(traceReplies(h.take(poster).frame) == ["\(o1)=next", "\(o2)=next"])
        }
        #expect(h.request(poster, #"{"op":"status","id":9}"#)["result"]?["counters"]?["skipped"] == 0)
    }

    /// A connection whose observer timed out still has its other observers skipped when it
    /// closes and a new connection subscribes: the mark belongs to the connection only.
    @Test func unresponsiveBelongsToTheConnection() {
        var h = CoreHarness { $0.hopTimeoutMs = 50 }
        let silent = h.connect(), poster = h.connect()
        _ = h.subscribe(silent, ["e"])
        h.send(poster, #"{"op":"post","id":1,"name":"e"}"#)
        _ = h.expectEvent(silent)
        h.advance(ms: 50)
        _ = h.take(poster)
        let fresh = h.connect()
        let o = h.subscribe(fresh, ["e"])
        h.disconnect(silent)
        h.send(poster, #"{"op":"post","id":2,"name":"e"}"#)
        #expect(h.expectEvent(fresh).observer == o)
    }

    /// `--max-queue-per-client`: a poster's waiting posts stop at its share (`queue_full`,
    /// naming the flag) while others still post; the share frees as its posts run, and
    /// `status` reports each client's waiting posts and the share.
    @Test func onePosterGetsQueueFullBeyondItsShare() {
        var h = CoreHarness {
            $0.maxQueue = 10; $0.maxQueuePerClient = 3
        }
        let holder = h.connect(), a = h.connect(), b = h.connect()
        _ = h.subscribe(holder, ["e"])
        for id in 1...4 { h.send(a, "{\"op\":\"post\",\"id\":\(id),\"name\":\"e\"}") }  // one runs, three wait
        #expect(h.nothingSent(to: a))
        let full = h.request(a, #"{"op":"post","id":5,"name":"x"}"#)
        #expect(errorCode(full) == "queue_full")
        #expect(full["error"]?["message"]?.stringValue?.contains("--max-queue-per-client 3") == true)
        for id in 1...3 { h.send(b, "{\"op\":\"post\",\"id\":\(id),\"name\":\"x\"}") }
        #expect(h.nothingSent(to: b), "another client's posts wait")
        var status = h.request(b, #"{"op":"status","id":9}"#)["result"]
        #expect(status?["queue"] == ["pending": 6, "current": 1, "maxPerClient": 3])
        #expect(status?["clients"]?.arrayValue?.map { $0["queued"] } == [0, 3, 3])
        // The running event ends: a's next post starts, and a has room for one more.
        let ev = h.expectEvent(holder)
        h.send(holder, "{\"op\":\"next\",\"event\":\(ev.event)}")
        #expect(h.take(a).frame["id"] == 1)
        _ = h.expectEvent(holder)
        h.send(a, #"{"op":"post","id":6,"name":"x"}"#)
        #expect(h.nothingSent(to: a))
        #expect(errorCode(h.request(a, #"{"op":"post","id":7,"name":"x"}"#)) == "queue_full")
        // A poster that leaves takes its place in the share with it; its posts still run.
        h.disconnect(a)
        status = h.request(b, #"{"op":"status","id":10}"#)["result"]
        #expect(status?["queue"]?["pending"] == 6)
    }

    /// The default share is an eighth of `--max-queue` (at least one post), and an eighth of
    /// `--max-queue-bytes` in payload bytes.
    @Test func theDefaultShareIsAnEighth() {
        var configuration = BrokerConfiguration()
        #expect(configuration.queueShare == 1250)
        #expect(configuration.queueByteShare == 8 << 20)
        configuration.maxQueue = 3
        #expect(configuration.queueShare == 1)
        var h = CoreHarness { $0.maxQueueBytes = 720 }
        let holder = h.connect(), a = h.connect(), b = h.connect()
        _ = h.subscribe(holder, ["e"])
        let payload = "\"" + String(repeating: "p", count: 48) + "\""  // 50 bytes
        h.send(a, "{\"op\":\"post\",\"id\":0,\"name\":\"e\",\"payload\":\(payload)}")
        h.send(a, "{\"op\":\"post\",\"id\":1,\"name\":\"e\",\"payload\":\(payload)}")
        #expect(h.nothingSent(to: a))
        let full = h.request(a, "{\"op\":\"post\",\"id\":2,\"name\":\"e\",\"payload\":\(payload)}")
        #expect(errorCode(full) == "queue_full")
        #expect(full["error"]?["message"]?.stringValue?.contains("90 payload bytes") == true)
        h.send(b, "{\"op\":\"post\",\"id\":1,\"name\":\"e\",\"payload\":\(payload)}")
        #expect(h.nothingSent(to: b))
    }
}
