// BrokerFrameDecoder against the vectors: every frame the scenarios expect from the broker
// and every reply of messages.json, whole, byte by byte and concatenated; malformed frames
// with their exact error; user data of any depth kept byte for byte. No sockets, no broker.
import Foundation
import NotifBusProtocol
import TestSupport
import Testing

/// The vectors folder and the broker→client frames it holds.
enum BrokerVectors {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Protocol/vectors").standardized

    static func load(_ name: String) throws -> JSONValue {
        try JSONValue(parsing: Array(try Data(contentsOf: folder.appendingPathComponent(name))))
    }

    /// Every frame a scenario expects, compared exactly, with its placeholders filled in
    /// (`$any` is a string, `$client:NAME` a client id).
    static func scenarioFrames() throws -> [(name: String, frame: JSONValue)] {
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("scenarios").path)
            .filter { $0.hasSuffix(".json") }.sorted()
        var out: [(String, JSONValue)] = []
        for file in names {
            let scenario = try load("scenarios/" + file)
            for step in scenario["steps"]?.arrayValue ?? [] where step["expect"] != nil {
                guard (step["match"]?.stringValue ?? "exact") == "exact", let frame = step["frame"] else { continue }
                out.append(("\(file): \(frame)", filled(frame)))
            }
        }
        return out
    }

    /// The reply frame each case of messages.json expects (an error's message is the broker's own).
    static func messageReplies() throws -> [(name: String, frame: JSONValue)] {
        try (load("messages.json")["cases"]?.arrayValue ?? []).map { c in
            let expect = c["expect"] ?? .null
            var frame: [String: JSONValue] = ["op": "reply", "id": expect["id"] ?? .null]
            if let code = expect["error"] {
                frame["error"] = ["code": code, "message": "as the broker words it"]
            } else {
                frame["result"] = expect["result"] ?? .null
            }
            return (c["name"]?.stringValue ?? "?", .object(frame))
        }
    }

    static func filled(_ value: JSONValue) -> JSONValue {
        switch value {
        case .string("$any"): return "anything"
        case .string(let s) where s.hasPrefix("$client:"): return "c1"
        case .array(let a): return .array(a.map(filled))
        case .object(let o): return .object(o.mapValues(filled))
        default: return value
        }
    }

    static func framed(_ body: [UInt8]) -> [UInt8] { FrameHeader.encode(length: body.count) + body }
}

/// The JSON object a decoded frame stands for, user data parsed back from its bytes: equal
/// to the frame the broker sent exactly when every member landed where it belongs.
func tree(of frame: BrokerFrame) -> JSONValue {
    func raw(_ bytes: RawJSON) -> JSONValue { (try? JSONValue(parsingAnyDepth: bytes)) ?? "<unparsable>" }
    switch frame {
    case .reply(let r):
        var o: [String: JSONValue] = ["op": "reply"]
        switch r.id {
        case .integer(let i)?: o["id"] = .integer(i)
        case .string(let s)?: o["id"] = .string(s)
        case nil: o["id"] = .null
        }
        switch r.outcome {
        case .result(let bytes): o["result"] = raw(bytes)
        case .error(let f):
            var e: [String: JSONValue] = ["code": .string(f.code), "message": .string(f.message)]
            if let d = f.details { e["details"] = raw(d) }
            o["error"] = .object(e)
        }
        if r.isRepeat { o["repeat"] = true }
        return .object(o)
    case .event(let e):
        return [
            "op": "event", "event": .integer(e.event), "observer": .string(e.observer), "name": .string(e.name),
            "payload": raw(e.payload),
        ]
    case .call(let c):
        return [
            "op": "call", "call": .integer(c.call), "handler": .string(c.handler), "channel": .string(c.channel),
            "method": .string(c.method), "arguments": raw(c.arguments), "from": .string(c.from),
        ]
    case .evicted(.observer(let o, let by)): return ["op": "evicted", "observer": .string(o), "by": .string(by)]
    case .evicted(.handler(let h, let by)): return ["op": "evicted", "handler": .string(h), "by": .string(by)]
    case .seen(let s):
        return ["op": "seen", "dir": .string(s.direction.rawValue), "client": .string(s.client), "frame": raw(s.frame)]
    }
}

