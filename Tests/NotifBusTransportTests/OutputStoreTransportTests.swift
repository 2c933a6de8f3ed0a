// The broker's output written straight from the core's output store, over real socket pairs:
// the replies to a burst of requests are kept as one range and written from the store by the
// turn's flush, mirrors interleaved with them arrive whole and in order, and once a turn has
// flushed no connection keeps a range and the store is empty again. Every wait is bounded.
import Glibc
import NotifBusCore
import NotifBusProtocol
import Testing

@testable import NotifBusTransport

@Suite struct OutputStoreTransportTests {
    /// `count` pings with ids 0..<count, framed, for one write.
    static func pings(_ count: Int) -> [UInt8] {
        var burst: [UInt8] = []
        for i in 0..<count {
            let body = utf8("{\"op\":\"ping\",\"id\":\(i)}")
            burst += FrameHeader.encode(length: body.count) + body
        }
        return burst
    }

    @Test func aBurstsRepliesAreOneRangeWrittenFromTheStore() throws {
        let h = try ServerHarness()
        let (id, peer) = try h.connect()
        try h.greet(peer)
        let connection = try #require(h.server.connections[id])
        peer.sendRaw(OutputStoreTransportTests.pings(100))
        // One read hands the core all 100 pings; applying their actions only queues.
        h.server.readable(connection)
        let kept = try #require(connection.kept, "the replies were copied instead of kept")
        #expect(kept.count == h.server.output.count, "the 100 replies are not one range")
        #expect(connection.pendingOutputBytes == kept.count)
        h.server.flushPending()
        #expect(connection.kept == nil && connection.pendingOutputBytes == 0)
        #expect(h.server.output.count == 0, "the store was not reset after the flush")
        var replies: [JSONValue] = []
        #expect(
            h.turn(
                until: {
                    replies += peer.frames()
                    return replies.count >= 100
                }, reading: peer))
        #expect(replies.map { $0["id"] } == (0..<100).map { JSONValue.integer(Int64($0)) })
        #expect(replies.allSatisfy { $0["result"] == .object([:]) })
    }

    @Test func repliesAndMirrorsArriveWholeAndInOrder() throws {
        let h = try ServerHarness()
        let (pingerID, pinger) = try h.connect()
        try h.greet(pinger)
        let (monitorID, monitor) = try h.connect()
        try h.greet(monitor)
        monitor.send(#"{"op":"monitor","id":1}"#)
        var monitorReplies: [JSONValue] = []
        h.turn(
            until: {
                monitorReplies += monitor.frames()
                return !monitorReplies.isEmpty
            }, reading: monitor)
        #expect(monitorReplies.first?["result"] == .object([:]))

        // Each ping's reply lies between two mirrors in the store: the pinger's replies and
        // the monitor's mirrors are each kept as ranges apart, and both keep their order.
        pinger.sendRaw(OutputStoreTransportTests.pings(100))
        var replies: [JSONValue] = []
        var mirrors: [JSONValue] = []
        #expect(
            h.turn(
                until: {
                    monitor.readAvailable()
                    replies += pinger.frames()
                    mirrors += monitor.frames()
                    return replies.count >= 100 && mirrors.count >= 200
                }, reading: pinger))
        #expect(replies.map { $0["id"] } == (0..<100).map { JSONValue.integer(Int64($0)) })
        #expect(mirrors.count == 200)
        for (i, pair) in stride(from: 0, to: mirrors.count - 1, by: 2).enumerated() {
            let (seenIn, seenOut) = (mirrors[pair], mirrors[pair + 1])
            #expect(seenIn["dir"] == "in" && seenIn["client"] == .string("c\(pingerID)"))
            #expect(seenIn["frame"]?["op"] == "ping" && seenIn["frame"]?["id"] == .integer(Int64(i)))
            #expect(seenOut["dir"] == "out" && seenOut["frame"]?["op"] == "reply" && seenOut["frame"]?["id"] == .integer(Int64(i)))
        }
        #expect(h.server.connections[pingerID]?.kept == nil && h.server.connections[monitorID]?.kept == nil)
        #expect(h.server.output.count == 0)
    }
}
