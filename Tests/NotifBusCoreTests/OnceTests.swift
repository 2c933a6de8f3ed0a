// Idempotency keys (`once`, protocol-v1.md §3.8, PROTOCOL.md decision 43) in the core: a
// repeat gets the first outcome byte for byte with `"repeat":true` and is never applied
// again, another use of a key is refused `once_conflict`, refusals record nothing, posts hold
// their keys from queued to ended, the window forgets the oldest, and with the state kept on
// disk each key is written in the record of its change.
import NotifBusCore
import NotifBusProtocol
import Testing

/// The bytes of a reply's `result` or `error`, as its body carries them, without `repeat`.
func outcomeText(_ sent: Sent) -> String {
    var raw = sent.raw
    if raw.hasSuffix(",\"repeat\":true}") { raw = String(raw.dropLast(",\"repeat\":true}".count)) + "}" }
    for member in [",\"result\":", ",\"error\":"] {
        if let range = raw.range(of: member) { return String(raw[range.upperBound...].dropLast()) }
    }
    return raw
}

func isRepeat(_ sent: Sent) -> Bool { sent.frame["repeat"] == true }

@Suite struct OnceTests {
    static let click =
        #"{"actionIdentifier":"com.apple.UNNotificationDefaultActionIdentifier","notification":{"identifier":"n1","content":{}}}"#

    // MARK: put, take, setCategories

