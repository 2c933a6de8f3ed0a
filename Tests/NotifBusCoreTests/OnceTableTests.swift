import NotifBusProtocol
import TestSupport
import Testing

// OnceTable keeps its entries in memory it manages itself (slots, an arena of keys with their
// outcomes): held here to a plain model of dictionaries and arrays under seeded random runs of
// every change it offers, with the window's three bounds small enough to be passed often, and
// long keys (beyond the longest the wire allows) among the short ones.
@testable import NotifBusCore

/// What the table should hold: every key with its fields, and the ended ones in the order
/// they ended.
private struct OnceModel {
    struct Entry {
        var entry: Int32
        var op: OnceOp
        var fingerprint: UInt64
        var state: OnceTable.State
        var wallMs: Int64
        var outcome: (isError: Bool, bytes: [UInt8])?
    }

    let limits: OnceLimits
    var entries: [String: Entry] = [:]
    var ended: [String] = []

    var bytes: Int {
        entries.reduce(0) { $0 + $1.key.utf8.count + ($1.value.state == .ended ? $1.value.outcome!.bytes.count : 0) }
    }

    mutating func remove(_ key: String) {
        entries[key] = nil
        ended.removeAll { $0 == key }
    }

    mutating func forgetPastBounds(nowMs: Int64) {
        while let oldest = ended.first,
            entries.count > limits.maxKeys || bytes > limits.maxBytes || nowMs - entries[oldest]!.wallMs >= limits.maxAgeMs
        {
            remove(oldest)
        }
    }
}

struct OnceTableTests {
    /// Seeded: a failing case names its seed.
    @Test(arguments: UInt64(1)...16) func theTableKeepsWhatAPlainModelKeeps(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        var limits = OnceLimits()
        limits.maxKeys = 40
        limits.maxBytes = 6_000
        limits.maxAgeMs = 5_000
        var table = OnceTable(limits: limits, seed: seed)
        var model = OnceModel(limits: limits)
        var now: Int64 = 1_000
        // Few distinct keys, so that keys come back after they are forgotten.
        let keys = (0..<60).map { i in
            i % 17 == 0 ? String(repeating: "long-\(i)-", count: 40) : "k\(i)-" + String(repeating: "x", count: i % 9)
        }
        for step in 0..<2_000 {
            now += Int64.random(in: 0...40, using: &rng)
            let key = keys.randomElement(using: &rng)!
            switch Int.random(in: 0..<10, using: &rng) {
            case 0...3:
                // A request with the key: found, or held anew.
                let found = table.find(key, nowMs: now)
                if let e = model.entries[key], e.state == .ended, now - e.wallMs >= limits.maxAgeMs { model.remove(key) }
                #expect(found == model.entries[key]?.entry, "seed \(seed) step \(step): find \(key)")
                if found == nil {
                    let op = OnceOp.allCases.randomElement(using: &rng)!
                    let fingerprint = UInt64.random(in: 0...3, using: &rng)
                    let entry = table.insert(key, op: op, fingerprint: fingerprint, wallMs: now)
                    model.entries[key] = .init(entry: entry, op: op, fingerprint: fingerprint, state: .pending, wallMs: now, outcome: nil)
                }
            case 4:
                guard let (key, e) = model.entries.filter({ $0.value.state == .pending }).randomElement(using: &rng) else { continue }
                table.setRunning(e.entry)
                model.entries[key]!.state = .running
            case 5...7:
                // An end: of a pending or running entry, or now and then again of an ended one.
                guard let (key, e) = model.entries.randomElement(using: &rng) else { continue }
                let outcome = (0..<Int.random(in: 0...300, using: &rng)).map { _ in UInt8.random(in: 32...126, using: &rng) }
                let isError = Bool.random(using: &rng)
                _ = outcome.withUnsafeBytes { table.end(e.entry, isError: isError, outcome: $0, wallMs: now) }
                model.ended.removeAll { $0 == key }
                model.ended.append(key)
                model.entries[key]!.state = .ended
                model.entries[key]!.wallMs = now
                model.entries[key]!.outcome = (isError, outcome)
                model.forgetPastBounds(nowMs: now)
            case 8:
                guard let (key, e) = model.entries.randomElement(using: &rng) else { continue }
                table.remove(e.entry)
                model.remove(key)
            default:
                table.forgetPastBounds(nowMs: now)
                model.forgetPastBounds(nowMs: now)
            }
            check(table, model, "seed \(seed) step \(step)")
        }
    }

    private func check(_ table: borrowing OnceTable, _ model: OnceModel, _ context: String) {
        #expect(table.count == model.entries.count, "\(context): count")
        #expect(table.bytes == model.bytes, "\(context): bytes")
        #expect(table.endedKeys == model.ended, "\(context): the order of ending")
        #expect(table.pendingKeys == model.entries.values.filter { $0.state != .ended }.count, "\(context): keys not yet ended")
        for (key, e) in model.entries {
            guard table.index(of: key) == e.entry else {
                Issue.record("\(context): \(key) is not entry \(e.entry)")
                return
            }
            #expect(table.key(e.entry) == key && table.state(e.entry) == e.state, "\(context): \(key)")
            #expect(table.op(e.entry) == e.op && table.fingerprint(e.entry) == e.fingerprint, "\(context): \(key)")
            let outcome = table.withOutcomeIfEnded(e.entry)
            #expect(outcome?.isError == e.outcome?.isError && outcome?.bytes == e.outcome?.bytes, "\(context): \(key)'s outcome")
        }
        let records = table.records
        #expect(records.count == model.entries.count, "\(context): records")
        #expect(records.prefix(model.ended.count).map(\.key) == model.ended, "\(context): records of ended keys first")
    }

