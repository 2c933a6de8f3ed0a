// The outbound encoder against the vectors: broker frames of framing.json byte for byte,
// and every exactly expected frame of the dispatch scenarios rebuilt as a typed frame and
// encoded; plus the byte layout of each reply result and that user data is not re-encoded.
import Foundation
import NotifBusProtocol
import Testing

struct OutboundFrameTests {
    static func body(_ frame: [UInt8]) -> String {
        #expect(frame.count >= 4)
        let n = Int(frame[0]) << 24 | Int(frame[1]) << 16 | Int(frame[2]) << 8 | Int(frame[3])
        #expect(n == frame.count - 4, "length prefix")
        return String(decoding: frame[4...], as: UTF8.self)
    }

    static func raw(_ text: String) -> RawJSON { Array(text.utf8) }

    @Test func brokerFramesOfTheFramingVectorsByteForByte() throws {
        let vectors = try FramingVectors.load()
        func vector(_ name: String) throws -> [UInt8] {
            try #require(vectors.valid.first { $0.name == name }).bytes
        }
        #expect(
            OutboundFrame.reply(.integer(1), .hello(server: "notifbus/0.1.0", client: 7, maxFrame: 1_048_576)).encoded()
                == (try vector("reply to hello")))
        #expect(OutboundFrame.error(nil, .badJSON, message: "unexpected byte at byte 0").encoded() == (try vector("error frame")))
        #expect(OutboundFrame.event(event: 12, observer: 2, name: "didReceive", payload: nil).encoded() == (try vector("event")))
        #expect(OutboundFrame.observerEvicted(1, by: 4).encoded() == (try vector("evicted observer")))
        #expect(OutboundFrame.handlerEvicted(1, by: 2).encoded() == (try vector("evicted handler")))
        #expect(
            OutboundFrame.call(call: 31, handler: 2, channel: JSONName("c"), method: JSONName("m"), arguments: nil, from: 9).encoded()
                == (try vector("call")))
        let ping = OutboundFrameTests.raw("{\"op\":\"ping\",\"id\":2}")
        let seen = ping.withUnsafeBytes { OutboundFrame.seen(inbound: true, client: 7, frame: $0) }
        #expect(seen == (try vector("seen")))
    }

    @Test func eachReplyResultsLayout() {
        func reply(_ rid: RequestID, _ result: ReplyResult) -> String { OutboundFrameTests.body(OutboundFrame.reply(rid, result).encoded()) }
        #expect(reply(.integer(3), .empty) == #"{"op":"reply","id":3,"result":{}}"#)
        #expect(reply(.string("a\\\"b"), .empty) == #"{"op":"reply","id":"a\"b","result":{}}"#)
        #expect(reply(.integer(1), .subscribed(observer: 5, replaced: nil)) == #"{"op":"reply","id":1,"result":{"observer":"o5","replaced":[]}}"#)
        #expect(reply(.integer(1), .subscribed(observer: 5, replaced: 2)) == #"{"op":"reply","id":1,"result":{"observer":"o5","replaced":["o2"]}}"#)
        #expect(reply(.integer(1), .observerRemoved(9)) == #"{"op":"reply","id":1,"result":{"removed":["o9"]}}"#)
        #expect(reply(.integer(1), .handled(handler: 4, replaced: nil)) == #"{"op":"reply","id":1,"result":{"handler":"h4","replaced":null}}"#)
        #expect(reply(.integer(1), .handled(handler: 4, replaced: 3)) == #"{"op":"reply","id":1,"result":{"handler":"h4","replaced":"h3"}}"#)
        #expect(reply(.integer(1), .handlerRemoved(4)) == #"{"op":"reply","id":1,"result":{"removed":["h4"]}}"#)
        #expect(reply(.integer(1), .put(replaced: true, delivered: false)) == #"{"op":"reply","id":1,"result":{"replaced":true,"delivered":false}}"#)
        #expect(reply(.integer(1), .put(replaced: false, delivered: true)) == #"{"op":"reply","id":1,"result":{"replaced":false,"delivered":true}}"#)
        #expect(reply(.integer(1), .value(nil)) == #"{"op":"reply","id":1,"result":null}"#)
        #expect(reply(.integer(1), .categories(OutboundFrameTests.raw("[]"))) == #"{"op":"reply","id":1,"result":{"categories":[]}}"#)
        #expect(reply(.integer(1), .categoryCount(2)) == #"{"op":"reply","id":1,"result":{"count":2}}"#)
        let post = PostReply(
            event: 7, outcome: .completed, by: 2, value: OutboundFrameTests.raw("[\"badge\"]"), retained: false,
            trace: [TraceHop(observer: 1, reply: .next), TraceHop(observer: 2, reply: .complete)])
        #expect(
            reply(.integer(1), .posted(post))
                == #"{"op":"reply","id":1,"result":{"event":7,"outcome":"completed","by":"o2","value":["badge"],"retained":null,"trace":[{"observer":"o1","reply":"next"},{"observer":"o2","reply":"complete"}]}}"#
        )
        let retained = PostReply(event: 8, outcome: .unhandled, by: nil, value: nil, retained: true, trace: [])
        #expect(
            reply(.integer(1), .posted(retained))
                == #"{"op":"reply","id":1,"result":{"event":8,"outcome":"unhandled","by":null,"value":null,"retained":"launch","trace":[]}}"#)
    }

    /// The result's range a post's reply reports is its `result`: the bytes `resultBytes`
    /// makes, for ids of any length, behind other frames in the store.
    @Test func aPostReplyReportsItsResultsRange() {
        let trace = [TraceHop(observer: 1, reply: .next), TraceHop(observer: 12, reply: .complete)]
        let store = OutputStore()
        for rid: RequestID in [.integer(0), .integer(9), .integer(12_345), .integer(Limits.maxIntegerID - 1), .string(""), .string("a\"é")] {
            for (outcome, by, value) in [(EventOutcome.completed, 12, OutboundFrameTests.raw("[\"badge\"]")), (.unhandled, nil, nil)] {
                _ = OutboundFrame.reply(rid, .empty).encode(into: store)
                let (reply, result) = trace.withUnsafeBufferPointer { trace in
                    PostReply.encodeReplyAndResult(
                        rid, event: 77, outcome: outcome, by: by, value: value, retained: false, trace: trace, into: store)
                }
                let post = PostReply(event: 77, outcome: outcome, by: by, value: value, retained: false, trace: trace)
                #expect(store.bytes(of: reply) == OutboundFrame.reply(rid, .posted(post)).encoded())
                #expect(store.bytes(of: result) == ReplyResult.posted(post).resultBytes)
            }
        }
    }

    @Test func errorRepliesAndRelayedHandlerErrors() {
        #expect(
            OutboundFrameTests.body(OutboundFrame.error(.integer(2), .notFound, message: "no \"such\"\nobserver").encoded())
                == #"{"op":"reply","id":2,"error":{"code":"not_found","message":"no \"such\"\nobserver"}}"#)
        #expect(
            OutboundFrameTests.body(OutboundFrame.superseded(.integer(2), message: "m", by: "o1").encoded())
                == #"{"op":"reply","id":2,"error":{"code":"superseded","message":"m","details":{"by":"o1"}}}"#)
        #expect(
            OutboundFrameTests.body(OutboundFrame.error(nil, .timeout, message: "x").encoded())
                == #"{"op":"reply","id":null,"error":{"code":"timeout","message":"x"}}"#)
    }

    /// Raw user data is copied as written, whitespace and escapes included.
    @Test func userDataGoesThroughByteForByte() {
        let odd = OutboundFrameTests.raw("{ \"b\" : [1 ,2.50e0], \"a\":\"\\u00e9\" }")
        let event = OutboundFrameTests.body(OutboundFrame.event(event: 1, observer: 1, name: "n", payload: odd).encoded())
        #expect(event.hasSuffix(",\"payload\":{ \"b\" : [1 ,2.50e0], \"a\":\"\\u00e9\" }}"))
        let call = OutboundFrameTests.body(
            OutboundFrame.call(call: 1, handler: 1, channel: JSONName("c"), method: JSONName("m"), arguments: JSONBytes(odd), from: 1).encoded())
        #expect(call.contains(",\"arguments\":{ \"b\" : [1 ,2.50e0], \"a\":\"\\u00e9\" },"))
        #expect(
            OutboundFrameTests.body(OutboundFrame.handlerError(.integer(1), JSONBytes(odd)).encoded())
                == "{\"op\":\"reply\",\"id\":1,\"error\":{ \"b\" : [1 ,2.50e0], \"a\":\"\\u00e9\" }}")
        #expect(
            OutboundFrameTests.body(OutboundFrame.reply(.integer(1), .value(odd)).encoded())
                == "{\"op\":\"reply\",\"id\":1,\"result\":{ \"b\" : [1 ,2.50e0], \"a\":\"\\u00e9\" }}")
    }

    @Test func statusPageLayout() {
        var w = StatusPageWriter(.integer(4), server: "s", uptimeMs: 12, capacity: 64)
        w.client(id: 1, name: nil, pid: 10, uid: 1000, queued: 0, unresponsive: false)
        w.client(id: 2, name: "n", pid: 11, uid: 1000, queued: 1, unresponsive: true)
        w.beginObservers()
        w.observer(id: 3, client: 1, events: ["a", "b"], priority: -5, key: "k")
        w.beginHandlers()
        w.handler(id: 1, client: 2, channel: "ch", method: nil)
        w.beginSlots()
        w.slot("x")
        w.slot("y")
        var figures = StatusFigures()
        figures.pending = 2
        figures.current = 9
        figures.maxPerClient = 1250
        figures.counters.posted = 3
        figures.once = OnceFigures(keys: 2, bytes: 90, maxKeys: 100, maxAgeMs: 60_000, maxBytes: 4096)
        let text = OutboundFrameTests.body(w.finish(next: .slot("y"), figures: figures))
        #expect(
            text
                == #"{"op":"reply","id":4,"result":{"server":"s","uptimeMs":12,"clients":[{"client":"c1","name":null,"pid":10,"uid":1000,"queued":0,"unresponsive":false},{"client":"c2","name":"n","pid":11,"uid":1000,"queued":1,"unresponsive":true}],"observers":[{"observer":"o3","client":"c1","events":["a","b"],"priority":-5,"key":"k"}],"handlers":[{"handler":"h1","client":"c2","channel":"ch","method":null}],"slots":["x","y"],"next":"\#(StatusPage.slot("y").cursor)","queue":{"pending":2,"current":9,"maxPerClient":1250},"buffers":{"bytes":0,"max":0,"cutOff":0},"once":{"keys":2,"bytes":90,"maxKeys":100,"maxAgeMs":60000,"maxBytes":4096},"counters":{"posted":3,"completed":0,"stopped":0,"unhandled":0,"hopTimeouts":0,"gone":0,"invalid":0,"skipped":0,"invokes":0,"callTimeouts":0}}}"#
        )
        var empty = StatusPageWriter(.integer(5), server: "s", uptimeMs: 0, capacity: 16)
        empty.beginObservers()
        empty.beginHandlers()
        empty.beginSlots()
        let emptyText = OutboundFrameTests.body(empty.finish(next: nil, figures: StatusFigures()))
        #expect(
            emptyText.hasPrefix(
                #"{"op":"reply","id":5,"result":{"server":"s","uptimeMs":0,"clients":[],"observers":[],"handlers":[],"slots":[],"next":null,"queue":{"pending":0,"current":null,"#
            ))
    }

    // MARK: The scenarios' expected frames

    /// Every frame a scenario expects exactly (not as a subset), placeholders filled in.
    static func scenarioFrames() throws -> [(scenario: String, frame: JSONValue)] {
        let folder = FramingVectors.folder.appendingPathComponent("scenarios")
        var out: [(String, JSONValue)] = []
        for file in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() where file.hasSuffix(".json") {
            let root = try JSONValue(parsing: Array(try Data(contentsOf: folder.appendingPathComponent(file))))
            guard case .array(let steps)? = root["steps"] else { continue }
            for step in steps where step["expect"] != nil && step["match"] == nil {
                if let frame = step["frame"] { out.append((file, fill(frame))) }
            }
        }
        return out
    }

    /// `$client:x` (or `$any` as a client) becomes a connection id, any other `$any` a message.
    static func fill(_ value: JSONValue, key: String? = nil) -> JSONValue {
        switch value {
        case .string(let s) where s.hasPrefix("$client:"): return .string("c\(s.count)")
        case .string("$any"): return .string(key == "client" ? "c1" : "any message")
        case .array(let a): return .array(a.map { fill($0) })
        case .object(let o): return .object(Dictionary(uniqueKeysWithValues: o.map { ($0.key, fill($0.value, key: $0.key)) }))
        default: return value
        }
    }

    /// The bytes the encoder writes for `json`, chosen by its shape.
    static func encode(_ json: JSONValue) -> [UInt8]? {
        if json["op"] == "seen", let c = number(json["client"], "c"), let frame = json["frame"] {
            return frame.encoded.withUnsafeBytes { OutboundFrame.seen(inbound: json["dir"] == "in", client: c, frame: $0) }
        }
        return typedEncoding(json)
    }

    static func number(_ value: JSONValue?, _ tag: Character) -> Int? {
        guard let s = value?.stringValue, s.first == tag else { return nil }
        return Int(s.dropFirst())
    }

    static func requestID(_ value: JSONValue?) -> RequestID? {
        switch value {
        case .integer(let i)?: return .integer(i)
        case .string(let s)?: return .string(String(decoding: JSONValue.string(s).encoded.dropFirst().dropLast(), as: UTF8.self))
        default: return nil
        }
    }

    /// The frame the broker would send for `json`, chosen by its shape, typed and encoded.
    static func typedEncoding(_ json: JSONValue) -> [UInt8]? {
        switch json["op"]?.stringValue {
        case "event":
            guard let e = json["event"]?.intValue, let o = number(json["observer"], "o"), let name = json["name"]?.stringValue else { return nil }
            return OutboundFrame.event(event: e, observer: o, name: name, payload: json["payload"].flatMap { $0 == .null ? nil : $0.encoded })
                .encoded()
        case "call":
            guard let call = json["call"]?.intValue, let h = number(json["handler"], "h"), let ch = json["channel"]?.stringValue,
                let m = json["method"]?.stringValue, let from = number(json["from"], "c")
            else { return nil }
            guard let arguments = json["arguments"], arguments != .null else {
                return OutboundFrame.call(call: call, handler: h, channel: JSONName(ch), method: JSONName(m), arguments: nil, from: from).encoded()
            }
            return OutboundFrame.call(
                call: call, handler: h, channel: JSONName(ch), method: JSONName(m), arguments: JSONBytes(arguments.encoded), from: from
            ).encoded()
        case "evicted":
            if let o = number(json["observer"], "o"), let by = number(json["by"], "o") { return OutboundFrame.observerEvicted(o, by: by).encoded() }
            if let h = number(json["handler"], "h"), let by = number(json["by"], "h") { return OutboundFrame.handlerEvicted(h, by: by).encoded() }
            return nil
        case "reply":
            let rid = requestID(json["id"])
            if json["repeat"] == true, let rid {
                // The first outcome sent again: its bytes, then `"repeat":true`.
                let outcome: OnceOutcome? = json["error"].map { .error($0.encoded) } ?? json["result"].map { .result($0.encoded) }
                return outcome.map { OutboundFrame.repeated(rid, $0).encoded() }
            }
            if let error = json["error"] {
                guard let codeText = error["code"]?.stringValue, let code = ErrorCode(rawValue: codeText),
                    let message = error["message"]?.stringValue
                else {
                    return rid.map { OutboundFrame.handlerError($0, JSONBytes(error.encoded)).encoded() }
                }
                if let by = error["details"]?["by"]?.stringValue, let rid { return OutboundFrame.superseded(rid, message: message, by: by).encoded() }
                if let op = error["details"]?["op"]?.stringValue, let rid {
                    return OutboundFrame.onceConflict(rid, message: message, op: op).encoded()
                }
                return OutboundFrame.error(rid, code, message: message).encoded()
            }
            guard let rid, let result = json["result"] else { return nil }
            return OutboundFrame.reply(rid, replyResult(result)).encoded()
        default:
            return nil
        }
    }

    @_lifetime(immortal)
    static func replyResult(_ r: JSONValue) -> ReplyResult {
        guard case .object(let o) = r else { return .value(r == .null ? nil : r.encoded) }
        if o.isEmpty { return .empty }
        if let server = r["server"]?.stringValue, r["protocol"] != nil, let c = number(r["client"], "c"), let m = r["maxFrame"]?.intValue {
            return .hello(server: server, client: c, maxFrame: Int(m))
        }
        if let obs = number(r["observer"], "o"), case .array(let replaced)? = r["replaced"] {
            return .subscribed(observer: obs, replaced: replaced.first.flatMap { number($0, "o") })
        }
        if case .array(let removed)? = r["removed"], let first = removed.first {
            if let o = number(first, "o") { return .observerRemoved(o) }
            if let h = number(first, "h") { return .handlerRemoved(h) }
        }
        if let h = number(r["handler"], "h"), o.count == 2 { return .handled(handler: h, replaced: number(r["replaced"], "h")) }
        if case .bool(let replaced)? = r["replaced"], case .bool(let delivered)? = r["delivered"], o.count == 2 {
            return .put(replaced: replaced, delivered: delivered)
        }
        if let event = r["event"]?.intValue, let outcomeText = r["outcome"]?.stringValue, let outcome = EventOutcome(rawValue: outcomeText),
            case .array(let trace)? = r["trace"]
        {
            let hops = trace.compactMap { hop -> TraceHop? in
                guard let o = number(hop["observer"], "o"), let reply = hop["reply"]?.stringValue.flatMap(HopReply.init) else { return nil }
                return TraceHop(observer: o, reply: reply)
            }
            return .posted(
                PostReply(
                    event: event, outcome: outcome, by: number(r["by"], "o"),
                    value: r["value"].flatMap { $0 == .null ? nil : $0.encoded },
                    retained: r["retained"] == "launch", trace: hops))
        }
        if let categories = r["categories"], o.count == 1 { return .categories(categories.encoded) }
        if let count = r["count"]?.intValue, o.count == 1 { return .categoryCount(Int(count)) }
        return .value(r.encoded)
    }

    @Test func everyExactlyExpectedScenarioFrameEncodesToItself() throws {
        let frames = try OutboundFrameTests.scenarioFrames()
        #expect(frames.count > 100, "the scenarios expect \(frames.count) frames exactly")
        for (scenario, json) in frames {
            guard let encoded = OutboundFrameTests.encode(json) else {
                Issue.record("\(scenario): no typed frame for \(json.text)")
                continue
            }
            let decoded = try JSONValue(parsing: encoded[4...])
            #expect(decoded == json, "\(scenario): \(json.text) encodes as \(String(decoding: encoded[4...], as: UTF8.self))")
        }
    }
}

