// IDTable on its own: every insert, lookup and removal agrees with a Dictionary, through
// growth and through removals that shift probe runs back (wrapping the end of the table),
// and emptying.
import TestSupport
import Testing

@testable import NotifBusCore

struct IDTableTests {
    /// Seeded: a failure names its seed (Swift Testing prints a failing case's arguments).
    @Test(arguments: [UInt64(42)]) func agreesWithADictionaryThroughGrowthAndRemovals(seed: UInt64) {
        var table = IDTable<Int>()
        var model: [Int: Int] = [:]
        var rng = SeededGenerator(seed: seed)
        for step in 0..<20_000 {
            // Keys mostly sequential (as the broker hands them out), some scattered.
            let key = step % 3 == 0 ? Int(rng.next() % 5000) : step / 2
            if rng.next() % 3 == 0 {
                #expect(table.removeValue(forKey: key) == model.removeValue(forKey: key))
            } else {
                table[key] = step
                model[key] = step
            }
            #expect(table.count == model.count)
        }
        for key in 0..<12_000 { #expect(table[key] == model[key]) }
        #expect(table.sortedEntries.map(\.key) == model.keys.sorted())
        #expect(Set(table.values) == Set(model.values))
    }

    @Test func removingFromAFullRunKeepsTheOthersFindable() {
        var table = IDTable<String>()
        for key in 0..<7 { table.insert(key, "v\(key)") }
        #expect(table.removeValue(forKey: 3) == "v3")
        #expect(table.removeValue(forKey: 3) == nil)
        for key in [0, 1, 2, 4, 5, 6] { #expect(table[key] == "v\(key)") }
        table.removeAll()
        #expect(table.isEmpty && table[0] == nil)
    }
}
