// Connection-level rules without sockets: credentials, client limit, hello, framing
// errors, request validation order, status and monitor.
import NotifBusCore
import NotifBusProtocol
import Testing

@Suite struct SessionTests {
    @Test func forbiddenUIDIsRefusedAndNotCounted() {
        var h = CoreHarness {
            $0.maxClients = 1; $0.allowedUIDs = [2000]
        }
        let stranger = h.connect(uid: 4242, greet: false)
        let refusal = h.take(stranger).frame
        #expect(refusal["id"] == .null)
        #expect(errorCode(refusal) == "forbidden")
        #expect(h.closed == [stranger])
        _ = h.connect(uid: 2000)  // allowed uid; the refused one did not take the only place
        let extra = h.connect(uid: 0, greet: false)
        #expect(errorCode(h.take(extra).frame) == "too_many_clients")
        #expect(h.closed == [stranger, extra])
    }

    @Test func helloRequiredClosesAndBadHelloStaysOpen() {
        var h = CoreHarness()
        let c = h.connect(greet: false)
        #expect(errorCode(h.request(c, #"{"op":"hello","id":1}"#)) == "bad_request")
        #expect(errorCode(h.request(c, #"{"op":"hello","protocol":1}"#)) == "bad_request")
        #expect(errorCode(h.request(c, #"{"op":"hello","id":1,"protocol":1.0}"#)) == "bad_request")
        #expect(errorCode(h.request(c, "not json")) == "bad_json")
        #expect(h.closed.isEmpty)
        let refusal = h.request(c, #"{"op":"ping","id":2}"#)
        #expect(errorCode(refusal) == "hello_required")
        #expect(h.closed == [c])
        // After the close nothing more is answered.
        h.send(c, #"{"op":"hello","id":3,"protocol":1}"#)
        #expect(h.sent.isEmpty)
    }

    @Test func answersBeforeHelloNeedHello() {
        var h = CoreHarness()
        let c = h.connect(greet: false)
        #expect(errorCode(h.request(c, #"{"op":"next","event":1}"#)) == "hello_required")
        #expect(h.closed == [c])
    }

    @Test func silentConnectionsAreClosedAfterTheHelloTimeout() {
        var h = CoreHarness { $0.helloTimeoutMs = 500 }
        let silent = h.connect(greet: false)
        let greeted = h.connect()
        h.advance(ms: 499)
        #expect(h.closed.isEmpty)
        h.advance(ms: 1)
        #expect(errorCode(h.take(silent).frame) == "hello_required")
        #expect(h.closed == [silent])
        #expect(h.request(greeted, #"{"op":"ping","id":1}"#)["result"] == [:])
    }

    @Test func unsupportedProtocolCloses() {
        var h = CoreHarness()
        let c = h.connect(greet: false)
        let reply = h.request(c, #"{"op":"hello","id":"x","protocol":2}"#)
        #expect(reply["id"] == "x")
        #expect(errorCode(reply) == "unsupported_protocol")
        #expect(h.closed == [c])
    }

    @Test func helloResultAndSecondHello() {
        var h = CoreHarness {
            $0.maxFrame = 4096; $0.serverName = "notifbus/test"
        }
        let c = h.connect(greet: false)
        let reply = h.request(c, #"{"op":"hello","id":1,"protocol":1,"name":"mail-app"}"#)
        #expect(
            reply == [
                "op": "reply", "id": 1,
                "result": ["protocol": 1, "server": "notifbus/test", "client": .string("c\(c)"), "maxFrame": 4096],
            ])
        #expect(errorCode(h.request(c, #"{"op":"hello","id":2,"protocol":2}"#)) == "bad_request")
        #expect(h.closed.isEmpty)
    }

    @Test func validationOrder() {
        var h = CoreHarness()
        let c = h.connect()
        // id before op
        var r = h.request(c, #"{"op":"bogus"}"#)
        #expect(r["id"] == .null)
        #expect(errorCode(r) == "bad_request")
        #expect(r["error"]?["message"]?.stringValue?.contains("id") == true)
        // op missing, then non-string
        r = h.request(c, #"{"id":5}"#)
        #expect(r["id"] == 5 && errorCode(r) == "bad_request")
        r = h.request(c, #"{"id":5,"op":7}"#)
        #expect(errorCode(r) == "bad_request" && r["error"]?["message"]?.stringValue?.contains("op") == true)
        // unknown op before unknown fields
        r = h.request(c, #"{"id":6,"op":"bogus","extra":1}"#)
        #expect(errorCode(r) == "unknown_op")
        // unknown field before the op's own fields
        r = h.request(c, #"{"id":7,"op":"subscribe","kee":"mail"}"#)
        #expect(errorCode(r) == "bad_request" && r["error"]?["message"]?.stringValue?.contains("kee") == true)
        r = h.request(c, #"{"id":8,"op":"ping","id":8}"#)
        #expect(errorCode(r) == "bad_request" && r["error"]?["message"]?.stringValue?.contains("duplicate") == true)
        // unusable ids
        for id in ["-1", "1.0", "1e2", "9007199254740992", "\"\"", "true", "null", "[1]"] {
            r = h.request(c, "{\"op\":\"ping\",\"id\":\(id)}")
            #expect(r["id"] == .null && errorCode(r) == "bad_request", "id \(id)")
        }
        let longID = String(repeating: "x", count: 256)
        #expect(h.request(c, "{\"op\":\"ping\",\"id\":\"\(longID)\"}")["id"] == .string(longID))
        #expect(h.request(c, #"{"op":"ping","id":9007199254740991}"#)["id"] == 9_007_199_254_740_991)
        #expect(h.closed.isEmpty)
    }

    @Test func fieldRules() {
        var h = CoreHarness()
        let c = h.connect()
        let long = String(repeating: "n", count: 257)
        let bad = [
            #"{"op":"subscribe","id":1,"events":[]}"#,
            #"{"op":"subscribe","id":1,"events":["a","a"]}"#,
            #"{"op":"subscribe","id":1,"events":[""]}"#,
            "{\"op\":\"subscribe\",\"id\":1,\"events\":[\"\(long)\"]}",
            "{\"op\":\"subscribe\",\"id\":1,\"events\":[\(((0..<65).map { "\"e\($0)\"" }).joined(separator: ","))]}",
            #"{"op":"subscribe","id":1,"events":["a"],"priority":2147483648}"#,
            #"{"op":"subscribe","id":1,"events":["a"],"priority":1.5}"#,
            #"{"op":"subscribe","id":1,"events":["a"],"key":5}"#,
            #"{"op":"unsubscribe","id":1}"#,
            #"{"op":"unsubscribe","id":1,"observer":"o1","key":"k"}"#,
            #"{"op":"post","id":1}"#,
            #"{"op":"invoke","id":1,"channel":"c"}"#,
            #"{"op":"put","id":1,"slot":"s"}"#,
            #"{"op":"take","id":1,"slot":"s","wait":600001}"#,
            #"{"op":"take","id":1,"slot":"s","wait":-1}"#,
        ]
        for text in bad {
            #expect(errorCode(h.request(c, text)) == "bad_request", "\(text.prefix(80))")
        }
        #expect(
            h.request(
                c,
                "{\"op\":\"subscribe\",\"id\":1,\"events\":[\(((0..<64).map { "\"e\($0)\"" }).joined(separator: ","))],\"priority\":-2147483648,\"key\":null}"
            )["result"]?["replaced"] == .array([]))
        #expect(errorCode(h.request(c, #"{"op":"unsubscribe","id":1,"observer":"o999"}"#)) == "not_found")
        #expect(errorCode(h.request(c, #"{"op":"unsubscribe","id":1,"key":"nobody"}"#)) == "not_found")
        #expect(errorCode(h.request(c, #"{"op":"nope","id":1}"#)) == "unknown_op")
    }

    @Test func badJSONKeepsTheConnection() {
        var h = CoreHarness()
        let c = h.connect()
        for text in ["{", "[1]", "\"s\"", "{\"a\":01}", "{\"a\":1} x", "{\"a\":\"\u{1}\"}"] {
            let r = h.request(c, text)
            #expect(errorCode(r) == "bad_json" && r["id"] == .null, "\(text)")
        }
        let invalidUTF8: [UInt8] = [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D]
        h.receive(invalidUTF8, from: c)
        h.collect()
        #expect(errorCode(h.take(c).frame) == "bad_json")
        #expect(h.request(c, #"{"op":"ping","id":1}"#)["result"] == [:])
        #expect(h.closed.isEmpty)
    }

    @Test func oversizedFrameCloses() {
        var h = CoreHarness()
        let c = h.connect()
        let o = h.subscribe(c, ["e"])
        h.receiveOversizedFrame(from: c, length: 0)
        h.collect()
        #expect(errorCode(h.take(c).frame) == "frame_too_large")
        #expect(h.closed == [c])
        let other = h.connect()
        let status = h.request(other, #"{"op":"status","id":1}"#)
        #expect(status["result"]?["observers"] == .array([]), "observer \(o) must go with its connection")
    }

    @Test func aClosedConnectionIsGoneBeforeWhatItsDepartureSetsGoing() {
        var h = CoreHarness()
        let observer = h.connect(), poster = h.connect()
        _ = h.subscribe(observer, ["e"])
        h.send(poster, #"{"op":"post","id":1,"name":"e"}"#)
        #expect(h.take(observer).frame["op"] == "event")
        h.order.removeAll()
        // The awaited observer's connection is refused and closed: its hop ends with it, and
        // the post's result follows the close.
        h.receiveOversizedFrame(from: observer, length: 0)
        h.collect()
        #expect(h.order == ["send c\(observer)", "close c\(observer)", "send c\(poster)"])
        #expect(h.take(poster).frame["result"]?["outcome"] == "unhandled")
    }

    @Test func theConnectionOverTheBufferBudgetIsToldAndClosed() {
        var h = CoreHarness()
        let c = h.connect()
        let o = h.subscribe(c, ["e"])
        h.overBudget(c, held: 40_000, limit: 32_768)
        let frame = h.take(c).frame
        #expect(errorCode(frame) == "overloaded" && frame["id"] == .null)
        #expect(
            frame["error"]?["message"]
                == "cut off: the broker's buffers are full (--max-buffered-bytes 32768) and this connection held the most (40000 bytes)")
        #expect(h.closed == [c])
        let other = h.connect()
        let status = h.request(other, #"{"op":"status","id":1}"#)
        #expect(status["result"]?["observers"] == .array([]), "observer \(o) must go with its connection")
    }

    @Test func statusListsGreetedClientsAndOrderedObservers() {
        var h = CoreHarness()
        let a = h.connect(name: "alpha"), b = h.connect()
        _ = h.connect(greet: false)
        let o1 = h.subscribe(a, ["x", "y"], priority: 50, key: "k1")
        let o2 = h.subscribe(b, ["x"], priority: -1)
        _ = h.request(b, #"{"op":"handle","id":1,"channel":"ch"}"#)
        _ = h.request(b, #"{"op":"put","id":1,"slot":"zeta","value":1}"#)
        _ = h.request(b, #"{"op":"put","id":1,"slot":"alpha","value":2}"#)
        h.advance(ms: 1500)
        let s = h.request(a, #"{"op":"status","id":9}"#)["result"]!
        #expect(s["server"] == "notifbus/0.1.0")
        #expect(s["uptimeMs"] == 1500)
        #expect(
            s["clients"]
                == .array([
                    ["client": .string("c\(a)"), "name": "alpha", "pid": .integer(Int64(100 + a)), "uid": 1000, "queued": 0, "unresponsive": false],
                    ["client": .string("c\(b)"), "name": .null, "pid": .integer(Int64(100 + b)), "uid": 1000, "queued": 0, "unresponsive": false],
                ]))
        #expect(
            s["observers"]
                == .array([
                    ["observer": .string(o2), "client": .string("c\(b)"), "events": ["x"], "priority": -1, "key": .null],
                    ["observer": .string(o1), "client": .string("c\(a)"), "events": ["x", "y"], "priority": 50, "key": "k1"],
                ]))
        #expect(s["handlers"] == .array([["handler": "h1", "client": .string("c\(b)"), "channel": "ch", "method": .null]]))
        #expect(s["queue"] == ["pending": 0, "current": .null, "maxPerClient": 1250])
        #expect(s["slots"] == ["alpha", "zeta"])
        #expect(s["next"] == .null)
        #expect(s["buffers"] == ["bytes": 0, "max": 0, "cutOff": 0])
        #expect(
            s["counters"] == [
                "posted": 0, "completed": 0, "stopped": 0, "unhandled": 0, "hopTimeouts": 0, "gone": 0,
                "invalid": 0, "skipped": 0, "invokes": 0, "callTimeouts": 0,
            ])
    }

    /// A status larger than a page comes in pages that together list every item once, in
    /// order, each page within the page size plus one item.
    @Test func statusComesInPagesThatListEverythingOnce() {
        var h = CoreHarness { $0.statusPageBytes = 2048 }
        let a = h.connect(name: "a"), b = h.connect(name: "b")
        var expectedObservers: [String] = []
        let long = String(repeating: "n", count: 200)
        for i in 0..<12 { expectedObservers.append(h.subscribe(i % 2 == 0 ? a : b, ["\(long)\(i)", "e"], priority: 5 - i % 3)) }
        for i in 0..<6 { _ = h.request(b, "{\"op\":\"handle\",\"id\":1,\"channel\":\"\(long)\(i)\"}") }
        for i in 0..<9 { _ = h.request(a, "{\"op\":\"put\",\"id\":1,\"slot\":\"\(long)\(i)\",\"value\":1}") }
        var clients: [JSONValue] = [], observers: [JSONValue] = [], handlers: [JSONValue] = [], slots: [JSONValue] = []
        var page: String? = nil
        var pages = 0
        repeat {
            let request = page.map { "{\"op\":\"status\",\"id\":7,\"page\":\"\($0)\"}" } ?? #"{"op":"status","id":7}"#
            h.send(a, request)
            let sent = h.take(a)
            #expect(sent.raw.utf8.count < 2048 + 700, "page \(pages) is \(sent.raw.utf8.count) bytes")
            let r = sent.frame["result"]!
            clients += r["clients"]?.arrayValue ?? []
            observers += r["observers"]?.arrayValue ?? []
            handlers += r["handlers"]?.arrayValue ?? []
            slots += r["slots"]?.arrayValue ?? []
            #expect(r["counters"]?["posted"] == 0)
            page = r["next"]?.stringValue
            pages += 1
        } while page != nil && pages < 100
        #expect(pages > 3)
        #expect(clients.compactMap { $0["client"]?.stringValue } == ["c\(a)", "c\(b)"])
        let listed = observers.compactMap { $0["observer"]?.stringValue }
        let byPriority = expectedObservers.enumerated().sorted { (5 - $0.offset % 3, $0.offset) < (5 - $1.offset % 3, $1.offset) }.map(\.element)
        #expect(listed == byPriority)
        #expect(handlers.compactMap { $0["handler"]?.stringValue } == (1...6).map { "h\($0)" })
        #expect(slots.compactMap(\.stringValue) == (0..<9).map { "\(long)\($0)" }.sorted())
        // A cursor no reply wrote is refused, also one that names a real position.
        #expect(errorCode(h.request(a, #"{"op":"status","id":8,"page":"x1"}"#)) == "bad_request")
        for made in ["o100:580", "o1:0", "s:", "c1", "h1", "o5:1.0000000000000000"] {
            #expect(errorCode(h.request(a, "{\"op\":\"status\",\"id\":8,\"page\":\"\(made)\"}")) == "bad_request", "\(made)")
        }
        // A written cursor with its position changed is refused too.
        let written = StatusPage.observer(priority: 5, id: 1).cursor
        let forged = "o4:1" + written.dropFirst(4)
        #expect(errorCode(h.request(a, "{\"op\":\"status\",\"id\":8,\"page\":\"\(forged)\"}")) == "bad_request")
        #expect(errorCode(h.request(a, #"{"op":"status","id":8,"page":5}"#)) == "bad_request")
    }

    /// Pages are read at their own moments: an observer present from the first page to the
    /// last is listed exactly once even when the one a cursor names is gone meanwhile, and
    /// one added behind the cursor shows up on a later page (decision 31).
    @Test func statusPagesSurviveChangesBetweenThem() {
        var h = CoreHarness { $0.statusPageBytes = 2048 }
        let a = h.connect()
        let long = String(repeating: "n", count: 200)
        let original = (0..<24).map { h.subscribe(a, ["\(long)\($0)"], priority: 10) }
        var listed: [String] = []
        var page: String? = nil
        var pages = 0
        var changed = false
        var cursorObserver: String? = nil
        var late: String? = nil
        repeat {
            let request = page.map { "{\"op\":\"status\",\"id\":7,\"page\":\"\($0)\"}" } ?? #"{"op":"status","id":7}"#
            let r = h.request(a, request)["result"]!
            listed += (r["observers"]?.arrayValue ?? []).compactMap { $0["observer"]?.stringValue }
            page = r["next"]?.stringValue
            pages += 1
            if !changed, let cursor = page, cursor.hasPrefix("o") {
                // The observer the cursor names leaves; one joins after every listed one.
                changed = true
                cursorObserver = listed.last
                let gone = h.request(a, "{\"op\":\"unsubscribe\",\"id\":8,\"observer\":\"\(listed.last!)\"}")
                #expect(gone["result"] != nil)
                late = h.subscribe(a, ["late"], priority: 20)
            }
        } while page != nil && pages < 100
        #expect(changed && pages > 2)
        for o in original where o != cursorObserver {
            #expect(listed.filter { $0 == o }.count == 1, "\(o) listed \(listed.filter { $0 == o }.count) times")
        }
        #expect(listed.filter { $0 == cursorObserver }.count == 1)  // listed before it left
        #expect(late.map { listed.contains($0) } == true)
        #expect(listed == listed.sorted { Int($0.dropFirst())! < Int($1.dropFirst())! })
    }

    /// Many small items: each page picks a bounded number of them, and the pages still
    /// list every one once, in order (also when a page ends because the pick ran out).
    @Test func statusPagesOfManySmallHandlers() {
        var h = CoreHarness { $0.statusPageBytes = 4096 }
        let a = h.connect()
        for i in 0..<300 { _ = h.request(a, "{\"op\":\"handle\",\"id\":1,\"channel\":\"c\",\"method\":\"m\(i)\"}") }
        var listed: [String] = []
        var page: String? = nil
        var pages = 0
        repeat {
            let request = page.map { "{\"op\":\"status\",\"id\":7,\"page\":\"\($0)\"}" } ?? #"{"op":"status","id":7}"#
            let r = h.request(a, request)["result"]!
            listed += (r["handlers"]?.arrayValue ?? []).compactMap { $0["handler"]?.stringValue }
            page = r["next"]?.stringValue
            pages += 1
        } while page != nil && pages < 100
        #expect(pages >= 5)
        #expect(listed == (1...300).map { "h\($0)" })
    }

    @Test func helloRequiredEchoesAUsableID() {
        var h = CoreHarness()
        let c = h.connect(greet: false)
        let refusal = h.request(c, #"{"op":"ping","id":7}"#)
        #expect(errorCode(refusal) == "hello_required")
        #expect(refusal["id"] == 7)
        let d = h.connect(greet: false)
        #expect(h.request(d, #"{"op":"frobnicate","id":"s"}"#)["id"] == "s")
        let e = h.connect(greet: false)
        let unusable = h.request(e, #"{"op":"ping","id":-1}"#)
        #expect(errorCode(unusable) == "hello_required")
        #expect(unusable["id"] == .null)
    }

    @Test func monitorSeesOtherConnectionsOnly() {
        var h = CoreHarness()
        let m = h.connect(), c = h.connect()
        #expect(h.request(m, #"{"op":"monitor","id":1}"#)["result"] == [:])
        h.send(c, #"{"op":"ping","id":42}"#)
        let reply = h.take(c).frame
        #expect(reply["result"] == [:])
        let seen = h.takeAll(m)
        #expect(
            seen == [
                ["op": "seen", "dir": "in", "client": .string("c\(c)"), "frame": ["op": "ping", "id": 42]],
                ["op": "seen", "dir": "out", "client": .string("c\(c)"), "frame": ["op": "reply", "id": 42, "result": [:]]],
            ])
        // Its own frames are not mirrored to itself, and bad JSON is not mirrored at all.
        _ = h.request(m, #"{"op":"ping","id":1}"#)
        #expect(h.nothingSent(to: m))
        h.send(c, "garbage")
        _ = h.take(c)
        let afterGarbage = h.takeAll(m)
        #expect(afterGarbage.count == 1 && afterGarbage[0]["dir"] == "out")
    }

    @Test func shutdownAnswersEverythingPending() {
        var h = CoreHarness()
        let o = h.connect(), p = h.connect(), handler = h.connect(), taker = h.connect()
        _ = h.subscribe(o, ["e"])
        _ = h.request(handler, #"{"op":"handle","id":1,"channel":"ch"}"#)
        h.send(p, #"{"op":"post","id":1,"name":"e"}"#)
        h.send(p, #"{"op":"post","id":2,"name":"e"}"#)
        h.send(p, #"{"op":"invoke","id":3,"channel":"ch","method":"m"}"#)
        h.send(taker, #"{"op":"take","id":4,"slot":"s","wait":10000}"#)
        _ = h.takeAll(o)
        _ = h.takeAll(handler)
        h.shutdown()
        h.collect()
        let replies = h.takeAll(p)
        #expect(replies.map { $0["id"] } == [1, 2, 3])
        #expect(replies.allSatisfy { errorCode($0) == "shutting_down" })
        #expect(errorCode(h.take(taker).frame) == "shutting_down")
        #expect(Set(h.closed) == Set([o, p, handler, taker]))
        #expect(h.broker.nextDeadline == nil)
    }
}