/// A post's `event` frames written from its `EventFrame` are the frames `OutboundFrame.event`
/// writes whole, for names that need escapes and payloads of any size; reset for another
/// post, the same memory holds the other post's frames.
struct EventFrameTests {
    @Test func framesAroundEachObserverAreTheWholeFrames() {
        let names = ["bench", "", "tab\tquote\"back\\slash", "\u{1}\u{1f}é🙂", String(repeating: "n", count: 300)]
        let payloads: [RawJSON?] = [nil, OutboundFrameTests.raw("{ \"a\" : [1, 2.5e3] }"), Array(repeating: UInt8(ascii: "7"), count: 9000)]
        let frame = EventFrame(event: 1, name: "", payload: nil)
        for name in names {
            for payload in payloads {
                for event: Int64 in [1, 12_345, Int64.max] {
                    if let payload {
                        frame.reset(event: event, name: name, payload: JSONBytes(payload))
                    } else {
                        frame.reset(event: event, name: name, payload: nil)
                    }
                    #expect(frame.payload == payload && frame.payloadCount == payload?.count ?? 0)
                    for observer in [1, 42, 123_456_789] {
                        let store = OutputStore()
                        let bytes = store.bytes(of: frame.encode(observer: observer, into: store))
                        #expect(bytes == OutboundFrame.event(event: event, observer: observer, name: name, payload: payload).encoded())
                    }
                }
            }
        }
        #expect(frame.capacity >= 9000, "grown for the largest payload")
    }