/// `[[[ ... 0 ... ]]]`, `depth` arrays deep, and an object chain `{"a":{"a":...}}` alike.
func deepArray(_ depth: Int) -> [UInt8] {
    Array(repeating: UInt8(ascii: "["), count: depth) + Array("0".utf8) + Array(repeating: UInt8(ascii: "]"), count: depth)
}

func deepObject(_ depth: Int) -> [UInt8] {
    var out: [UInt8] = []
    for _ in 0..<depth { out += Array("{\"a\":".utf8) }
    out += Array("null".utf8)
    out += Array(repeating: UInt8(ascii: "}"), count: depth)
    return out
}

@Suite struct BrokerFrameDecoderTests {
    static func allFrames() throws -> [(name: String, frame: JSONValue)] {
        try BrokerVectors.scenarioFrames() + BrokerVectors.messageReplies()
    }

    @Test func vectorsHoldEveryKindOfBrokerFrame() throws {
        let ops = Set(try BrokerVectors.scenarioFrames().compactMap { $0.frame["op"]?.stringValue })
        #expect(ops == [Op.reply, Op.event, Op.call, Op.evicted, Op.seen])
        #expect(try BrokerVectors.messageReplies().count > 300)
    }

    @Test func everyVectorFrameDecodesWhole() throws {
        for (name, frame) in try Self.allFrames() {
            let decoded = try BrokerFrameDecoder.decode(frame.encoded)
            #expect(tree(of: decoded) == frame, "\(name)")
        }
    }

    @Test func everyVectorFrameDecodesByteByByteAndConcatenated() throws {
        let frames = try Self.allFrames().map(\.frame)
        let stream = frames.flatMap { BrokerVectors.framed($0.encoded) }
        var byByte = BrokerFrameDecoder()
        var decoded: [BrokerFrame] = []
        for b in stream {
            byByte.append(CollectionOfOne(b))
            while let frame = try byByte.next() { decoded.append(frame) }
        }
        #expect(decoded.map(tree(of:)) == frames)
        #expect(byByte.pendingByteCount == 0)
        var whole = BrokerFrameDecoder()
        whole.append(stream)
        decoded = []
        while let frame = try whole.next() { decoded.append(frame) }
        #expect(decoded.map(tree(of:)) == frames)
    }

    /// The broker's own member order and spacing, as framing.json records frames it writes.
    @Test func framingVectorsOfBrokerFramesDecode() throws {
        let root = try BrokerVectors.load("framing.json")
        var seen = 0
        for v in root["valid"]?.arrayValue ?? [] {
            guard let op = v["json"]?["op"]?.stringValue, [Op.reply, Op.event, Op.call, Op.evicted, Op.seen].contains(op),
                let hex = v["hex"]?.stringValue
            else { continue }
            var bytes: [UInt8] = []
            var i = hex.startIndex
            while i < hex.endIndex {
                let j = hex.index(i, offsetBy: 2)
                bytes.append(UInt8(hex[i..<j], radix: 16)!)
                i = j
            }
            var decoder = BrokerFrameDecoder()
            decoder.append(bytes)
            let frame = try #require(try decoder.next(), "\(v["name"] ?? "")")
            #expect(tree(of: frame) == v["json"], "\(v["name"] ?? "")")
            seen += 1
        }
        #expect(seen > 0)
    }

