// Idempotency keys in the state journal: a key and its change in one record, read back in
// order; a post that was running when the broker stopped read back as `interrupted`; the
// window (count, age, bytes) applied on disk as the broker applies it, and compaction keeping
// only what the window keeps; a damaged keyed record treated as any damaged record.
import Glibc
import NotifBusCore
import NotifBusProtocol
import Testing

@testable import NotifBusTransport

@Suite struct StateJournalKeyTests {
    static let wall: Int64 = 1_700_000_000_000

    static func key(_ text: String, _ op: OnceOp = .put, at wallMs: Int64 = wall, outcome: OnceOutcome? = .result(utf8("{}"))) -> OnceRecord {
        OnceRecord(key: text, op: op, fingerprint: UInt64(text.utf8.count) &* 0x9E37_79B9, wallMs: wallMs, outcome: outcome)
    }

    @Test func aKeyAndItsChangeAreOneRecordReadBackInOrder() throws {
        let folder = try TempFolder()
        let dir = folder.path + "/state"
        do {
            let journal = try StateJournal(directory: dir)
            #expect(journal.record(.slot(name: "s", value: utf8("[1]")), once: [Self.key("put-1")]))
            #expect(journal.record(.categories(utf8("[]")), once: [Self.key("cats", .setCategories)]))
            #expect(journal.record(.slot(name: "s", value: nil), once: [Self.key("take-1", .take, outcome: .result(utf8("[1]")))]))
            #expect(journal.record(.keysOnly, once: [Self.key("post-1", .post, outcome: nil)]))
            #expect(journal.record(.keysOnly, once: [Self.key("post-1", .post, outcome: .result(utf8(#"{"event":1}"#)))]))
            #expect(journal.record(.keysOnly, once: [Self.key("post-2", .post, outcome: nil)]))
            #expect(journal.once.count == 0, "nothing takes effect before the sync")
            #expect(journal.syncIfNeeded())
            #expect(journal.slots.isEmpty && journal.categories?.raw == utf8("[]"))
            #expect(journal.once.records.map(\.key) == ["put-1", "cats", "take-1", "post-1", "post-2"])
            #expect(journal.once.records.last?.outcome == nil, "running while the broker lives")
        }
        let reopened = try StateJournal(directory: dir)
        #expect(reopened.warnings.isEmpty)
        let records = reopened.once.records
        #expect(records.map(\.key) == ["put-1", "cats", "take-1", "post-1", "post-2"])
        #expect(records.map(\.op) == [.put, .setCategories, .take, .post, .post])
        #expect(records[2].outcome == .result(utf8("[1]")))
        #expect(records[3].outcome == .result(utf8(#"{"event":1}"#)))
        #expect(records[4].outcome == .interrupted, "cut by the stop: every repeat hears interrupted")
        #expect(records.map(\.fingerprint) == records.map { Self.key($0.key).fingerprint })
        // Reopened again (after the compaction of the first opening), the same.
        let again = try StateJournal(directory: dir)
        #expect(again.once.records == records)
    }

    @Test func theWindowOnDiskIsTheBrokersWindow() throws {
        let folder = try TempFolder()
        let dir = folder.path + "/state"
        var limits = OnceLimits()
        limits.maxKeys = 3
        limits.maxAgeMs = 60_000
        do {
            let journal = try StateJournal(directory: dir, onceLimits: limits)
            for (i, name) in ["a", "b", "c", "d"].enumerated() {
                #expect(journal.record(.keysOnly, once: [Self.key(name, at: Self.wall + Int64(i))]))
            }
            #expect(journal.syncIfNeeded())
            #expect(journal.once.records.map(\.key) == ["b", "c", "d"], "past the count, the oldest goes")
            // A minute after "b", "b" is too old; "c" and "d" are not.
            #expect(journal.record(.keysOnly, once: [Self.key("e", at: Self.wall + 60_001)]))
            #expect(journal.syncIfNeeded())
            #expect(journal.once.records.map(\.key) == ["c", "d", "e"])
        }
        let reopened = try StateJournal(directory: dir, onceLimits: limits)
        #expect(reopened.once.records.map(\.key) == ["c", "d", "e"])
        // The compacted file holds exactly those keys, one record each, after the magic.
        let expected =
            StateJournal.magic
            + reopened.once.records.flatMap { StateJournal.encode(.keyed, name: "", value: StateJournal.encodeKeyed(.keysOnly, [$0])) }
        #expect(fileBytes(reopened.path) == expected)
        // A smaller window at the next start keeps fewer.
        limits.maxKeys = 1
        #expect(try StateJournal(directory: dir, onceLimits: limits).once.records.map(\.key) == ["e"])
    }

    @Test func aDamagedKeyedRecordKeepsWhatCameBefore() throws {
        let folder = try TempFolder()
        let dir = folder.path + "/state"
        do {
            let journal = try StateJournal(directory: dir)
            #expect(journal.record(.slot(name: "a", value: utf8("1")), once: [Self.key("first")]))
            #expect(journal.syncIfNeeded())
            #expect(journal.record(.slot(name: "b", value: utf8("2")), once: [Self.key("second")]))
            #expect(journal.syncIfNeeded())
        }
        let path = dir + "/" + StateJournal.fileName
        guard var data = fileBytes(path) else { throw TestFailure("no journal") }
        data.removeLast(3)  // the second record cut short
        let fd = open(path, O_WRONLY | O_TRUNC)
        _ = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        let reopened = try StateJournal(directory: dir)
        #expect(reopened.slots == ["a": utf8("1")])
        #expect(reopened.once.records.map(\.key) == ["first"])
        #expect(reopened.warnings.count == 1)
    }

    @Test func keyedRecordsThatTheBrokerNeverWritesAreRefused() {
        let good = StateJournal.encodeKeyed(.slot(name: "s", value: utf8("1")), [Self.key("k")])
        #expect(StateJournal.decodeKeyed(good)?.keys == [Self.key("k")])
        #expect(StateJournal.decodeKeyed(good)?.change == .slot(name: "s", value: utf8("1")))
        for bad in [
            StateJournal.encodeKeyed(.slot(name: "s", value: utf8("{")), [Self.key("k")]),
            StateJournal.encodeKeyed(.keysOnly, [Self.key("", .put)]),
            StateJournal.encodeKeyed(.keysOnly, [Self.key("k", outcome: .result(utf8("nope")))]),
            Array(good.dropLast()) + utf8("}"),
            Array(good.prefix(5)),
        ] {
            #expect(StateJournal.decodeKeyed(bad) == nil)
        }
        var wrongOp = StateJournal.encodeKeyed(.keysOnly, [Self.key("k")])
        wrongOp[5] = 9  // after the count (2 bytes), the key's length (2) and the key (1)
        #expect(StateJournal.decodeKeyed(wrongOp) == nil)
    }
}
