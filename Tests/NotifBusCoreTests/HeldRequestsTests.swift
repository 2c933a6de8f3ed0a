import NotifBusProtocol
import Testing

// HeldRequests on its own, no sockets and no broker: arrivals numbered in order, waiting
// connections handed out in the order they began and re-queued behind newcomers, launch
// retentions first in first out, and the resume guard refusing to nest.
@testable import NotifBusCore

struct HeldRequestsTests {
    static func retention(_ event: Int64) -> RunningEvent {
        RunningEvent(
            post: QueuedPost(
                event: event, poster: 1, requestID: .integer(event), name: "didReceive", payload: nil, isWillPresent: false,
                launchesApp: true),
            chain: [])
    }

    @Test func arrivalsAreNumberedInOrder() {
        var h = HeldRequests()
        #expect(h.arrivals == 0)
        let first = h.arrive()
        h.arrive()
        let third = h.arrive()
        #expect(first == 1 && third == 3 && h.arrivals == 3)
    }

    @Test func waitingConnectionsComeOutInTheOrderTheyBegan() {
        var h = HeldRequests()
        let none = h.takeWaitingClients()
        #expect(!h.hasWaitingClients && none.isEmpty)
        h.beganWaiting(3)
        h.beganWaiting(1)
        h.beganWaiting(2)
        #expect(h.hasWaitingClients)
        let order = h.takeWaitingClients()
        #expect(order == [3, 1, 2])
        #expect(!h.hasWaitingClients, "taking them empties the list")
        // During a pass a newcomer begins waiting before a connection that still waits is put back.
        h.beganWaiting(5)
        h.beganWaiting(3)
        let next = h.takeWaitingClients()
        #expect(next == [5, 3])
    }

    @Test func retentionsWaitFirstInFirstOut() {
        var h = HeldRequests()
        #expect(!h.hasRetentions)
        h.holdRetention(HeldRequestsTests.retention(7))
        h.holdRetention(HeldRequestsTests.retention(8))
        #expect(h.hasRetentions)
        let first = h.popRetention()
        let second = h.popRetention()
        let third = h.popRetention()
        #expect(first?.post.event == 7 && second?.post.event == 8 && third == nil)
        #expect(!h.hasRetentions)
    }

    @Test func resumingDoesNotNestButRemembersTheRequest() {
        var h = HeldRequests()
        var asked = h.takeResumeRequest()
        #expect(!asked, "nothing asked for yet")
        var began = h.beginResume()
        #expect(began)
        began = h.beginResume()
        #expect(!began, "a resume inside a resume is refused")
        _ = h.beginResume()
        asked = h.takeResumeRequest()
        #expect(asked, "and noted, once however often it was asked")
        asked = h.takeResumeRequest()
        #expect(!asked)
        h.endResume()
        began = h.beginResume()
        asked = h.takeResumeRequest()
        #expect(began && !asked, "after the pass ends a new one may begin")
        h.endResume()
    }
}