    @Test func aRepeatedPutIsAnsweredWithItsFirstOutcomeAndNotAppliedAgain() {
        var h = CoreHarness()
        let a = h.connect(), b = h.connect()
        h.send(a, #"{"op":"put","id":1,"slot":"s","value":"v1","once":"k1"}"#)
        let first = h.take(a)
        #expect(first.raw == #"{"op":"reply","id":1,"result":{"replaced":false,"delivered":false}}"#)
        #expect(h.request(b, #"{"op":"put","id":2,"slot":"s","value":"v2"}"#)["result"]?["replaced"] == true)
        // The same request again, on another connection, with another id.
        h.send(b, #"{"op":"put","id":"again","slot":"s","value":"v1","once":"k1"}"#)
        let repeated = h.take(b)
        #expect(repeated.raw == #"{"op":"reply","id":"again","result":{"replaced":false,"delivered":false},"repeat":true}"#)
        #expect(outcomeText(repeated) == outcomeText(first))
        #expect(h.request(a, #"{"op":"peek","id":3,"slot":"s"}"#)["result"] == "v2", "the repeat changed nothing")
        #expect(h.persisted.count == 2, "the repeat wrote nothing")
    }

    @Test func theSameKeyWithAnotherBodyTargetOrOpIsAConflict() {
        var h = CoreHarness()
        let c = h.connect()
        _ = h.request(c, #"{"op":"put","id":1,"slot":"s","value":1,"once":"k"}"#)
        for (text, firstOp) in [
            (#"{"op":"put","id":2,"slot":"s","value":2,"once":"k"}"#, "put"),
            (#"{"op":"put","id":2,"slot":"t","value":1,"once":"k"}"#, "put"),
            // The body's bytes as sent: the same number written otherwise is another body.
            (#"{"op":"put","id":2,"slot":"s","value":1.0,"once":"k"}"#, "put"),
            (#"{"op":"take","id":2,"slot":"s","once":"k"}"#, "put"),
            (#"{"op":"post","id":2,"name":"s","payload":1,"once":"k"}"#, "put"),
            (#"{"op":"setCategories","id":2,"categories":[],"once":"k"}"#, "put"),
        ] {
            let reply = h.request(c, text)
            #expect(errorCode(reply) == "once_conflict", "\(text)")
            #expect(reply["error"]?["details"] == ["op": .string(firstOp)], "\(text)")
        }
        #expect(h.request(c, #"{"op":"peek","id":3,"slot":"s"}"#)["result"] == 1)
        #expect(h.request(c, #"{"op":"peek","id":4,"slot":"t"}"#)["result"] == .null)
        #expect(h.persisted.count == 1, "no conflict wrote anything")
    }

    @Test func aRepeatedTakeReturnsTheSameValueAndTakesNothingMore() {
        var h = CoreHarness()
        let c = h.connect()
        _ = h.request(c, #"{"op":"put","id":1,"slot":"s","value":{"n":1}}"#)
        let first = h.request(c, #"{"op":"take","id":2,"slot":"s","once":"t1"}"#)
        #expect(first["result"] == ["n": 1] && first["repeat"] == nil)
        _ = h.request(c, #"{"op":"put","id":3,"slot":"s","value":{"n":2}}"#)
        let again = h.request(c, #"{"op":"take","id":4,"slot":"s","wait":100,"once":"t1"}"#)
        #expect(again["result"] == ["n": 1] && again["repeat"] == true, "wait is not part of the fingerprint")
        #expect(h.request(c, #"{"op":"peek","id":5,"slot":"s"}"#)["result"] == ["n": 2])
    }

    @Test func aTakeThatFindsNothingRecordsNothing() {
        var h = CoreHarness()
        let c = h.connect()
        #expect(h.request(c, #"{"op":"take","id":1,"slot":"s","once":"t"}"#)["result"] == .null)
        _ = h.request(c, #"{"op":"put","id":2,"slot":"s","value":7}"#)
        let reply = h.request(c, #"{"op":"take","id":3,"slot":"s","once":"t"}"#)
        #expect(reply["result"] == 7 && reply["repeat"] == nil, "sent again, it is a fresh try")
    }

    @Test func aKeyedTakeThatWaitsIsRecordedWhenAValueIsHandedToIt() {
        var h = CoreHarness()
        let first = h.connect(), retry = h.connect(), putter = h.connect()
        h.send(first, #"{"op":"take","id":1,"slot":"s","wait":5000,"once":"w"}"#)
        // The same take sent again (its first connection looks lost) waits beside it.
        h.send(retry, #"{"op":"take","id":1,"slot":"s","wait":5000,"once":"w"}"#)
        #expect(h.sent.isEmpty)
        #expect(h.request(putter, #"{"op":"put","id":2,"slot":"s","value":"x"}"#)["result"]?["delivered"] == true)
        #expect(h.take(first).frame == ["op": "reply", "id": 1, "result": "x"])
        #expect(h.take(retry).frame == ["op": "reply", "id": 1, "result": "x", "repeat": true])
        // A later put is not taken by the key again.
        _ = h.request(putter, #"{"op":"put","id":3,"slot":"s","value":"y"}"#)
        #expect(h.request(retry, #"{"op":"take","id":4,"slot":"s","once":"w"}"#)["result"] == "x")
        #expect(h.request(retry, #"{"op":"peek","id":5,"slot":"s"}"#)["result"] == "y")
    }

    @Test func aKeyedPutHandedToAWaitingTakeWritesBothKeysFirst() {
        var h = CoreHarness()
        h.holdWrites = true
        let taker = h.connect(), putter = h.connect()
        h.send(taker, #"{"op":"take","id":1,"slot":"s","wait":5000,"once":"tk"}"#)
        h.send(putter, #"{"op":"put","id":2,"slot":"s","value":"x","once":"pk"}"#)
        #expect(h.sent.isEmpty, "both wait for the record of their keys")
        #expect(h.persisted.last?.record == .slot(name: "s", value: nil), "the slot stays empty")
        #expect(h.persisted.last?.once.map(\.key) == ["tk", "pk"])
        h.finishWrite()
        #expect(h.take(taker).frame == ["op": "reply", "id": 1, "result": "x"])
        #expect(h.take(putter).frame["result"] == ["replaced": false, "delivered": true])
        h.holdWrites = false
        #expect(h.request(putter, #"{"op":"put","id":3,"slot":"s","value":"x","once":"pk"}"#)["repeat"] == true)
        #expect(h.request(putter, #"{"op":"peek","id":4,"slot":"s"}"#)["result"] == .null)
    }

    @Test func aFailedHandOverRefusesBothAndRecordsNothing() {
        var h = CoreHarness()
        h.holdWrites = true
        let taker = h.connect(), putter = h.connect()
        h.send(taker, #"{"op":"take","id":1,"slot":"s","wait":5000,"once":"tk"}"#)
        h.send(putter, #"{"op":"put","id":2,"slot":"s","value":"x"}"#)
        h.finishWrite(written: false)
        #expect(errorCode(h.take(taker).frame) == "storage_failed")
        #expect(errorCode(h.take(putter).frame) == "storage_failed")
        h.holdWrites = false
        _ = h.request(putter, #"{"op":"put","id":3,"slot":"s","value":"z"}"#)
        #expect(h.request(taker, #"{"op":"take","id":4,"slot":"s","once":"tk"}"#) == ["op": "reply", "id": 4, "result": "z"])
    }

    @Test func refusalsRecordNothing() {
        var h = CoreHarness { $0.maxSlots = 1 }
        let c = h.connect()
        _ = h.request(c, #"{"op":"put","id":1,"slot":"a","value":1}"#)
        #expect(errorCode(h.request(c, #"{"op":"put","id":2,"slot":"b","value":2,"once":"k"}"#)) == "bad_request")
        _ = h.request(c, #"{"op":"take","id":3,"slot":"a"}"#)
        let retried = h.request(c, #"{"op":"put","id":4,"slot":"b","value":2,"once":"k"}"#)
        #expect(retried["result"]?["replaced"] == false && retried["repeat"] == nil)
        // A write that fails records nothing either.
        h.holdWrites = true
        h.send(c, #"{"op":"setCategories","id":5,"categories":[],"once":"cats"}"#)
        h.finishWrite(written: false)
        #expect(errorCode(h.take(c).frame) == "storage_failed")
        h.send(c, #"{"op":"setCategories","id":6,"categories":[],"once":"cats"}"#)
        h.finishWrite()
        #expect(h.take(c).frame == ["op": "reply", "id": 6, "result": ["count": 0]])
    }

    @Test func keysGoInTheRecordOfTheirChange() {
        var h = CoreHarness()
        let c = h.connect()
        _ = h.request(c, #"{"op":"put","id":1,"slot":"s","value":[1],"once":"p"}"#)
        _ = h.request(c, #"{"op":"take","id":2,"slot":"s","once":"t"}"#)
        _ = h.request(c, #"{"op":"setCategories","id":3,"categories":[],"once":"c"}"#)
        _ = h.request(c, #"{"op":"put","id":4,"slot":"empty","value":null,"once":"n"}"#)
        #expect(
            h.persisted.map(\.record) == [
                .slot(name: "s", value: [0x5B, 0x31, 0x5D]), .slot(name: "s", value: nil), .categories([0x5B, 0x5D]),
                .slot(name: "empty", value: nil),
            ])
        #expect(h.persisted.map { $0.once.map(\.key) } == [["p"], ["t"], ["c"], ["n"]])
        #expect(h.persisted.map { $0.once.first?.op } == [.put, .take, .setCategories, .put])
        #expect(h.persisted[1].once.first?.outcome == .result([0x5B, 0x31, 0x5D]))
        // Unkeyed writes carry no key.
        _ = h.request(c, #"{"op":"put","id":5,"slot":"s","value":2}"#)
        #expect(h.persisted.last?.once.isEmpty == true)
    }

    @Test func aRepeatWaitsBehindItsConnectionsWriteInFlight() {
        var h = CoreHarness()
        let c = h.connect()
        _ = h.request(c, #"{"op":"put","id":1,"slot":"a","value":1,"once":"k"}"#)
        h.holdWrites = true
        h.send(c, #"{"op":"put","id":2,"slot":"b","value":2}"#)
        h.send(c, #"{"op":"put","id":3,"slot":"a","value":1,"once":"k"}"#)
        #expect(h.sent.isEmpty, "the repeat is not answered ahead of the write before it")
        h.finishWrite()
        #expect(h.takeAll(c).map { $0["id"] } == [2, 3])
    }

    // MARK: Posts

    @Test func aRepeatOfARunningPostIsAnsweredWhenItEnds() {
        var h = CoreHarness()
        let observer = h.connect(), poster = h.connect(), other = h.connect()
        let o = h.subscribe(observer, ["e"])
        h.send(poster, #"{"op":"post","id":1,"name":"e","payload":{"a":1},"once":"p1"}"#)
        let event = h.expectEvent(observer)
        h.send(other, #"{"op":"post","id":9,"name":"e","payload":{"a":1},"once":"p1"}"#)
        h.send(poster, #"{"op":"post","id":2,"name":"e","payload":{"a":1},"once":"p1"}"#)
        #expect(h.nothingSent(to: other) && h.nothingSent(to: poster))
        h.send(observer, #"{"op":"complete","event":\#(event.event),"value":"done"}"#)
        let first = h.take(poster), repeated = h.take(other), again = h.take(poster)
        #expect(first.frame["id"] == 1 && !isRepeat(first))
        #expect(first.frame["result"]?["by"] == .string(o) && first.frame["result"]?["value"] == "done")
        #expect(repeated.frame["id"] == 9 && isRepeat(repeated) && outcomeText(repeated) == outcomeText(first))
        #expect(again.frame["id"] == 2 && isRepeat(again) && outcomeText(again) == outcomeText(first))
        #expect(h.nothingSent(to: observer), "the event ran once")
        // After its end, a repeat is answered at once.
        let late = h.request(other, #"{"op":"post","id":10,"name":"e","payload":{"a":1},"once":"p1"}"#)
        #expect(late["repeat"] == true && late["result"] == first.frame["result"])
        let status = h.request(other, #"{"op":"status","id":11}"#)
        #expect(status["result"]?["counters"]?["posted"] == 1)
        #expect(status["result"]?["once"]?["keys"] == 1)
    }

    @Test func aRepeatOfAQueuedPostWaitsForItAndRunsNothing() {
        var h = CoreHarness()
        let observer = h.connect(), poster = h.connect()
        _ = h.subscribe(observer, ["e"])
        h.send(poster, #"{"op":"post","id":1,"name":"e"}"#)
        let first = h.expectEvent(observer)
        h.send(poster, #"{"op":"post","id":2,"name":"e","once":"q"}"#)
        h.send(poster, #"{"op":"post","id":3,"name":"e","once":"q"}"#)
        h.send(observer, #"{"op":"next","event":\#(first.event)}"#)
        _ = h.take(poster)
        let second = h.expectEvent(observer)
        h.send(observer, #"{"op":"stop","event":\#(second.event)}"#)
        let replies = h.takeAll(poster)
        #expect(replies.map { $0["id"] } == [2, 3])
        #expect(replies[1]["repeat"] == true && replies[1]["result"] == replies[0]["result"])
        #expect(h.nothingSent(to: observer))
    }

    @Test func unkeyedRepliesCarryNoRepeatMember() {
        var h = CoreHarness()
        let c = h.connect()
        #expect(h.request(c, #"{"op":"post","id":1,"name":"e"}"#)["repeat"] == nil)
        #expect(h.request(c, #"{"op":"post","id":2,"name":"e"}"#)["repeat"] == nil)
        #expect(h.request(c, #"{"op":"put","id":3,"slot":"s","value":1}"#)["repeat"] == nil)
    }

    @Test func aKeyedPostWritesRunningBeforeItsFirstEventAndEndedBeforeItsReply() {
        var h = CoreHarness()
        h.holdWrites = true
        let observer = h.connect(), poster = h.connect()
        _ = h.subscribe(observer, ["e"])
        h.send(poster, #"{"op":"post","id":1,"name":"e","payload":[1],"once":"r"}"#)
        #expect(h.nothingSent(to: observer), "no observer sees it before it is recorded running")
        #expect(h.persisted.last?.record == .keysOnly)
        #expect(h.persisted.last?.once.first?.outcome == nil, "a running record")
        #expect(h.persisted.last?.acknowledges == nil)
        h.finishWrite()
        let event = h.expectEvent(observer)
        h.send(observer, #"{"op":"next","event":\#(event.event)}"#)
        #expect(h.nothingSent(to: poster), "the reply waits for the ended record")
        guard case .result(let ended)? = h.persisted.last?.once.first?.outcome else {
            Issue.record("no ended record")
            return
        }
        h.finishWrite()
        let reply = h.take(poster)
        #expect(outcomeText(reply) == String(decoding: ended, as: UTF8.self))
        #expect(reply.frame["result"]?["outcome"] == "unhandled")
    }

    @Test func aPostWithNoChainNeedsOnlyItsEndedRecord() {
        var h = CoreHarness()
        h.holdWrites = true
        let poster = h.connect()
        h.send(poster, #"{"op":"post","id":1,"name":"nobody","once":"n"}"#)
        #expect(h.persisted.count == 1 && h.persisted[0].once.first?.outcome != nil)
        h.finishWrite()
        #expect(h.take(poster).frame["result"]?["outcome"] == "unhandled")
    }

    @Test func theEndedRecordOfOneEventAndTheRunningRecordOfTheNextGoTogether() {
        var h = CoreHarness()
        h.holdWrites = true
        let observer = h.connect(), poster = h.connect()
        _ = h.subscribe(observer, ["e"])
        h.send(poster, #"{"op":"post","id":1,"name":"e","once":"a"}"#)
        h.send(poster, #"{"op":"post","id":2,"name":"e","once":"b"}"#)
        h.finishWrite()
        let first = h.expectEvent(observer)
        h.send(observer, #"{"op":"next","event":\#(first.event)}"#)
        // Both are asked for in the same input: the transport syncs them together.
        #expect(h.inFlight.count == 2)
        #expect(h.persisted.suffix(2).map { $0.once.first?.key } == ["a", "b"])
        #expect(h.persisted.suffix(2).map { $0.once.first?.outcome == nil } == [false, true])
    }

    @Test func aPostWhoseRunningRecordFailsIsRefusedAndSeenByNobody() {
        var h = CoreHarness()
        h.holdWrites = true
        let observer = h.connect(), poster = h.connect(), other = h.connect()
        _ = h.subscribe(observer, ["e"])
        h.send(poster, #"{"op":"post","id":1,"name":"e","once":"f"}"#)
        h.send(other, #"{"op":"post","id":2,"name":"e","once":"f"}"#)
        h.finishWrite(written: false)
        #expect(errorCode(h.take(poster).frame) == "storage_failed")
        let repeated = h.take(other).frame
        #expect(errorCode(repeated) == "storage_failed" && repeated["repeat"] == nil)
        #expect(h.nothingSent(to: observer))
        h.holdWrites = false
        h.send(poster, #"{"op":"post","id":3,"name":"e","once":"f"}"#)
        let event = h.expectEvent(observer)
        h.send(observer, #"{"op":"next","event":\#(event.event)}"#)
        #expect(h.take(poster).frame["repeat"] == nil, "sent again, it ran as new")
        #expect(h.request(poster, #"{"op":"status","id":4}"#)["result"]?["counters"]?["posted"] == 1)
    }

    @Test func aKeyedPostsLaunchRetentionIsInItsEndedRecord() {
        var h = CoreHarness()
        h.holdWrites = true
        let c = h.connect()
        h.send(c, #"{"op":"post","id":1,"name":"didReceive","payload":\#(OnceTests.click),"once":"click"}"#)
        #expect(h.persisted.count == 1)
        #expect(h.persisted[0].record == .slot(name: "launch", value: Array(OnceTests.click.utf8)))
        #expect(h.persisted[0].once.map(\.key) == ["click"])
        h.finishWrite()
        let reply = h.take(c)
        #expect(reply.frame["result"]?["retained"] == "launch")
        h.holdWrites = false
        let again = h.request(c, #"{"op":"post","id":2,"name":"didReceive","payload":\#(OnceTests.click),"once":"click"}"#)
        #expect(again["repeat"] == true && again["result"] == reply.frame["result"])
    }

    @Test func atShutdownQueuedAndRunningKeyedPostsAreNotRecorded() {
        var h = CoreHarness()
        let observer = h.connect(), poster = h.connect()
        _ = h.subscribe(observer, ["e"])
        h.send(poster, #"{"op":"post","id":1,"name":"e","once":"run"}"#)
        _ = h.expectEvent(observer)
        h.send(poster, #"{"op":"post","id":2,"name":"e","once":"queued"}"#)
        h.shutdown()
        #expect(h.takeAll(poster).map { errorCode($0) } == ["shutting_down", "shutting_down"])
        #expect(h.persisted.filter { $0.once.contains { $0.key == "queued" } }.isEmpty)
        #expect(h.persisted.filter { $0.once.contains { $0.key == "run" } }.map { $0.once[0].outcome == nil } == [true])
    }

    @Test func restoredKeysAreHeld() {
        let running = OnceRecord(key: "cut", op: .post, fingerprint: 7, wallMs: 1_700_000_000_000, outcome: nil)
        let ended = OnceRecord(
            key: "done", op: .put, fingerprint: 8, wallMs: 1_700_000_000_000, outcome: .result(Array("{\"replaced\":false,\"delivered\":false}".utf8))
        )
        var h = CoreHarness(once: [running, ended])
        let c = h.connect()
        // The fingerprints are the broker's own: a request of another body is a conflict.
        let conflict = h.request(c, #"{"op":"post","id":1,"name":"e","once":"cut"}"#)
        #expect(errorCode(conflict) == "once_conflict")
        #expect(h.request(c, #"{"op":"status","id":2}"#)["result"]?["once"]?["keys"] == 2)
    }

    @Test func aRestoredKeyAnswersItsRepeatsAsBeforeTheRestart() {
        // First life: a put and a post with keys, their records kept.
        var first = CoreHarness()
        let c = first.connect(), observer = first.connect()
        _ = first.subscribe(observer, ["e"])
        let put = first.request(c, #"{"op":"put","id":1,"slot":"s","value":1,"once":"p"}"#)
        first.send(c, #"{"op":"post","id":2,"name":"e","payload":{"x":1},"once":"e1"}"#)
        _ = first.expectEvent(observer)  // cut here: "running" is on disk, "ended" never will be
        var disk: [String: OnceRecord] = [:]
        var order: [String] = []
        for write in first.persisted {
            for r in write.once {
                if disk[r.key] == nil { order.append(r.key) }
                disk[r.key] = r
            }
        }
        // Second life, an hour later.
        var second = CoreHarness(wallClockMs: 1_700_003_600_000, once: order.map { disk[$0]! })
        let d = second.connect()
        let repeatedPut = second.request(d, #"{"op":"put","id":3,"slot":"s","value":1,"once":"p"}"#)
        #expect(repeatedPut["repeat"] == true && repeatedPut["result"] == put["result"])
        let cut = second.request(d, #"{"op":"post","id":4,"name":"e","payload":{"x":1},"once":"e1"}"#)
        #expect(cut["repeat"] == true && errorCode(cut) == "interrupted")
        #expect(
            cut["error"]?["message"]
                == .string(
                    "the event's chain was cut when the broker stopped; the observers before the cut saw it; it will not run again"))
    }

    // MARK: The window

    @Test func theOldestKeyIsForgottenPastTheCount() {
        var h = CoreHarness { $0.once.maxKeys = 2 }
        let c = h.connect()
        for (i, key) in ["a", "b", "c"].enumerated() {
            _ = h.request(c, #"{"op":"put","id":\#(i),"slot":"s\#(key)","value":1,"once":"\#(key)"}"#)
        }
        let status = h.request(c, #"{"op":"status","id":9}"#)["result"]?["once"]
        #expect(status?["keys"] == 2 && status?["maxKeys"] == 2)
        // "a" is forgotten: applied as new (the slot was emptied meanwhile, so it shows).
        _ = h.request(c, #"{"op":"take","id":10,"slot":"sa"}"#)
        let again = h.request(c, #"{"op":"put","id":11,"slot":"sa","value":1,"once":"a"}"#)
        #expect(again["repeat"] == nil)
        #expect(h.request(c, #"{"op":"peek","id":12,"slot":"sa"}"#)["result"] == 1)
        #expect(h.request(c, #"{"op":"put","id":13,"slot":"sc","value":1,"once":"c"}"#)["repeat"] == true)
    }

    @Test func aKeyIsForgottenPastItsAge() {
        var h = CoreHarness { $0.once.maxAgeMs = 60_000 }
        let c = h.connect()
        _ = h.request(c, #"{"op":"put","id":1,"slot":"s","value":1,"once":"k"}"#)
        h.advance(ms: 59_999)
        #expect(h.request(c, #"{"op":"put","id":2,"slot":"s","value":1,"once":"k"}"#)["repeat"] == true)
        h.advance(ms: 1)
        #expect(h.request(c, #"{"op":"put","id":3,"slot":"s","value":1,"once":"k"}"#)["repeat"] == nil)
    }

    @Test func theOldestKeysAreForgottenPastTheBytes() {
        // Each key costs its text and its outcome: 1 + 36 bytes for "a", 1 + 35 for the others.
        var h = CoreHarness { $0.once.maxBytes = 80 }
        let c = h.connect()
        for key in ["a", "b", "c"] { _ = h.request(c, #"{"op":"put","id":1,"slot":"s","value":1,"once":"\#(key)"}"#) }
        let once = h.request(c, #"{"op":"status","id":2}"#)["result"]?["once"]
        #expect(once?["keys"] == 2 && once?["bytes"] == 72)
    }

    @Test func aRunningPostsKeyIsNeverForgotten() {
        var h = CoreHarness { $0.once.maxKeys = 0 }
        let observer = h.connect(), poster = h.connect()
        _ = h.subscribe(observer, ["e"])
        h.send(poster, #"{"op":"post","id":1,"name":"e","once":"r"}"#)
        let event = h.expectEvent(observer)
        h.send(poster, #"{"op":"post","id":2,"name":"e","once":"r"}"#)
        #expect(h.nothingSent(to: observer), "held while it runs: the repeat waits")
        h.send(observer, #"{"op":"next","event":\#(event.event)}"#)
        #expect(h.takeAll(poster).map { $0["repeat"] } == [nil, true])
        #expect(h.request(poster, #"{"op":"status","id":3}"#)["result"]?["once"]?["keys"] == 0)
    }
}