    @Test func aChunkIsFreedOnceItsOutcomesAreForgotten() {
        var limits = OnceLimits()
        limits.maxKeys = 10
        var table = OnceTable(limits: limits)
        let outcome = [UInt8](repeating: 0x31, count: 20_000)
        for i in 0..<100 {
            let entry = table.insert("key-\(i)", op: .put, fingerprint: 0, wallMs: 0)
            _ = outcome.withUnsafeBytes { table.end(entry, isError: false, outcome: $0, wallMs: 0) }
        }
        // Ten outcomes of 20 kB held: four chunks of 64 KiB at most, however many came before.
        #expect(table.count == 10)
        #expect(table.chunkCount <= 4)
        #expect(table.pendingKeys == 0)
    }

    @Test func aKeyNotYetEndedKeepsItsChunk() {
        var limits = OnceLimits()
        limits.maxKeys = 10
        var table = OnceTable(limits: limits)
        let outcome = [UInt8](repeating: 0x31, count: 20_000)
        let waiting = table.insert("waiting", op: .post, fingerprint: 7, wallMs: 0)
        for i in 0..<100 {
            let entry = table.insert("key-\(i)", op: .put, fingerprint: 0, wallMs: 0)
            _ = outcome.withUnsafeBytes { table.end(entry, isError: false, outcome: $0, wallMs: 0) }
        }
        // Its chunk and those after it are kept while it waits; they go once it has ended.
        #expect(table.key(waiting) == "waiting" && table.pendingKeys == 1)
        #expect(table.chunkCount > 4)
        _ = Array("done".utf8).withUnsafeBytes { table.end(waiting, isError: false, outcome: $0, wallMs: 0) }
        let entry = table.insert("last", op: .put, fingerprint: 0, wallMs: 0)
        _ = outcome.withUnsafeBytes { table.end(entry, isError: false, outcome: $0, wallMs: 0) }
        #expect(table.chunkCount <= 4 && table.pendingKeys == 0)
        #expect(table.key(entry) == "last" && table.count == 10)
    }

    @Test func keysRefusedAsTheyAreHeldTakeNoRoom() {
        var table = OnceTable(limits: OnceLimits())
        // An outcome held keeps the first chunk, and with it every chunk after it.
        let held = table.insert("held", op: .put, fingerprint: 0, wallMs: 0)
        _ = Array("1".utf8).withUnsafeBytes { table.end(held, isError: false, outcome: $0, wallMs: 0) }
        let key = String(repeating: "k", count: 200)
        for _ in 0..<10_000 {
            let entry = table.insert(key, op: .post, fingerprint: 0, wallMs: 0)
            table.remove(entry)
        }
        #expect(table.chunkCount == 1 && table.count == 1 && table.pendingKeys == 0)
        #expect(table.key(held) == "held" && table.outcome(held) == .result(RawJSON(Array("1".utf8))))
    }

    /// A key copied into the arena (word by word up to 32 bytes) arrives whole, and nothing
    /// past it is written.
    @Test func keysOfEveryLengthAreCopiedExactly() {
        for n in 0...48 {
            let key = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 1) }
            var target = [UInt8](repeating: 0xEE, count: 64)
            key.withUnsafeBytes { source in target.withUnsafeMutableBytes { OnceTable.copyKey(source, to: $0.baseAddress!) } }
            #expect(Array(target[0..<n]) == key && target[n...].allSatisfy { $0 == 0xEE }, "\(n) bytes")
        }
    }

    /// The table's own key hash reads every byte of a key of any length, short ones read as
    /// overlapping words included, and the seed: any one byte changed, or the seed, changes it.
    @Test(arguments: UInt64(1)...4) func theKeyHashTakesInEveryByteAndTheSeed(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        for n in 0...48 {
            let key = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let h = key.withUnsafeBytes { OnceTable.keyHash($0, seed: seed) }
            #expect(h != key.withUnsafeBytes { OnceTable.keyHash($0, seed: seed &+ 1) }, "seed \(seed), \(n) bytes")
            for i in 0..<n {
                var changed = key
                changed[i] ^= UInt8(truncatingIfNeeded: 1 &+ rng.next() % 255)
                #expect(h != changed.withUnsafeBytes { OnceTable.keyHash($0, seed: seed) }, "seed \(seed), \(n) bytes, byte \(i)")
            }
        }
    }
}

extension OnceTable {
    /// An ended entry's outcome as arrays, for comparisons; nil before it ended.
    fileprivate func withOutcomeIfEnded(_ i: Int32) -> (isError: Bool, bytes: [UInt8])? {
        guard state(i) == .ended else { return nil }
        return withOutcome(i) { ($0, Array($1)) }
    }
}
