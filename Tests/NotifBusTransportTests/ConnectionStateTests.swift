// A connection's states over real socket pairs, with the real core behind the server:
// closing flushes everything queued before the end of the stream, draining reads and drops
// until the peer closes or its deadline passes, a peer that does not read is cut off at
// its output bound, and a closed connection holds no event, no descriptor and no memory.
// Every wait is bounded; the loop is turned, never slept on.
import CLibevent
import Glibc
import NotifBusCore
import NotifBusProtocol
import Testing

@testable import NotifBusTransport

@Suite struct ConnectionStateTests {
    /// A slot value whose every `peek` reply is about 20 KB, so that a few of them fill
    /// a small socket buffer.
    static let bigValue = "\"" + String(repeating: "x", count: 20_000) + "\""

    /// Greets, stores `bigValue` in slot "big" and sends `count` peeks of it without
    /// reading their replies. The broker end's send buffer is small, so output backs up.
    static func queuePeeks(_ h: ServerHarness, count: Int, maxWaitForBackup: Bool = true) throws -> (ConnectionID, Peer) {
        let (id, peer) = try h.connect(sendBufferBytes: 4096)
        try h.greet(peer)
        peer.send(#"{"op":"put","id":1,"slot":"big","value":"# + bigValue + "}")
        var put: [JSONValue] = []
        h.turn(
            until: {
                put += peer.frames()
                return !put.isEmpty
            }, reading: peer)
        #expect(put.first?["result"]?["replaced"] == .bool(false))
        for i in 0..<count { peer.send("{\"op\":\"peek\",\"id\":\(i + 2),\"slot\":\"big\"}") }
        return (id, peer)
    }

    @Test func closingDeliversEverythingQueuedThenDrainsUntilThePeerCloses() throws {
        let h = try ServerHarness()
        let baseline = h.addedEvents
        let (id, peer) = try ConnectionStateTests.queuePeeks(h, count: 10)
        weak let watched = h.server.connections[id]
        #expect(h.turn(until: { (watched?.writeArmed ?? false) && watched?.pendingOutputBytes ?? 0 > 100_000 }))
        #expect(watched?.state == .open)
        // A zero length prefix: the core answers frame_too_large and closes the connection.
        peer.sendRaw([0, 0, 0, 0])
        #expect(h.turn(until: { watched?.isClosing ?? false }))
        #expect(watched?.state == .closing(thenDrain: true))
        #expect(watched?.pendingOutputBytes ?? 0 > 0)
        #expect(!h.coreHasClients)
        // Reading stopped; writing waits, bounded by the closing timeout.
        #expect(watched.map { event_pending($0.readEvent, Int16(EV_READ), nil) } == 0)
        #expect(watched.map { event_pending($0.writeEvent, Int16(EV_WRITE | EV_TIMEOUT), nil) } == Int32(EV_WRITE | EV_TIMEOUT))

        #expect(h.turn(until: { peer.sawEnd }, reading: peer))
        let frames = peer.frames()
        #expect(frames.count == 11)
        for (i, frame) in frames.prefix(10).enumerated() {
            #expect(frame["id"] == .integer(Int64(i + 2)))
            #expect(frame["result"]?.stringValue?.count == 20_000)
        }
        #expect(errorCode(frames.last) == "frame_too_large")
        #expect(!peer.resetByBroker)
        guard case .draining = watched?.state else {
            Issue.record("after the flush the connection is \(String(describing: watched?.state)), not draining")
            return
        }
        // Still draining: what the peer sends now is read and dropped, not answered with a reset.
        #expect(peer.trySend(Array(repeating: 7, count: 1000)) == nil)
        _ = h.server.turn(maxWaitMs: 0)
        #expect(watched.map { if case .draining = $0.state { true } else { false } } == true)
        peer.closeEnd()
        #expect(h.turn(until: { h.server.connections[id] == nil }))
        // Closed: the object is gone with its events and buffers.
        #expect(watched == nil)
        #expect(h.addedEvents == baseline)
        #expect(h.server.bufferedBytes == 0)
    }

    @Test func drainingEndsAtItsDeadline() throws {
        let h = try ServerHarness()
        let (id, peer) = try h.connect()
        try h.greet(peer)
        weak let watched = h.server.connections[id]
        peer.sendRaw([0, 0, 0, 0])
        #expect(h.turn(until: { peer.sawEnd }, reading: peer))
        #expect(errorCode(peer.frames().last) == "frame_too_large")
        // The peer neither writes nor closes: the broker closes after the drain timeout.
        #expect(h.turn(until: { watched == nil }, timeoutMs: 10 * UInt64(BrokerServer.drainTimeoutMs)))
        #expect(h.server.connections.isEmpty)
        // Now closed for good: a send finds no one.
        #expect(peer.trySend([1, 2, 3]) == EPIPE)
    }

    @Test func aPeerThatHungUpStillGetsItsOutputThenTheConnectionCloses() throws {
        let h = try ServerHarness()
        let (id, peer) = try ConnectionStateTests.queuePeeks(h, count: 5)
        weak let watched = h.server.connections[id]
        #expect(h.turn(until: { watched?.writeArmed ?? false }))
        shutdown(peer.fd, Int32(SHUT_WR))
        // The broker reads the end of the stream: the core is told, the output still goes.
        #expect(h.turn(until: { watched?.isClosing ?? false }))
        #expect(watched?.state == .closing(thenDrain: false))
        #expect(!h.coreHasClients)
        #expect(h.turn(until: { peer.sawEnd }, reading: peer))
        let frames = peer.frames()
        #expect(frames.map(\.["id"]) == (2...6).map { .integer(Int64($0)) })
        #expect(h.turn(until: { watched == nil }))
    }

    @Test func readingPausesWhileTheCoreHoldsRequestsBackAndResumesAfterTheWrite() throws {
        let state = try TempFolder()
        let h = try ServerHarness {
            $0.stateDirectory = state.path + "/state"
            $0.core.maxHeldBackPerConnection = 4
        }
        let (id, peer) = try h.connect()
        try h.greet(peer)
        guard let connection = h.server.connections[id] else { throw TestFailure("no connection") }
        // Twenty writes to one slot in one read: the first is written, the next wait behind it.
        for i in 1...20 { peer.send("{\"op\":\"put\",\"id\":\(i),\"slot\":\"s\",\"value\":\(i)}") }
        var ready = pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)
        #expect(poll(&ready, 1, 10_000) == 1)
        h.server.readable(connection)
        #expect(connection.state == .open && connection.inputPaused)
        #expect(event_pending(connection.readEvent, Int16(EV_READ), nil) == 0)
        #expect(!connection.pendingInput.isEmpty)
        // The write is synced and answered; the frames already read go on, then the socket.
        var replies: [JSONValue] = []
        #expect(
            h.turn(
                until: {
                    replies += peer.frames()
                    return replies.count == 20
                }, reading: peer))
        #expect(replies.map(\.["id"]) == (1...20).map { .integer(Int64($0)) })
        #expect(replies.allSatisfy { $0["result"] != nil })
        #expect(!connection.inputPaused && connection.pendingInput.isEmpty)
        #expect(event_pending(connection.readEvent, Int16(EV_READ), nil) == Int32(EV_READ))
        #expect(h.server.journal?.slots["s"] == utf8("20"))
    }

    @Test func aPeerThatDoesNotReadIsCutOffAtItsOutputBound() throws {
        let bound = 64 << 10
        let h = try ServerHarness { $0.maxOutputBytes = bound }
        let (id, peer) = try ConnectionStateTests.queuePeeks(h, count: 20)
        weak let watched = h.server.connections[id]
        #expect(h.turn(until: { watched == nil }))
        // The core heard of it as an input once the actions were applied.
        #expect(!h.coreHasClients)
        #expect(h.server.lost.isEmpty)
        #expect(h.server.bufferedBytes == 0)
        // The peer got part of its replies (what the kernel took), then the end.
        #expect(h.turn(until: { peer.sawEnd }, reading: peer))
        let frames = peer.frames()
        #expect(frames.count < 20)
        #expect(peer.received < bound + 2 * 20_100 + 65536)
    }

    @Test func theConnectionHoldingTheMostIsCutOffOverTheBufferBudget() throws {
        let budget = 32 << 10
        let h = try ServerHarness { $0.maxBufferedBytes = budget }
        let (bystanderID, bystander) = try h.connect()
        try h.greet(bystander)
        let (id, peer) = try h.connect()
        try h.greet(peer)
        weak let watched = h.server.connections[id]
        // Most of a 60 KB frame: it waits in the broker's input buffer, above the budget.
        peer.sendRaw(FrameHeader.encode(length: 60_000) + Array(repeating: UInt8(ascii: " "), count: 40_000))
        #expect(h.turn(until: { peer.sawEnd }, reading: peer))
        #expect(errorCode(peer.frames().last) == "overloaded")
        #expect(h.server.cutOffCount == 1)
        #expect(h.reportedCutOffs == 1)
        #expect(h.turn(until: { watched == nil }, timeoutMs: 10 * UInt64(BrokerServer.drainTimeoutMs)))
        // The other client is served as before.
        bystander.send(#"{"op":"ping","id":5}"#)
        var replies: [JSONValue] = []
        #expect(
            h.turn(
                until: {
                    replies += bystander.frames()
                    return !replies.isEmpty
                }, reading: bystander))
        #expect(replies.first?["id"] == .integer(5))
        #expect(h.server.connections.keys.sorted() == [bystanderID])
    }
}

func errorCode(_ frame: JSONValue?) -> String? {
    frame?["error"]?["code"]?.stringValue
}
