import NotifBusProtocol
import Testing

// SlotStore on its own, with a fake clock: value bytes, limits counting reservations,
// waiting takes served oldest first (passing held ones), and their deadlines.
@testable import NotifBusCore

struct SlotStoreTests {
    static func value(_ text: String) -> RawJSON { Array(text.utf8) }

    @Test func valuesCountTheirBytes() {
        var s = SlotStore(restoring: ["a": SlotStoreTests.value("123")])
        #expect(s.bytes == 3 && s.count == 1)
        s.set("a", SlotStoreTests.value("1"))
        s.set("b", SlotStoreTests.value("22"))
        #expect(s.bytes == 3 && s["b"] == SlotStoreTests.value("22"))
        let removed = s.remove("a"), removedAgain = s.remove("a")
        #expect(removed && !removedAgain)
        #expect(s.bytes == 2 && s.count == 1)
    }

    @Test func limitsCountReservations() {
        var s = SlotStore()
        s.set("a", SlotStoreTests.value("12345"))
        #expect(s.limitError("b", SlotStoreTests.value("1"), maxSlots: 2, maxBytes: 10) == nil)
        s.reserve(slots: 1, bytes: 4)
        #expect(s.limitError("b", SlotStoreTests.value("1"), maxSlots: 2, maxBytes: 10) == .tooManySlots(max: 2))
        #expect(s.limitError("a", SlotStoreTests.value("12"), maxSlots: 2, maxBytes: 10) == nil, "replacing takes no new place")
        #expect(s.limitError("a", SlotStoreTests.value("1234567"), maxSlots: 2, maxBytes: 10) == .tooManyBytes(max: 10))
        s.reserve(slots: -1, bytes: -4)
        #expect(s.reservedSlots == 0 && s.reservedBytes == 0)
    }

    @Test func waitingTakesAreServedOldestFirstPassingHeldOnes() {
        var s = SlotStore()
        let held = s.addWaiter(TakeWaiter(client: 1, requestID: .integer(1), slot: "x", held: true, arrival: 5), deadline: nil)
        let ready = s.addWaiter(TakeWaiter(client: 2, requestID: .integer(2), slot: "x", held: false, arrival: 0), deadline: 100)
        #expect(s.hasWaiters("x") && !s.hasWaiters("y"))
        #expect(s.firstReadyWaiter("x") == ready)
        #expect(s.oldestTakerIsHeld("x", before: 6))
        #expect(!s.oldestTakerIsHeld("x", before: 5), "only earlier arrivals hold a value back")
        #expect(!s.oldestTakerIsHeld("x", before: 6, except: held))
        s.startWaiting(held, deadline: 50)
        #expect(s.firstReadyWaiter("x") == held && !s.oldestTakerIsHeld("x", before: 6))
        #expect(s.removeWaiter(held)?.client == 1)
        #expect(s.firstReadyWaiter("x") == ready)
    }

    @Test func expiredWaitsComeOutByDeadline() {
        var s = SlotStore()
        let late = s.addWaiter(TakeWaiter(client: 1, requestID: .integer(1), slot: "x", held: false, arrival: 0), deadline: 300)
        let early = s.addWaiter(TakeWaiter(client: 1, requestID: .integer(2), slot: "y", held: false, arrival: 0), deadline: 100)
        let gone = s.addWaiter(TakeWaiter(client: 1, requestID: .integer(3), slot: "y", held: false, arrival: 0), deadline: 50)
        _ = s.removeWaiter(gone)
        #expect(s.nextDeadline == 50, "a stale deadline stays until popped")
        #expect(s.popExpiredWaiter(now: 200) == early)
        _ = s.removeWaiter(early)
        #expect(s.popExpiredWaiter(now: 200) == nil)
        #expect(s.popExpiredWaiter(now: 300) == late)
        #expect(s.removeAllWaiters().map(\.requestID) == [.integer(1)])
        #expect(s.nextDeadline == nil && !s.hasWaiters("x"))
    }
}
