// The broker's inputs and their actions: each input appends what it causes, in order, to
// the list its caller passes, keeps what was there, and leaves nothing for a later input.
import NotifBusCore
import Testing

@testable import NotifBusProtocol

struct BrokerInputTests {
    static func body(_ action: BrokerAction, _ broker: borrowing Broker) -> String {
        guard case .send(_, let range) = action else { return "\(action)" }
        return String(decoding: broker.outputBytes(range)[4...], as: UTF8.self)
    }

    /// A broker with connection 1 greeted; `actions` gets what that caused.
    static func greeted(_ actions: inout [BrokerAction]) -> Broker {
        var configuration = BrokerConfiguration()
        configuration.brokerUID = 1000
        var broker = Broker(configuration: configuration, now: 0)
        broker.connect(1, credentials: PeerCredentials(pid: 1, uid: 1000, gid: 1000), now: 1, into: &actions)
        Array(#"{"op":"hello","id":0,"protocol":1}"#.utf8).withUnsafeBytes { broker.receive($0, from: 1, now: 2, into: &actions) }
        return broker
    }

    @Test func eachInputAppendsItsOwnActions() {
        var configuration = BrokerConfiguration()
        configuration.brokerUID = 1000
        var broker = Broker(configuration: configuration, now: 0)
        var actions: [BrokerAction] = []
        broker.connect(1, credentials: PeerCredentials(pid: 1, uid: 1000, gid: 1000), now: 1, into: &actions)
        #expect(actions.isEmpty)
        Array(#"{"op":"hello","id":0,"protocol":1}"#.utf8).withUnsafeBytes { broker.receive($0, from: 1, now: 2, into: &actions) }
        Array(#"{"op":"ping","id":1}"#.utf8).withUnsafeBytes { broker.receive($0, from: 1, now: 3, into: &actions) }
        #expect(actions.count == 2, "the second input kept the first one's reply")
        #expect(BrokerInputTests.body(actions[1], broker) == #"{"op":"reply","id":1,"result":{}}"#)
        broker.outputTaken()

        // A refused peer: its error frame, then its close, and nothing left for later.
        actions.removeAll()
        broker.connect(2, credentials: PeerCredentials(pid: 2, uid: 4242, gid: 4242), now: 4, into: &actions)
        #expect(actions.count == 2)
        #expect(BrokerInputTests.body(actions[0], broker).contains(#""code":"forbidden""#))
        broker.outputTaken()
        guard case .close(2) = actions[1] else {
            Issue.record("expected close of c2, got \(actions[1])")
            return
        }
        actions.removeAll()
        broker.tick(now: 5, into: &actions)
        #expect(actions.isEmpty)
        broker.shutdown(now: 6, into: &actions)
        #expect(actions.count == 1)
        guard case .close(1) = actions.first else {
            Issue.record("expected close of c1, got \(actions)")
            return
        }
    }

    /// Frames of one batch lie one after another in the output store, each with its own
    /// length prefix; after `outputTaken()` the store starts again at its beginning.
    @Test func framesOfABatchShareTheOutputStore() {
        var actions: [BrokerAction] = []
        var broker = BrokerInputTests.greeted(&actions)
        broker.outputTaken()
        actions.removeAll()
        let pings = Array(#"{"op":"ping","id":1}"#.utf8), statusPage = Array(#"{"op":"status","id":2}"#.utf8)
        pings.withUnsafeBytes { broker.receive($0, from: 1, now: 3, into: &actions) }
        statusPage.withUnsafeBytes { broker.receive($0, from: 1, now: 3, into: &actions) }
        guard actions.count == 2, case .send(1, let first) = actions[0], case .send(1, let second) = actions[1] else {
            Issue.record("expected two frames for c1, got \(actions)")
            return
        }
        #expect(first.offset == 0 && second.offset == first.count)
        #expect(first.joined(to: second) != nil)
        let reply = broker.outputBytes(first)
        #expect(reply == OutboundFrame.reply(.integer(1), .empty).encoded())
        #expect(BrokerInputTests.body(actions[1], broker).hasPrefix(#"{"op":"reply","id":2,"result":{"server":"#))
        broker.outputTaken()
        actions.removeAll()
        pings.withUnsafeBytes { broker.receive($0, from: 1, now: 4, into: &actions) }
        guard case .send(1, let again) = actions.first else {
            Issue.record("expected a frame for c1, got \(actions)")
            return
        }
        #expect(again.offset == 0 && again.generation != first.generation)
        #expect(first.joined(to: again) == nil, "ranges of two generations joined")
        #expect(broker.outputBytes(again) == reply)
    }

    /// A range kept beyond `outputTaken()` traps when read, instead of reading the bytes of
    /// whatever frame the store holds there now.
    @Test func aRangeReadAfterTheResetTraps() async {
        await #expect(processExitsWith: .failure) {
            var actions: [BrokerAction] = []
            var broker = BrokerInputTests.greeted(&actions)
            guard case .send(1, let hello) = actions.first else { return }
            broker.outputTaken()
            actions.removeAll()
            Array(#"{"op":"ping","id":1}"#.utf8).withUnsafeBytes { broker.receive($0, from: 1, now: 3, into: &actions) }
            _ = broker.outputBytes(hello)
        }
    }

    /// One batch of large frames grows the store; the reset after it gives that memory back
    /// instead of keeping it for the life of the broker.
    @Test func aResetShrinksAStoreThatGrewLarge() {
        var actions: [BrokerAction] = []
        var broker = BrokerInputTests.greeted(&actions)
        broker.outputTaken()
        actions.removeAll()
        let value = "\"" + String(repeating: "v", count: 900_000) + "\""
        let requests =
            ["{\"op\":\"put\",\"id\":1,\"slot\":\"s\",\"value\":\(value)}"] + (2...3).map { "{\"op\":\"peek\",\"id\":\($0),\"slot\":\"s\"}" }
        for request in requests { Array(request.utf8).withUnsafeBytes { broker.receive($0, from: 1, now: 3, into: &actions) } }
        #expect(actions.count == 3)
        for (i, action) in actions.enumerated().dropFirst() {
            #expect(BrokerInputTests.body(action, broker) == "{\"op\":\"reply\",\"id\":\(i + 1),\"result\":\(value)}")
        }
        #expect(broker.output.capacity > OutputStore.keptBytes)
        broker.outputTaken()
        #expect(broker.output.capacity == OutputStore.initialBytes && broker.output.count == 0)
    }
}
