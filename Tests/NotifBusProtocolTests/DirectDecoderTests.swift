// The decoder's direct path: it takes the per-event frames as the clients write them, compact
// (op first, as the Swift, Python and JavaScript clients do, or in any other order, keys sorted say),
// declines what it does not decode whole, and agrees with the full decoder wherever it decodes.
import NotifBusProtocol
import Testing

@Suite struct DirectDecoderTests {
    static let arguments = #"{"emailId":"e-1","n":[1,2.5,-3e2,true,null],"t":"a\"b\u00e9"}"#

    /// Frames of the per-event path in the orders clients write them.
    static let clientFrames = [
        #"{"op":"ping","id":1}"#, #"{"id":9007199254740991,"op":"ping"}"#,
        #"{"arguments":\#(arguments),"channel":"mail","id":2,"method":"open","op":"invoke"}"#,
        #"{"op":"invoke","id":2,"channel":"mail","method":"open","arguments":\#(arguments)}"#,
        #"{"op":"invoke","id":2,"channel":"mail","method":"open"}"#,
        #"{"op":"invoke","id":2,"channel":"mail","method":"open","arguments":null}"#,
        #"{"id":3,"name":"mail","op":"post","payload":\#(arguments)}"#, #"{"op":"post","id":3,"name":"é","payload":"x"}"#,
        #"{"op":"post","id":3,"name":"n"}"#, #"{"call":4,"op":"return","result":\#(arguments)}"#,
        // Past 18 digits, while in the range of Int64: the one integer parser reads them too.
        #"{"op":"next","event":1234567890123456789}"#, #"{"op":"stop","event":-9223372036854775808}"#,
        #"{"op":"return","call":-4,"result":null}"#, #"{"event":5,"op":"next"}"#, #"{"op":"stop","event":123456789012345678}"#,
        #"{"event":5,"op":"complete","value":["badge","sound"]}"#, #"{"op":"complete","event":5}"#,
        #"{"op":"complete","event":5,"value":null}"#, #"{"op":"complete","event":5,"value":[ 1 , {"a" : 2} ]}"#,
        #"{"op":"post","id":3,"name":"mail","once":"nats/dev-1/42","payload":\#(arguments)}"#,
        #"{"op":"post","id":3,"name":"mail","once":"k"}"#, #"{"op":"post","id":3,"name":"mail","once":"k","payload":null}"#,
        #"{"id":3,"name":"mail","once":"k","op":"post","payload":\#(arguments)}"#,
        #"{"name":"mail","op":"post","id":3,"payload":[1],"once":"k"}"#,
    ]

    /// Frames the direct path leaves to the full decoder, which accepts or rejects them.
    static let declined = [
        #"{"op":"ping","id":"s1"}"#, #"{"op":"ping","id":-1}"#, #"{"op":"ping","id":9007199254740992}"#, #"{"op":"ping","id":1.0}"#,
        #"{"op":"ping","id":1,"id":2}"#, #"{"":1,"op":"ping","id":1}"#, #"{"op":"ping","id":1,"":1}"#, #"{"op":"ping","id":1,"x":1}"#,
        #"{"op":"ping","id":1,"event":1}"#,
        #"{"op":"p\u0069ng","id":1}"#, #"{"\u006fp":"ping","id":1}"#, #"{"op":"hello","id":1,"protocol":1}"#,
        #"{"op":"invoke","id":2,"channel":"m\u0061il","method":"open"}"#, #"{"op":"invoke","id":2,"channel":"","method":"open"}"#,
        #"{"op":"invoke","id":2,"method":"open"}"#,
        #"{"op":"invoke","id":2,"channel":"mail","method":"open","":[1]}"#,
        #"{"op":"invoke","id":2,"channel":"mail","method":"open","arguments":[1,}"#,
        #"{"op":"post","id":3,"name":"didReceive","payload":{}}"#, #"{"op":"post","id":3,"name":null}"#,
        #"{"op":"return","call":4,"error":{"code":"c","message":"m"}}"#, #"{"op":"return","call":4}"#,
        #"{"op":"next","event":1e2}"#, #"{"op":"next","event":01}"#, #"{"op":"next","event":9223372036854775808}"#,
        #"{"op":"next","event":12345678901234567890}"#,
        #"{"op":"next","event":5}x"#, #" { "op" : "next" , "event" : 5 } "#, #"{"op":"next","event":5} "#,
        #"{"op":"next","event":[5]}"#, #"{"op":"completed","event":5}"#,
        #"{"op":"complete"}"#, #"{"op":"","event":5}"#, #"{"op":"next","event":5,}"#, #"{}"#, #"[1]"#, #"{"op":"next","event":5"#,
        #"{"op":"post","id":3,"name":"n","once":"k\u0041"}"#, #"{"op":"post","id":3,"name":"n","once":""}"#,
        #"{"op":"post","id":3,"name":"n","once":null}"#, #"{"op":"post","id":3,"name":"n","once":1}"#,
        #"{"op":"ping","id":1,"once":"k"}"#, #"{"op":"invoke","id":2,"channel":"c","method":"m","once":"k"}"#,
        #"{"op":"post","id":3,"name":"n","once":"k","once":"k"}"#, #"{"op":"next","event":5,"once":"k"}"#,
    ]

    /// The full decoder's result for `text`, written out (`DecodeResult.summary`).
    static func full(_ text: String) -> String {
        Array(text.utf8).withUnsafeBytes { MessageDecoder.decodeFull($0).summary }
    }

