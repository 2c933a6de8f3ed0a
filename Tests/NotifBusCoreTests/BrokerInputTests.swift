// The broker's inputs and their actions: each input appends what it causes, in order, to
// the list its caller passes, keeps what was there, and leaves nothing for a later input.
import NotifBusCore
import NotifBusProtocol
import Testing

struct BrokerInputTests {
    static func body(_ action: BrokerAction) -> String {
        guard case .send(_, let frame) = action else { return "\(action)" }
        return String(decoding: frame[4...], as: UTF8.self)
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
        #expect(BrokerInputTests.body(actions[1]) == #"{"op":"reply","id":1,"result":{}}"#)

        // A refused peer: its error frame, then its close, and nothing left for later.
        actions.removeAll()
        broker.connect(2, credentials: PeerCredentials(pid: 2, uid: 4242, gid: 4242), now: 4, into: &actions)
        #expect(actions.count == 2)
        #expect(BrokerInputTests.body(actions[0]).contains(#""code":"forbidden""#))
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
}
