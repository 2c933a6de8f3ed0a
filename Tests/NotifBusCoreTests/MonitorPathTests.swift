// A frame does the same whether or not a monitor is attached: the path a frame takes through
// the decoders does not depend on who watches, and every other client gets the same bytes in
// the same order, while the monitor is shown each frame.
import NotifBusCore
import NotifBusProtocol
import Testing

@Suite struct MonitorPathTests {
    /// Every op the per-event path reads (ping, post with and without a key, invoke, the
    /// answers `next` and `complete`, `return`), and a few it leaves to the full decoder:
    /// the frames every client but the monitor got, and how many the monitor got.
    static func session(monitored: Bool) -> (frames: [String], shown: Int) {
        var h = CoreHarness()
        let observer = h.connect(name: "observer")
        let second = h.connect(name: "second")
        let handler = h.connect(name: "handler")
        let poster = h.connect(name: "poster")
        var monitor: ConnectionID? = nil
        if monitored {
            let m = h.connect(name: "monitor")
            #expect(h.request(m, #"{"op":"monitor","id":1}"#)["result"] == [:])
            monitor = m
        }
        _ = h.subscribe(observer, ["mail"], priority: 10)
        _ = h.subscribe(second, ["mail"], priority: 20)
        _ = h.request(handler, #"{"op":"handle","id":2,"channel":"ch"}"#)
        h.send(poster, #"{"op":"ping","id":3}"#)
        h.send(poster, #"{"op":"post","id":4,"name":"mail","payload":{"n":1,"s":"\u00e9"}}"#)
        h.send(observer, #"{"op":"next","event":1}"#)
        h.send(second, #"{"op":"complete","event":1,"value":{"shown":true}}"#)
        h.send(poster, #"{"op":"post","id":5,"name":"mail","once":"k-1","payload":[1,2]}"#)
        h.send(observer, #"{"op":"complete","event":2,"value":"done"}"#)
        h.send(poster, #"{"op":"post","id":6,"name":"mail","once":"k-1","payload":[1,2]}"#)
        h.send(poster, #"{"op":"invoke","id":7,"channel":"ch","method":"m","arguments":{"a":[true,null]}}"#)
        h.send(handler, #"{"op":"return","call":1,"result":{"ok":1}}"#)
        h.send(poster, #"{"op":"post","id":8,"name":"nobody","payload":null}"#)
        h.send(poster, #"{"op":"peek","id":9,"slot":"launch"}"#)
        let frames = h.sent.filter { $0.to != monitor }.map { "c\($0.to) \($0.raw)" }
        let shown = h.sent.filter { $0.to == monitor }.count
        return (frames, shown)
    }

    @Test func aFrameDoesTheSameWithAndWithoutAMonitor() {
        let plain = MonitorPathTests.session(monitored: false)
        let watched = MonitorPathTests.session(monitored: true)
        #expect(plain.frames == watched.frames)
        #expect(plain.frames.count == 11, "\(plain.frames)")
        // Each frame in and out of the other clients after the monitor attached, once.
        #expect(watched.shown >= plain.frames.count)
    }
}
