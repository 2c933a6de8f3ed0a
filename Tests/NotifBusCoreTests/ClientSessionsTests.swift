import NotifBusProtocol
import Testing

// ClientSessions on its own, with a fake clock: greeting deadlines in accept order, and
// monitors kept once and forgotten with their connection.
@testable import NotifBusCore

struct ClientSessionsTests {
    static let peer = PeerCredentials(pid: 1, uid: 1000, gid: 1000)

    @Test func ungreetedConnectionsExpireInAcceptOrder() {
        var s = ClientSessions()
        s.add(1, credentials: ClientSessionsTests.peer, helloDeadline: 100)
        s.add(2, credentials: ClientSessionsTests.peer, helloDeadline: 200)
        s.add(3, credentials: ClientSessionsTests.peer, helloDeadline: 300)
        s[2]?.greeted = true
        _ = s.remove(3)
        #expect(s.nextHelloDeadline == 100)
        #expect(s.popUngreeted(now: 50) == nil)
        #expect(s.popUngreeted(now: 400) == 1)
        #expect(s.popUngreeted(now: 400) == nil, "greeted and removed connections are passed over")
        #expect(s.nextHelloDeadline == nil && s.count == 2)
    }

    @Test func monitorsAreKeptOnceAndForgottenWithTheirConnection() {
        var s = ClientSessions()
        s.add(1, credentials: ClientSessionsTests.peer, helloDeadline: 100)
        s.add(2, credentials: ClientSessionsTests.peer, helloDeadline: 100)
        s.startMonitoring(2)
        s.startMonitoring(2)
        s.startMonitoring(1)
        s.startMonitoring(9)
        #expect(s.monitors == [2, 1])
        #expect(s.remove(2)?.monitoring == true)
        #expect(s.monitors == [1] && s[2] == nil && s.remove(2) == nil)
        s.dropHelloDeadlines()
        #expect(s.nextHelloDeadline == nil && !s.isEmpty)
    }
}
