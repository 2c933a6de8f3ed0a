import NotifBusProtocol
import Testing

// WriteLedger on its own: ids never reused, a key busy while a write on it is in flight,
// and a report for an unknown or already reported write changing nothing.
@testable import NotifBusCore

struct WriteLedgerTests {
    static func write(_ key: StateKey) -> PendingWrite {
        PendingWrite(
            key: key, completion: .restore(slot: "s", value: Array("1".utf8)),
            record: PendingWriteRecord(record: .slot(name: "s", value: Array("1".utf8)), once: [], acknowledges: nil), reservedSlots: 1,
            reservedBytes: 1)
    }

    @Test func aKeyIsBusyWhileItsWriteIsInFlight() {
        var ledger = WriteLedger()
        #expect(ledger.isEmpty && !ledger.isBusy(.slot("a")))
        let a = ledger.begin(WriteLedgerTests.write(.slot("a")))
        let c = ledger.begin(WriteLedgerTests.write(.categories))
        #expect(a != c)
        #expect(ledger.isBusy(.slot("a")) && ledger.isBusy(.categories) && !ledger.isBusy(.slot("b")))
        #expect(ledger.finish(a)?.key == .slot("a"))
        #expect(!ledger.isBusy(.slot("a")) && !ledger.isEmpty)
        #expect(ledger.finish(c)?.reservedSlots == 1)
        #expect(ledger.isEmpty)
    }

    @Test func aRecordOfKeysMakesNothingBusy() {
        var ledger = WriteLedger()
        let keys = ledger.begin(
            PendingWrite(
                key: nil, completion: .restore(slot: "s", value: Array("1".utf8)),
                record: PendingWriteRecord(record: .keysOnly, once: [], acknowledges: nil), reservedSlots: 0, reservedBytes: 0))
        let a = ledger.begin(WriteLedgerTests.write(.slot("a")))
        #expect(ledger.isBusy(.slot("a")) && !ledger.isBusy(.categories))
        #expect(ledger.finish(keys)?.key == nil)
        #expect(ledger.isBusy(.slot("a")))
        _ = ledger.finish(a)
        #expect(ledger.isEmpty)
    }

    @Test func reportsOfUnknownWritesChangeNothing() {
        var ledger = WriteLedger()
        let a = ledger.begin(WriteLedgerTests.write(.slot("a")))
        #expect(ledger.finish(a + 1) == nil)
        #expect(ledger.isBusy(.slot("a")))
        _ = ledger.finish(a)
        #expect(ledger.finish(a) == nil)
        let b = ledger.begin(WriteLedgerTests.write(.slot("a")))
        #expect(b > a, "ids are never reused")
    }
}
