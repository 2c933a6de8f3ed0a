// The user data a decoded frame carries is a view of the read buffer (`JSONBytes` in place):
// these tests overwrite that buffer right after `receive` and check that what the core keeps
// beyond the call (a held-back invoke, a queued post) still carries the bytes the peer sent.
import NotifBusCore
import NotifBusProtocol
import Testing

@Suite struct InPlaceUserDataTests {
    /// Feeds `text` from `c` out of a buffer that is overwritten once `receive` returns, and
    /// returns the actions the frame caused at once.
    static func receiveThenOverwrite(_ h: inout CoreHarness, _ c: ConnectionID, _ text: String) -> [BrokerAction] {
        var body = Array(text.utf8)
        var actions: [BrokerAction] = []
        body.withUnsafeBytes { h.broker.receive($0, from: c, now: h.now, into: &actions) }
        body.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: UInt8(ascii: "x")) }
        return actions
    }

    @Test func aHeldBackInvokeKeepsItsArguments() {
        var h = CoreHarness()
        h.holdWrites = true
        let handler = h.connect(), invoker = h.connect()
        #expect(h.request(handler, #"{"op":"handle","id":1,"channel":"ch"}"#)["result"]?["handler"] == "h1")
        // The second put waits for the first (same slot), and the invoke behind it.
        h.send(invoker, #"{"op":"put","id":1,"slot":"s","value":1}"#)
        h.send(invoker, #"{"op":"put","id":2,"slot":"s","value":2}"#)
        let arguments = #"{"a":[1,2,{"b":"\u00e9"}]}"#
        let now = InPlaceUserDataTests.receiveThenOverwrite(
            &h, invoker, #"{"op":"invoke","id":3,"channel":"ch","method":"m","arguments":\#(arguments)}"#)
        #expect(now.isEmpty, "the invoke was not held back")
        #expect(h.nothingSent(to: handler))
        h.finishWrite()
        let call = h.take(handler)
        #expect(call.frame["op"] == "call")
        #expect(call.raw.contains(#","arguments":\#(arguments),"#), "call frame: \(call.raw)")
    }

    /// A keyed post of the per-event path held behind a write is kept as its frame and
    /// decoded again when it starts: its key and payload are the ones sent.
    @Test func aHeldBackKeyedPostKeepsItsKeyAndPayload() {
        var h = CoreHarness()
        h.holdWrites = true
        let observer = h.connect(), poster = h.connect()
        _ = h.subscribe(observer, ["e"])
        // The second put waits for the first (same slot), and the post behind it.
        h.send(poster, #"{"op":"put","id":1,"slot":"s","value":1}"#)
        h.send(poster, #"{"op":"put","id":4,"slot":"s","value":2}"#)
        let payload = #"{"k":[1,"\u00e9"]}"#
        let now = InPlaceUserDataTests.receiveThenOverwrite(
            &h, poster, #"{"op":"post","id":2,"name":"e","once":"held-1","payload":\#(payload)}"#)
        #expect(now.isEmpty, "the post was not held back")
        // From here on every write (the put's, the post's records) is reported at once.
        h.holdWrites = false
        h.finishWrite()
        #expect(h.take(poster).frame["id"] == 1 && h.take(poster).frame["id"] == 4)
        let event = h.take(observer)
        #expect(event.raw.hasSuffix(#","payload":\#(payload)}"#), "event frame: \(event.raw)")
        h.send(observer, #"{"op":"next","event":\#(event.frame["event"]?.intValue ?? 0)}"#)
        #expect(h.take(poster).frame["result"]?["outcome"] == "unhandled")
        // Its key holds: the same post again is answered as a repeat, and goes nowhere.
        h.send(poster, #"{"op":"post","id":3,"name":"e","once":"held-1","payload":\#(payload)}"#)
        let repeated = h.take(poster)
        #expect(repeated.frame["repeat"] == true && repeated.frame["result"]?["outcome"] == "unhandled", "\(repeated.raw)")
        #expect(h.nothingSent(to: observer))
    }

    @Test func aQueuedPostKeepsItsPayload() {
        var h = CoreHarness()
        let observer = h.connect(), poster = h.connect()
        _ = h.subscribe(observer, ["e"])
        h.send(poster, #"{"op":"post","id":1,"name":"e","payload":"first"}"#)
        let first = h.expectEvent(observer)
        let payload = #"{"second":[true,null,-1.5e3]}"#
        let now = InPlaceUserDataTests.receiveThenOverwrite(&h, poster, #"{"op":"post","id":2,"name":"e","payload":\#(payload)}"#)
        #expect(now.isEmpty, "the post was not queued")
        h.send(observer, #"{"op":"next","event":\#(first.event)}"#)
        #expect(h.take(poster).frame["result"]?["outcome"] == "unhandled")
        let event = h.take(observer)
        #expect(event.frame["op"] == "event")
        #expect(event.raw.hasSuffix(#","payload":\#(payload)}"#), "event frame: \(event.raw)")
    }

    /// A channel and method written with escapes route by their text, and the call frame
    /// writes them as the broker writes any string; written plainly (raw UTF-8 included),
    /// their bytes are copied as they came.
    @Test func namesRouteByTheirTextAndAreWrittenAsBefore() {
        var h = CoreHarness()
        let handler = h.connect(), invoker = h.connect()
        _ = h.request(handler, #"{"op":"handle","id":1,"channel":"caf\u00e9","method":"m/1"}"#)
        h.send(invoker, #"{"op":"invoke","id":2,"channel":"caf\u00e9","method":"m\/1"}"#)
        let escaped = h.take(handler)
        #expect(escaped.raw.contains(#","channel":"café","method":"m/1","#), "call frame: \(escaped.raw)")
        h.send(invoker, #"{"op":"invoke","id":3,"channel":"café","method":"m/1"}"#)
        let plain = h.take(handler)
        #expect(plain.raw.contains(#","channel":"café","method":"m/1","#), "call frame: \(plain.raw)")
        h.send(invoker, #"{"op":"invoke","id":4,"channel":"cafe","method":"m/1"}"#)
        #expect(errorCode(h.take(invoker).frame) == "not_implemented")
    }
}