    /// A post of the same name as the one before keeps the name written in the frames; any
    /// other name is written anew, also one of the same length, or the same text in other
    /// bytes (canonically equivalent, which `==` on String calls equal).
    @Test func aRepeatedNameIsKeptAndAnyOtherWritten() {
        let dotAboveThenBelow = "\u{1E0A}\u{0323}", dotBelowThenAbove = "\u{1E0C}\u{0307}"
        #expect(dotAboveThenBelow == dotBelowThenAbove && Array(dotAboveThenBelow.utf8) != Array(dotBelowThenAbove.utf8))
        let posts: [(Int64, String)] = [
            (7, "bench"), (8, "bench"), (9, "bunch"), (10, "bunch"), (11, "bunch"), (99, "bunch"), (100, "bunch"),
            (101, dotAboveThenBelow), (102, dotBelowThenAbove), (103, "a\"b"), (104, "a\"b"), (105, "bench"),
        ]
        let frame = EventFrame(event: 1, name: "bench", payload: nil)
        for (event, name) in posts {
            frame.reset(event: event, name: name, payload: JSONBytes(OutboundFrameTests.raw("[\(event)]")))
            let store = OutputStore()
            #expect(
                store.bytes(of: frame.encode(observer: 3, into: store))
                    == OutboundFrame.event(event: event, observer: 3, name: name, payload: OutboundFrameTests.raw("[\(event)]")).encoded(),
                "event \(event)")
        }
    }
}