    /// The direct path's result for `text`, written out; nil when it declines the frame.
    static func direct(_ text: String) -> String? {
        Array(text.utf8).withUnsafeBytes { body in
            guard let result = MessageDecoder.decodeDirect(body) else { return nil }
            return result.summary
        }
    }

    @Test(arguments: clientFrames) func clientFramesTakeTheDirectPath(_ text: String) {
        guard let direct = Self.direct(text) else {
            Issue.record("declined: \(text)")
            return
        }
        guard direct.hasPrefix("decoded(") else {
            Issue.record("not decoded: \(direct)")
            return
        }
        #expect(direct == Self.full(text), "\(text)")
    }

    @Test(arguments: declined) func whatTheDirectPathDeclinesTheFullDecoderJudges(_ text: String) {
        #expect(Self.direct(text) == nil, "\(text)")
        #expect(MessageDecoder.decode(Array(text.utf8)).summary == Self.full(text), "\(text)")
    }

    /// Client frames whose members come in the order the Python, JavaScript and C clients
    /// write them.
    static let inOrderFrames =
        clientFrames.filter { $0.hasPrefix(#"{"op":"#) } + [
            #"{"op":"invoke","id":0,"channel":"c","method":"m","arguments":"x"}"#, #"{"op":"post","id":3,"name":"bench","payload":null}"#,
            #"{"op":"next","event":-5}"#, #"{"op":"return","call":1,"result":{"a":[]}}"#,
        ]

    @Test(arguments: inOrderFrames) func framesInClientOrderAreDecodedByWordCompares(_ text: String) {
        #expect(Array(text.utf8).withUnsafeBytes { DirectFrame.decodesInOrder($0) }, "\(text)")
        #expect(Self.direct(text) == Self.full(text), "\(text)")
    }

    @Test func theSwiftClientsMessageEncodingTakesTheInOrderPath() {
        let arguments = JSONValue.object(["z": .integer(1), "a": .array([.string("x"), .null])])
        let messages: [JSONValue] = [
            .object(["id": .integer(1), "op": .string("ping")]),
            .object(["method": .string("m"), "arguments": arguments, "op": .string("invoke"), "channel": .string("c"), "id": .integer(2)]),
            .object(["payload": arguments, "name": .string("n"), "id": .integer(3), "op": .string("post")]),
            .object(["payload": arguments, "once": .string("k"), "name": .string("n"), "id": .integer(3), "op": .string("post")]),
            .object(["result": arguments, "call": .integer(4), "op": .string("return")]),
            .object(["event": .integer(5), "op": .string("next")]), .object(["op": .string("stop"), "event": .integer(6)]),
            .object(["value": .array([]), "event": .integer(7), "op": .string("complete")]),
        ]
        for message in messages {
            let body = message.messageEncoded
            #expect(body.withUnsafeBytes { DirectFrame.decodesInOrder($0) }, "\(String(decoding: body, as: UTF8.self))")
            #expect((try? JSONValue(parsing: body)) == message)
        }
        let text = String(
            decoding: JSONValue.object(["x": .integer(1), "id": .integer(9), "op": .string("hello"), "b": .null]).messageEncoded, as: UTF8.self)
        #expect(text == #"{"op":"hello","id":9,"b":null,"x":1}"#)
    }

    @Test func framesInAnotherOrderAreLeftToTheGeneralLoop() {
        for text in Self.clientFrames where !text.hasPrefix(#"{"op":"#) {
            #expect(!Array(text.utf8).withUnsafeBytes { DirectFrame.decodesInOrder($0) }, "\(text)")
        }
    }

    /// Every byte of each in-order frame replaced by bytes that end or break a member, and the
    /// frame cut at every length: both paths give the reference decoder's result.
    @Test(arguments: inOrderFrames) func everyByteOfAnInOrderFrameChangedAndEveryCut(_ text: String) {
        let bytes = Array(text.utf8)
        for i in bytes.indices {
            for b in Array(#"\"\ },:x1-{n"#.utf8) + [0x00, 0xC3] where b != bytes[i] {
                var changed = bytes
                changed[i] = b
                sameDecoding(changed)
            }
            sameDecoding(Array(bytes[..<i]))
        }
    }

    /// A byte that ends or breaks a member inserted at every place of each client frame, in
    /// either order: a NUL byte or another control byte inside a key or an op (`"id\0"`,
    /// `"post\0"`) must not read as the name without it.
    @Test(arguments: clientFrames) func everyClientFrameWithAByteInsertedAnywhere(_ text: String) {
        let bytes = Array(text.utf8)
        for i in 0...bytes.count {
            for b: UInt8 in [0x00, 0x01, 0x1F, 0x7F, 0x80, UInt8(ascii: "\""), UInt8(ascii: "\\")] {
                var changed = bytes
                changed.insert(b, at: i)
                sameDecoding(changed)
                changed.insert(0x00, at: i)
                sameDecoding(changed)
            }
        }
    }

    @Test func userDataIsSeenInPlace() {
        let body = Array(#"{"op":"invoke","id":2,"channel":"mail","method":"open","arguments":[1]}"#.utf8)
        body.withUnsafeBytes { buffer in
            guard case .decoded(.request(_, .invoke(let channel, let method, let arguments?)), false)? = MessageDecoder.decodeDirect(buffer)
            else {
                Issue.record("invoke not decoded")
                return
            }
            #expect(channel.isInPlace && method.isInPlace && arguments.isInPlace)
            #expect(channel.text == "mail" && method.text == "open" && arguments.bytes == Array("[1]".utf8))
        }
    }
}
