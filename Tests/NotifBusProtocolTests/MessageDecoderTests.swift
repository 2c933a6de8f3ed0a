// The message decoder's classification and rejections, at the protocol layer.
import NotifBusProtocol
import Testing

func decode(_ text: String) -> DecodeResult {
    MessageDecoder.decode(Array(text.utf8))
}

@Suite struct MessageDecoderTests {
    @Test func requestsDecode() {
        guard case .decoded(.request(let id, .subscribe(let events, let priority, let key, false)), false) =
                decode(#"{"op":"subscribe","id":"s1","events":["a","b"],"priority":-3,"key":"k"}"#) else {
            Issue.record("subscribe did not decode")
            return
        }
        #expect(id == .string("s1") && events == ["a", "b"] && priority == -3 && key == "k")
        guard case .decoded(.request(_, .post(let name, let payload, let profile)), false) =
                decode(#"{"op":"post","id":1,"name":"e","payload": [1, {"a":2}] }"#) else {
            Issue.record("post did not decode")
            return
        }
        #expect(name == "e" && profile == nil)
        #expect(payload.map { String(decoding: $0, as: UTF8.self) } == #"[1, {"a":2}]"#)
        guard case .decoded(.request(_, .hello(1, nil)), true) = decode(#"{"op":"hello","id":0,"protocol":1,"name":null}"#) else {
            Issue.record("hello did not decode")
            return
        }
    }

    @Test func answersDecodeWithoutID() {
        guard case .decoded(.answer(.complete(12, let value)), false) = decode(#"{"op":"complete","event":12,"value":{"x":[]}}"#) else {
            Issue.record("complete did not decode")
            return
        }
        #expect(value.map { String(decoding: $0, as: UTF8.self) } == #"{"x":[]}"#)
        guard case .decoded(.answer(.complete(1, nil)), false) = decode(#"{"op":"complete","event":1,"value":null}"#) else {
            Issue.record("complete with null value did not decode")
            return
        }
        guard case .rejected(let r, false) = decode(#"{"op":"next","event":1,"id":3}"#) else {
            Issue.record("answer with id accepted")
            return
        }
        #expect(r.id == nil && r.code == .badRequest)
        guard case .decoded(.callReturn(let ret), false) = decode(#"{"op":"return","call":4,"result":null}"#),
              case .result(let raw) = ret.body else {
            Issue.record("return did not decode")
            return
        }
        #expect(ret.call == 4 && raw == Array("null".utf8))
    }

    @Test func rejectionsCarryCodesAndIDs() {
        let cases: [(String, RequestID?, ErrorCode)] = [
            (#"{"op":"ping"}"#, nil, .badRequest),
            (#"{"id":1}"#, .integer(1), .badRequest),
            (#"{"op":"what","id":2}"#, .integer(2), .unknownOp),
            (#"{"op":"ping","id":3,"x":1}"#, .integer(3), .badRequest),
            (#"{"op":"post","id":4,"name":"willPresent","payload":{}}"#, .integer(4), .invalidPayload),
            (#"{"op":"setCategories","id":5,"categories":[{"identifier":"A","actions":[],"options":["x"]}]}"#, .integer(5), .badRequest),
        ]
        for (text, id, code) in cases {
            guard case .rejected(let r, _) = decode(text) else {
                Issue.record("accepted: \(text)")
                continue
            }
            #expect(r.id == id && r.code == code, "\(text): \(r)")
        }
        guard case .badJSON = decode("[1]") else {
            Issue.record("array accepted")
            return
        }
    }
}
