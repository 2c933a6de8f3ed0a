import NotifBusProtocol
import Testing

// CallTable on its own: calls in the ring and beside it (more in flight than the ring has
// slots, and a slot still held when its id comes round again), string request ids kept
// with their text, deadlines, removal from either place, ids that were never handed out.
@testable import NotifBusCore

struct CallTableTests {
    /// The call stored under `id` in these tests: its request id is a string for every
    /// seventh id, an integer otherwise.
    static func call(_ id: Int64) -> PendingCall {
        PendingCall(
            invoker: Int(id % 5) + 1, requestID: id % 7 == 0 ? .string("r-\(id)") : .integer(id * 10), handlerClient: Int(id % 3) + 10)
    }

    static func same(_ a: PendingCall?, _ b: PendingCall) -> Bool {
        guard let a else { return false }
        return a.invoker == b.invoker && a.requestID == b.requestID && a.handlerClient == b.handlerClient
    }

    @Test func moreCallsThanSlotsAreAllKeptAndFoundOnce() {
        var table = CallTable()
        let n = Int64(CallTable.ringSize * 2 + 37)
        for id in 1...n { table.insert(id, Self.call(id), deadline: Instant(id) * 10) }
        #expect(table.count == Int(n))
        #expect(table.sortedEntries.map(\.key) == Array(1...n))
        #expect(table.sortedEntries.allSatisfy { Self.same($0.value, Self.call($0.key)) })
        // Every other call ends, from the newest down, then the rest from the oldest up.
        for id in stride(from: n, through: 1, by: -2) {
            #expect(table.handlerClient(of: id) == Self.call(id).handlerClient && table.deadline(of: id) == Instant(id) * 10)
            #expect(Self.same(table.removeValue(forKey: id), Self.call(id)))
            #expect(table.handlerClient(of: id) == nil && table.deadline(of: id) == nil && table.removeValue(forKey: id) == nil)
        }
        let rest = Array(stride(from: n - 1, through: 1, by: -2).reversed())
        #expect(table.sortedEntries.map(\.key) == rest)
        for id in rest { #expect(Self.same(table.removeValue(forKey: id), Self.call(id))) }
        #expect(table.isEmpty && table.sortedEntries.isEmpty)
    }

    @Test func aSlotHeldByAnOldCallSendsTheNewOneBesideTheRing() {
        var table = CallTable()
        let old: Int64 = 3
        let new = old + Int64(CallTable.ringSize)
        table.insert(old, Self.call(old), deadline: 1)
        table.insert(new, Self.call(new), deadline: 2)
        #expect(table.handlerClient(of: new) == Self.call(new).handlerClient)
        #expect(table.deadline(of: old) == 1 && table.deadline(of: new) == 2)
        #expect(Self.same(table.removeValue(forKey: old), Self.call(old)))
        // The slot is free again, and the new call is still found where it went.
        #expect(Self.same(table.removeValue(forKey: new), Self.call(new)))
        #expect(table.isEmpty)
    }

    @Test func theOldestIDIsFoundInTheRingAndBesideIt() {
        var table = CallTable()
        #expect(table.oldestID == nil)
        let ring = Int64(CallTable.ringSize)
        // 5 + ring takes the slot it shares with 5, so 5 goes beside the ring, as does 9 + 2 × ring.
        for id in [5 + ring, 5, 9, 9 + 2 * ring] { table.insert(id, Self.call(id), deadline: 1) }
        #expect(table.oldestID == 5)
        table.removeValue(forKey: 5)
        #expect(table.oldestID == 9)
        table.removeValue(forKey: 9)
        #expect(table.oldestID == 5 + ring)
        table.removeValue(forKey: 5 + ring)
        #expect(table.oldestID == 9 + 2 * ring)
        table.removeValue(forKey: 9 + 2 * ring)
        #expect(table.oldestID == nil)
    }

    @Test func stringRequestIDsKeepTheirText() {
        var table = CallTable()
        table.insert(7, PendingCall(invoker: 1, requestID: .string(#"a\"b"#), handlerClient: 2), deadline: 7)
        table.insert(8, PendingCall(invoker: 1, requestID: .integer(-4), handlerClient: 2), deadline: 8)
        #expect(table.sortedEntries.map(\.value.requestID) == [.string(#"a\"b"#), .integer(-4)])
        #expect(table.removeValue(forKey: 7)?.requestID == .string(#"a\"b"#))
        #expect(table.removeValue(forKey: 8)?.requestID == .integer(-4))
    }

    @Test func idsNeverHandedOutFindNothing() {
        var table = CallTable()
        #expect(table.handlerClient(of: 0) == nil && table.removeValue(forKey: 0) == nil)
        table.insert(1, Self.call(1), deadline: 1)
        for id: Int64 in [0, -1, 2, 1 + Int64(CallTable.ringSize), Int64.max, Int64.min] {
            #expect(table.handlerClient(of: id) == nil && table.deadline(of: id) == nil && table.removeValue(forKey: id) == nil)
        }
        table.removeAll()
        #expect(table.isEmpty && table.handlerClient(of: 1) == nil)
    }
}