    @Test func userDataStaysByteForByte() throws {
        let payload = Array(#"{ "b" : [1, 2.50, "\u00e9"], "a":null }"#.utf8)
        let body = Array(#"{"op":"event","event":3,"observer":"o1","name":"n","payload":"#.utf8) + payload + Array("}".utf8)
        guard case .event(let e) = try BrokerFrameDecoder.decode(body) else { Issue.record("not an event"); return }
        #expect(e.payload == payload)
        let details = Array(#"{"retry" : 5}"#.utf8)
        let reply = Array(#"{"op":"reply","id":9,"error":{"code":"E","message":"m","details":"#.utf8) + details + Array("}}".utf8)
        #expect(
            try BrokerFrameDecoder.decode(reply)
                == .reply(.init(id: .integer(9), outcome: .error(.init(code: "E", message: "m", details: details)))))
        let nullDetails = Array(#"{"op":"reply","id":9,"error":{"code":"E","message":"m","details":null}}"#.utf8)
        #expect(
            try BrokerFrameDecoder.decode(nullDetails)
                == .reply(.init(id: .integer(9), outcome: .error(.init(code: "E", message: "m", details: Array("null".utf8))))))
        let noDetails = Array(#"{"op":"reply","id":"s","error":{"code":"E","message":"m"}}"#.utf8)
        #expect(
            try BrokerFrameDecoder.decode(noDetails)
                == .reply(.init(id: .string("s"), outcome: .error(.init(code: "E", message: "m", details: nil)))))
    }

    /// A payload as deep as a 1 MiB frame allows (what the broker forwards) is kept whole,
    /// and a tree of 10,000 levels is built and written back without recursion.
    @Test func userDataOfAnyDepth() throws {
        for deep in [deepArray(524_000), deepObject(150_000)] {
            let body =
                Array(#"{"op":"call","call":1,"handler":"h1","channel":"c","method":"m","from":"c2","arguments":"#.utf8) + deep
                + Array("}".utf8)
            guard case .call(let c) = try BrokerFrameDecoder.decode(body) else { Issue.record("not a call"); return }
            #expect(c.arguments == deep)
        }
        for deep in [deepArray(10_000), deepObject(10_000)] {
            let value = try JSONValue(parsingAnyDepth: deep)
            #expect(depth(of: value) == 10_000)
            #expect(value.encoded == deep)
        }
    }

    @Test func treesAgreeWithTheBoundedParser() throws {
        let root = try BrokerVectors.load("framing.json")
        for v in root["valid"]?.arrayValue ?? [] {
            guard let json = v["json"] else { continue }
            let text = json.encoded
            #expect(try JSONValue(parsingAnyDepth: text) == (try JSONValue(parsing: text)))
            #expect(json.encoded == text)
        }
        for bad in ["", "[", "[1,]", "{\"a\"}", "{\"a\":1,}", "01", "[1] x", "tru", "{\"a\":1 \"b\":2}", "[\"\u{01}\"]", "-"] {
            #expect(throws: JSONError.self, "\(bad)") { try JSONValue(parsingAnyDepth: Array(bad.utf8)) }
        }
    }

    @Test func malformedFramesAreNamed() throws {
        let cases: [(String, BrokerFrameError)] = [
            ("xyz", .badJSON(JSONError(offset: 0, reason: "unexpected byte"))),
            ("{\"op\":\"reply\",\"id\":1,\"result\":nul}", .badJSON(JSONError(offset: 30, reason: "invalid literal"))),
            ("[1]", .notAnObject),
            ("\"reply\"", .notAnObject),
            ("{}", .missingOp),
            (#"{"op":1}"#, .missingOp),
            (#"{"op":"next","event":1}"#, .unknownOp("next")),
            (#"{"op":"reply","result":1}"#, .missingMember(op: "reply", member: "id")),
            (
                #"{"op":"reply","id":1.0,"result":1}"#,
                .invalidMember(op: "reply", member: "id", expected: "an integer from 0 to 2^53-1, a string or null")
            ),
            (
                #"{"op":"reply","id":-1,"result":1}"#,
                .invalidMember(op: "reply", member: "id", expected: "an integer from 0 to 2^53-1, a string or null")
            ),
            (
                #"{"op":"reply","id":true,"result":1}"#,
                .invalidMember(op: "reply", member: "id", expected: "an integer from 0 to 2^53-1, a string or null")
            ),
            (#"{"op":"reply","id":1}"#, .conflictingMembers(op: "reply", members: "neither 'result' nor 'error'")),
            (
                #"{"op":"reply","id":1,"result":1,"error":{"code":"c","message":"m"}}"#,
                .conflictingMembers(op: "reply", members: "both 'result' and 'error'")
            ),
            (#"{"op":"reply","id":null,"result":1}"#, .conflictingMembers(op: "reply", members: "'id' null and a 'result'")),
            (#"{"op":"reply","id":1,"error":"bad"}"#, .invalidMember(op: "reply", member: "error", expected: "an object")),
            (#"{"op":"reply","id":1,"error":{"message":"m"}}"#, .missingMember(op: "reply error", member: "code")),
            (#"{"op":"reply","id":1,"error":{"code":"c","message":"m","hint":1}}"#, .unknownMember(op: "reply error", member: "hint")),
            (#"{"op":"reply","id":1,"result":1,"extra":null}"#, .unknownMember(op: "reply", member: "extra")),
            (
                #"{"op":"reply","id":1,"result":1,"repeat":1}"#,
                .invalidMember(op: "reply", member: "repeat", expected: "true or false, in a reply to a request")
            ),
            (
                #"{"op":"reply","id":null,"error":{"code":"c","message":"m"},"repeat":true}"#,
                .invalidMember(op: "reply", member: "repeat", expected: "true or false, in a reply to a request")
            ),
            (#"{"op":"reply","id":1,"id":2,"result":1}"#, .duplicateMember(op: "reply", member: "id")),
            (#"{"op":"reply","op":"reply","id":1,"result":1}"#, .duplicateMember(op: "reply", member: "op")),
            (
                #"{"op":"event","event":"1","observer":"o1","name":"n","payload":1}"#,
                .invalidMember(op: "event", member: "event", expected: "an integer")
            ),
            (
                #"{"op":"event","event":1.5,"observer":"o1","name":"n","payload":1}"#,
                .invalidMember(op: "event", member: "event", expected: "an integer")
            ),
            (#"{"op":"event","event":1,"observer":"o1","name":"n"}"#, .missingMember(op: "event", member: "payload")),
            (#"{"op":"event","event":1,"observer":2,"name":"n","payload":1}"#, .invalidMember(op: "event", member: "observer", expected: "a string")),
            (#"{"op":"call","call":1,"handler":"h1","channel":"c","method":"m","arguments":null}"#, .missingMember(op: "call", member: "from")),
            (#"{"op":"evicted","by":"o2"}"#, .conflictingMembers(op: "evicted", members: "neither 'observer' nor 'handler'")),
            (
                #"{"op":"evicted","observer":"o1","handler":"h1","by":"o2"}"#,
                .conflictingMembers(op: "evicted", members: "both 'observer' and 'handler'")
            ),
            (#"{"op":"evicted","observer":"o1"}"#, .missingMember(op: "evicted", member: "by")),
            (#"{"op":"seen","dir":"sideways","client":"c1","frame":{}}"#, .invalidMember(op: "seen", member: "dir", expected: "\"in\" or \"out\"")),
            (#"{"op":"seen","dir":"in","client":"c1","frame":[]}"#, .invalidMember(op: "seen", member: "frame", expected: "an object")),
        ]
        for (text, expected) in cases {
            #expect(throws: expected, "\(text)") { try BrokerFrameDecoder.decode(Array(text.utf8)) }
        }
        var zero = BrokerFrameDecoder()
        zero.append([0, 0, 0, 0])
        #expect(throws: BrokerFrameError.zeroLength) { try zero.next() }
        #expect(BrokerFrameError.zeroLength.description == "a frame of length 0")
    }

    /// A frame whose length says more than has come waits for the rest, however long it is:
    /// the broker's frames may exceed its own `maxFrame`.
    @Test func incompleteFramesWait() throws {
        let body = Array(#"{"op":"reply","id":1,"result":"#.utf8) + Array(repeating: UInt8(ascii: " "), count: 2_000_000) + Array("1}".utf8)
        let framed = BrokerVectors.framed(body)
        var decoder = BrokerFrameDecoder()
        decoder.append(framed.prefix(framed.count - 1))
        #expect(try decoder.next() == nil)
        decoder.append(framed.suffix(1))
        #expect(try decoder.next() == .reply(.init(id: .integer(1), outcome: .result(Array("1".utf8)))))
        #expect(try decoder.next() == nil)
    }
}
