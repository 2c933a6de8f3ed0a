// The state journal on a real file system: records written and read back, torn and garbled
// tails, compaction keeping exactly the live state, refusal of what is not a regular file,
// and a full disk (a file size limit on a broker child process).
import Glibc
import NotifBusProtocol
import Testing

@testable import NotifBusTransport

@Suite struct StateJournalTests {
    static let categories = utf8(
        #"[{"identifier":"INVITE","options":[],"actions":[{"identifier":"ACCEPT","title":"Accept","options":["foreground"]}]}]"#)

    /// The file a compaction of `slots` and `categories` writes, byte for byte.
    static func snapshot(slots: [String: [UInt8]], categories: [UInt8]?) -> [UInt8] {
        var data = StateJournal.magic
        if let categories { data += StateJournal.encode(.categories, name: "", value: categories) }
        for name in slots.keys.sorted() { data += StateJournal.encode(.slotValue, name: name, value: slots[name]!) }
        return data
    }

    @Test func recordsWrittenAreReadBack() throws {
        let folder = try TempFolder()
        let dir = folder.path + "/state"
        do {
            let journal = try StateJournal(directory: dir)
            #expect(journal.warnings.isEmpty)
            #expect(journal.slots.isEmpty && journal.categories == nil)
            #expect(journal.recordSlot(name: "launch", value: utf8(#"{"emailId":"e-1"}"#)))
            #expect(journal.recordSlot(name: "gone", value: utf8("1")))
            #expect(journal.recordCategories(StateJournalTests.categories))
            // Nothing takes effect before the sync.
            #expect(journal.slots.isEmpty)
            #expect(journal.syncIfNeeded())
            #expect(journal.recordSlot(name: "gone", value: nil))
            #expect(journal.recordSlot(name: "launch", value: utf8(#"{"emailId":"e-2"}"#)))
            #expect(journal.syncIfNeeded())
            #expect(journal.slots == ["launch": utf8(#"{"emailId":"e-2"}"#)])
        }
        let reopened = try StateJournal(directory: dir)
        #expect(reopened.warnings.isEmpty)
        #expect(reopened.slots == ["launch": utf8(#"{"emailId":"e-2"}"#)])
        #expect(reopened.categories?.raw == StateJournalTests.categories)
        // Opening compacts: the file holds the live state and nothing else.
        #expect(fileBytes(reopened.path) == StateJournalTests.snapshot(slots: reopened.slots, categories: StateJournalTests.categories))
        var st = stat()
        #expect(lstat(dir, &st) == 0 && st.st_mode & 0o777 == 0o700)
    }

    /// Writes a journal of three slots and returns its bytes and each record's offset.
    static func threeRecords(in dir: String) throws -> (data: [UInt8], offsets: [Int]) {
        do {
            let journal = try StateJournal(directory: dir)
            for (name, value) in [("a", "1"), ("b", "\"two\""), ("c", "[3]")] {
                #expect(journal.recordSlot(name: name, value: utf8(value)))
                #expect(journal.syncIfNeeded())
            }
        }
        guard let data = fileBytes(dir + "/" + StateJournal.fileName) else { throw TestFailure("no journal written") }
        let magic = StateJournal.magic.count
        let a = StateJournal.encode(.slotValue, name: "a", value: utf8("1")).count
        let b = StateJournal.encode(.slotValue, name: "b", value: utf8("\"two\"")).count
        #expect(data.count == magic + a + b + StateJournal.encode(.slotValue, name: "c", value: utf8("[3]")).count)
        return (data, [magic, magic + a, magic + a + b])
    }

    /// Ways a journal of the records "a", "b", "c" gets damaged, what the broker then says,
    /// and which slots it keeps: those before the damage.
    enum Damage: CaseIterable, Sendable {
        case recordHeaderCutShort, recordBodyCutShort, garbledBody, garbledLength, badFileHeader

        func apply(_ data: [UInt8], offsets o: [Int]) -> [UInt8] {
            var d = data
            switch self {
            case .recordHeaderCutShort: d = Array(d[..<(o[2] + 5)])
            case .recordBodyCutShort: d.removeLast()
            case .garbledBody: d[o[1] + 9] ^= 0x20
            case .garbledLength: d[o[1]] = 0xff
            case .badFileHeader: d[0] = UInt8(ascii: "X")
            }
            return d
        }

        var problem: String {
            switch self {
            case .recordHeaderCutShort: "truncated record header"
            case .recordBodyCutShort: "truncated record at"
            case .garbledBody: "checksum mismatch"
            case .garbledLength: "bad record length"
            case .badFileHeader: "bad header"
            }
        }

        var kept: [String] {
            switch self {
            case .recordHeaderCutShort, .recordBodyCutShort: ["a", "b"]
            case .garbledBody, .garbledLength: ["a"]
            case .badFileHeader: []
            }
        }
    }

    @Test(arguments: Damage.allCases)
    func damagedJournalKeepsWhatWasValidBeforeIt(_ damage: Damage) throws {
        let folder = try TempFolder()
        let dir = folder.path + "/state"
        let (data, offsets) = try StateJournalTests.threeRecords(in: dir)
        let damaged = damage.apply(data, offsets: offsets)
        let (what, problem, kept) = (damage, damage.problem, damage.kept)
        try writeFile(dir + "/" + StateJournal.fileName, damaged)
        let journal = try StateJournal(directory: dir)
        #expect(journal.slots.keys.sorted() == kept, "\(what)")
        #expect(journal.warnings.count == 1 && journal.warnings[0].contains(problem), "\(what): \(journal.warnings)")
        // The damaged file is kept aside, byte for byte; the journal is a fresh snapshot.
        let aside = folderEntries(dir).filter { $0.hasPrefix(StateJournal.fileName + ".corrupt-") }
        #expect(aside.count == 1, "\(what): \(folderEntries(dir))")
        if let name = aside.first { #expect(fileBytes(dir + "/" + name) == damaged) }
        #expect(fileBytes(journal.path) == StateJournalTests.snapshot(slots: journal.slots, categories: nil))
        // Writes go on, and what follows the damage is never read again.
        #expect(journal.recordSlot(name: "d", value: utf8("4")))
        #expect(journal.syncIfNeeded())
        let reopened = try StateJournal(directory: dir)
        #expect(reopened.warnings.isEmpty)
        #expect(reopened.slots.keys.sorted() == kept + ["d"])
    }

    @Test func compactionKeepsExactlyTheLiveState() throws {
        let folder = try TempFolder()
        let dir = folder.path + "/state"
        let journal = try StateJournal(directory: dir)
        #expect(journal.recordCategories(StateJournalTests.categories))
        #expect(journal.recordSlot(name: "kept", value: utf8("\"k\"")))
        #expect(journal.syncIfNeeded())
        // One slot rewritten until the file passes 4 x the live state + 1 MiB: each sync
        // checks, so the compaction happens within the loop, and the file shrinks.
        let value = utf8("\"" + String(repeating: "v", count: 4000) + "\"")
        var largest = 0
        var shrank = false
        for i in 0..<400 {
            #expect(journal.recordSlot(name: "churn", value: value))
            #expect(journal.recordSlot(name: "temp\(i % 3)", value: i % 2 == 0 ? utf8("\(i)") : nil))
            #expect(journal.syncIfNeeded())
            let size = fileSize(journal.path)
            if size < largest { shrank = true }
            largest = max(largest, size)
        }
        #expect(shrank, "the journal grew to \(largest) bytes and was never compacted")
        #expect(largest <= 4 * 5000 + (1 << 20) + 2 * 4100)
        // What compaction wrote, plus what came after it, reads back as the live state;
        // opening compacts again, to exactly the snapshot.
        let live = journal.slots
        #expect(live["kept"] == utf8("\"k\"") && live["churn"] == value)
        let reopened = try StateJournal(directory: dir)
        #expect(reopened.warnings.isEmpty)
        #expect(reopened.slots == live)
        #expect(reopened.categories?.raw == StateJournalTests.categories)
        #expect(fileBytes(reopened.path) == StateJournalTests.snapshot(slots: live, categories: StateJournalTests.categories))
        #expect(folderEntries(dir) == [StateJournal.fileName])
    }

    /// A sync handed to another thread covers the records appended before it began; those
    /// appended while it runs wait for the next one, and the file is not compacted under it.
    @Test func aSyncCoversWhatWasAppendedBeforeIt() throws {
        let folder = try TempFolder()
        let dir = folder.path + "/state"
        let journal = try StateJournal(directory: dir)
        #expect(journal.recordSlot(name: "a", value: utf8("1")))
        let ticket = try #require(journal.beginSync())
        #expect(journal.recordSlot(name: "b", value: utf8("2")))
        #expect(fdatasync(ticket.fd) == 0)
        #expect(journal.endSync(ticket, errno: 0))
        #expect(journal.slots == ["a": utf8("1")])
        let next = try #require(journal.beginSync())
        #expect(journal.endSync(next, errno: 0))
        #expect(journal.slots == ["a": utf8("1"), "b": utf8("2")])
        #expect(journal.beginSync() == nil)
        #expect(try StateJournal(directory: dir).slots == ["a": utf8("1"), "b": utf8("2")])
    }

    /// A failed sync refuses every record not yet on disk, those appended after its ticket
    /// too, and cuts them off the file: disk and memory agree, and later writes work.
    @Test func aFailedSyncCutsOffEverythingUnsynced() throws {
        let folder = try TempFolder()
        let dir = folder.path + "/state"
        let journal = try StateJournal(directory: dir)
        #expect(journal.recordSlot(name: "kept", value: utf8("0")))
        #expect(journal.syncIfNeeded())
        let synced = fileSize(journal.path)
        #expect(journal.recordSlot(name: "a", value: utf8("1")))
        let ticket = try #require(journal.beginSync())
        #expect(journal.recordSlot(name: "b", value: utf8("2")))
        #expect(!journal.endSync(ticket, errno: EIO))
        #expect(fileSize(journal.path) == synced)
        #expect(journal.beginSync() == nil)
        #expect(journal.slots == ["kept": utf8("0")])
        #expect(journal.recordSlot(name: "c", value: utf8("3")))
        #expect(journal.syncIfNeeded())
        #expect(try StateJournal(directory: dir).slots == ["kept": utf8("0"), "c": utf8("3")])
    }

    /// Compaction waits for a sync that leaves nothing unsynced, so that no record appended
    /// during a sync is dropped by the rewrite.
    @Test func compactionWaitsUntilNothingIsUnsynced() throws {
        let folder = try TempFolder()
        let dir = folder.path + "/state"
        let journal = try StateJournal(directory: dir)
        let value = utf8("\"" + String(repeating: "v", count: 4000) + "\"")
        // One slot rewritten, unsynced, until the file is well past 4 x the live state + 1 MiB.
        for _ in 0..<300 { #expect(journal.recordSlot(name: "churn", value: value)) }
        #expect(journal.compactionDue)
        let before = fileSize(journal.path)
        let ticket = try #require(journal.beginSync())
        #expect(journal.recordSlot(name: "late", value: utf8("1")))
        #expect(journal.endSync(ticket, errno: 0))
        #expect(fileSize(journal.path) >= before, "compacted while a record was unsynced")
        #expect(journal.compactionDue)
        let rest = try #require(journal.beginSync())
        #expect(journal.endSync(rest, errno: 0))
        #expect(fileSize(journal.path) < before)
        #expect(try StateJournal(directory: dir).slots == ["churn": value, "late": utf8("1")])
    }

    @Test func onlyARegularFileIsAJournal() throws {
        let folder = try TempFolder()
        let fifoDir = folder.path + "/fifo"
        #expect(mkdir(fifoDir, 0o700) == 0 && mkfifo(fifoDir + "/" + StateJournal.fileName, 0o600) == 0)
        #expect(throws: StateDirectoryError.self) { _ = try StateJournal(directory: fifoDir) }
        #expect(refusal(fifoDir).contains("a FIFO"))

        let linkDir = folder.path + "/link"
        try writeFile(folder.path + "/elsewhere", StateJournal.magic)
        #expect(mkdir(linkDir, 0o700) == 0 && symlink(folder.path + "/elsewhere", linkDir + "/" + StateJournal.fileName) == 0)
        #expect(refusal(linkDir).contains("a symbolic link"))
        #expect(fileBytes(folder.path + "/elsewhere") == StateJournal.magic)

        let folderDir = folder.path + "/folder"
        #expect(mkdir(folderDir, 0o700) == 0 && mkdir(folderDir + "/" + StateJournal.fileName, 0o700) == 0)
        #expect(refusal(folderDir).contains("a folder"))

        // The state folder itself: not through a link, not writable by others.
        #expect(symlink(folderDir, folder.path + "/linked") == 0)
        #expect(refusal(folder.path + "/linked").contains("not a folder"))
        let open = folder.path + "/open"
        #expect(mkdir(open, 0o700) == 0 && chmod(open, 0o777) == 0)
        #expect(refusal(open).contains("other users can write"))
    }

    func refusal(_ dir: String) -> String {
        do {
            _ = try StateJournal(directory: dir)
            return "opened"
        } catch {
            return "\(error)"
        }
    }
}
