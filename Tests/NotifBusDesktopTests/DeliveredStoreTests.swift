// The delivered table's journal (DeliveredStore) against a file in memory that can crash at
// any step: a seeded explorer runs random changes, crashes at every I/O step in turn (a torn
// append, a sync that never happened, a rewrite cut before or after its rename), reopens the
// file, and checks the table against a plain model: everything acknowledged is there, the
// change in flight is there whole or not at all, nothing else. The seed is printed on failure.
import NotifBusClient
import NotifBusDesktop
import NotifBusProtocol
import TestSupport
import Testing

/// A journal file in memory: bytes synced, bytes appended since, and a rewrite in four steps
/// (temp file, fsync, rename, fsync folder). With `crashAtStep`, the step of that number
/// fails as the process dying there would, and every later call fails too.
final class CrashingFile: JournalFile {
    struct Crashed: Error {}
    var durable: [UInt8]
    var volatile: [UInt8] = []
    /// A rewrite whose rename happened but whose folder was not synced: after a crash the
    /// file is either one.
    var renamedNotSynced: [UInt8]? = nil
    var steps = 0
    /// Rewrites completed: the explorer must reach compaction, not only appends.
    var rewrites = 0
    let crashAtStep: Int?
    var crashed = false

    init(_ bytes: [UInt8], crashAtStep: Int? = nil) {
        durable = bytes
        self.crashAtStep = crashAtStep
    }

    private func step() throws(JournalFileError) {
        if crashed { throw JournalFileError("crashed") }
        defer { steps += 1 }
        if steps == crashAtStep {
            crashed = true
            throw JournalFileError("crashed")
        }
    }

    func append(_ bytes: [UInt8]) throws(JournalFileError) {
        do {
            try step()
        } catch {
            // Dying in the write: any part of it may have reached the page cache.
            if crashed { volatile += bytes }
            throw error
        }
        volatile += bytes
    }

    func sync() throws(JournalFileError) {
        try step()
        durable += volatile
        volatile = []
    }

    func truncate(to length: Int) throws(JournalFileError) {
        try step()
        let all = durable + volatile
        durable = Array(all.prefix(length))
        volatile = []
    }

    func replace(with bytes: [UInt8]) throws(JournalFileError) {
        try step()  // the temp file is written
        try step()  // and synced
        try step()  // renamed over the journal
        renamedNotSynced = bytes
        try step()  // the folder is synced
        durable = bytes
        volatile = []
        renamedNotSynced = nil
        rewrites += 1
    }

    /// What a reboot finds: the synced bytes and any prefix of the rest; a rename not yet
    /// synced either happened or not.
    func afterCrash(_ rng: inout SeededGenerator) -> [UInt8] {
        if let renamed = renamedNotSynced, Bool.random(using: &rng) { return renamed }
        return durable + volatile.prefix(Int.random(in: 0...volatile.count, using: &rng))
    }
}

/// The plain model: desktop ids, identifiers and the userInfo bytes the app sent (when the
/// change gave some), oldest first.
struct DeliveredModel: Equatable {
    var entries: [(id: UInt32, identifier: String, userInfo: [UInt8]?)] = []
    /// The owner of the server the entries belong to.
    var server: String? = nil
    let capacity: Int

    static func == (a: DeliveredModel, b: DeliveredModel) -> Bool {
        a.server == b.server && a.entries.map(\.id) == b.entries.map(\.id) && a.entries.map(\.identifier) == b.entries.map(\.identifier)
            && a.entries.map(\.userInfo) == b.entries.map(\.userInfo)
    }

    mutating func record(_ id: UInt32, _ identifier: String) {
        entries.removeAll { $0.id == id || $0.identifier == identifier }
        entries.append((id, identifier, StoreChange.userInfo(id)))
        while entries.count > capacity { entries.removeFirst() }
    }

    mutating func forget(_ id: UInt32) { entries.removeAll { $0.id == id } }

    init(capacity: Int) { self.capacity = capacity }

    init(_ store: DeliveredStore, capacity: Int) {
        self.capacity = capacity
        server = store.server?.owner
        entries = store.table.delivered.map { ($0.desktopId, $0.notification.identifier, store.table.userInfo(desktopId: $0.desktopId)) }
    }
}

/// One change the explorer makes.
enum StoreChange: CustomStringConvertible {
    case show(UInt32, String)
    case click(UInt32)
    case remove(String)
    case newServer(String)

    var description: String {
        switch self {
        case .show(let id, let identifier): return "show \(identifier) as \(id)"
        case .click(let id): return "click \(id)"
        case .remove(let identifier): return "remove \(identifier)"
        case .newServer(let owner): return "server \(owner)"
        }
    }

    func apply(to model: inout DeliveredModel) {
        switch self {
        case .show(let id, let identifier): model.record(id, identifier)
        case .click(let id): model.forget(id)
        case .remove(let identifier):
            if let id = model.entries.first(where: { $0.identifier == identifier })?.id { model.forget(id) }
        case .newServer(let owner):
            if owner != model.server { model.entries.removeAll() }
            model.server = owner
        }
    }

    /// The userInfo bytes a change shows notification `id` with: odd ids have some, as an
    /// app's add through the bridge does, even ones none (a notification recorded without).
    static func userInfo(_ id: UInt32) -> [UInt8]? {
        id % 2 == 1 ? Array(#"{"emailId":"e-\#(id)","n":[1e9, 2.50]}"#.utf8) : nil
    }

    func apply(to store: inout DeliveredStore) throws(JournalFileError) {
        switch self {
        case .show(let id, let identifier):
            let n = NotifBusClient.Notification(
                identifier: identifier, content: NotificationContent(title: "t \(id)", userInfo: ["emailId": .string("e-\(id)")]))
            try store.record(
                n, desktopId: id, category: DeliveredStoreTests.category, routes: DeliveredStoreTests.routes, caller: ":1.\(id % 3)",
                userInfo: StoreChange.userInfo(id))
        case .click(let id):
            if let failure = store.change({ $0.actionInvoked(desktopId: id, key: "default") }).writeFailure { throw failure }
        case .remove(let identifier):
            if let failure = store.change({ $0.remove(identifiers: [identifier]) }).writeFailure { throw failure }
        case .newServer(let owner):
            if let failure = store.serverIs(ServerInstance(bus: "bus-1", owner: owner)).writeFailure { throw failure }
        }
    }
}

@Suite struct DeliveredStoreTests {
    static let category = NotificationCategory(
        identifier: "INVITE", actions: [NotificationAction(identifier: "ACCEPT", title: "Accept", options: [.foreground])],
        options: [.customDismissAction])
    static let routes: [String: ActionRoute] = ["default": .defaultAction, "ACCEPT": .action("ACCEPT")]
    static let capacity = 5

    static func changes(_ rng: inout SeededGenerator, count: Int) -> [StoreChange] {
        var nextID: UInt32 = 1
        var shown: [UInt32] = []
        var out: [StoreChange] = [.newServer(":1.1")]
        for _ in 0..<count {
            switch Int.random(in: 0..<20, using: &rng) {
            case 0..<9:
                // A small pool of identifiers: adding one again replaces it.
                let identifier = "n\(Int.random(in: 0..<8, using: &rng))"
                out.append(.show(nextID, identifier))
                shown.append(nextID)
                nextID += 1
            case 9..<14 where !shown.isEmpty: out.append(.click(shown.randomElement(using: &rng)!))
            case 14..<18: out.append(.click(UInt32.random(in: 1...nextID, using: &rng)))
            case 18: out.append(.remove("n\(Int.random(in: 0..<8, using: &rng))"))
            default: out.append(.newServer(":1.\(Int.random(in: 1..<4, using: &rng))"))
            }
        }
        return out
    }

    static func open(_ bytes: [UInt8], _ file: CrashingFile) throws -> DeliveredStore {
        var store = try DeliveredStore.open(bytes, file: file, capacity: capacity).store
        store.compactionSlackBytes = 600
        return store
    }

    /// Runs `changes` from an empty file, crashing at step `crashAt`; then reopens what the
    /// disk kept, checks it, and runs the rest without a crash. Returns the number of I/O
    /// steps the run without a crash took (nil `crashAt`).
    @discardableResult
    static func run(_ changes: [StoreChange], seed: UInt64, crashAt: Int?) throws -> (steps: Int, rewrites: Int) {
        var rng = SeededGenerator(seed: seed &+ UInt64(crashAt ?? 0) &* 7919)
        let file = CrashingFile([], crashAtStep: crashAt)
        var model = DeliveredModel(capacity: capacity)
        var index = 0
        var store: DeliveredStore
        do {
            store = try open([], file)
            while index < changes.count {
                try changes[index].apply(to: &store)
                changes[index].apply(to: &model)
                #expect(DeliveredModel(store, capacity: capacity) == model, "seed \(seed): \(changes[index]) in memory")
                index += 1
            }
            return (file.steps, file.rewrites)
        } catch {
            guard file.crashed else { throw error }
        }
        // The crash: what the disk kept is every acknowledged change, and the one in flight
        // (changes[index], if any) whole or not at all.
        let kept = file.afterCrash(&rng)
        let reopened = CrashingFile(kept)
        store = try open(kept, reopened)
        let recovered = DeliveredModel(store, capacity: capacity)
        var withInFlight = model
        if index < changes.count { changes[index].apply(to: &withInFlight) }
        let context = "seed \(seed), crash at step \(crashAt!), during \(index < changes.count ? "\(changes[index])" : "opening")"
        if recovered == withInFlight {
            model = withInFlight
        } else {
            #expect(recovered == model, "\(context): recovered \(recovered.entries) from \(kept.count) bytes, acknowledged \(model.entries)")
            if recovered != model { return (0, 0) }
        }
        // What follows the crash works on the reopened file, and survives a clean reopen.
        for change in changes[min(index + 1, changes.count)...] {
            try change.apply(to: &store)
            change.apply(to: &model)
        }
        let final = try open(reopened.durable + reopened.volatile, CrashingFile([]))
        #expect(DeliveredModel(final, capacity: capacity) == model, "\(context): after the rest and a reopen")
        return (0, 0)
    }

    /// Seeds the explorer found a bug with once are kept here and run first.
    static let keptSeeds: [UInt64] = []

    @Test func crashAtEveryStepAgainstTheModel() throws {
        var runs = 0, rewrites = 0
        for seed in DeliveredStoreTests.keptSeeds + Array(1...16) {
            var rng = SeededGenerator(seed: seed)
            let changes = DeliveredStoreTests.changes(&rng, count: 50)
            let clean = try DeliveredStoreTests.run(changes, seed: seed, crashAt: nil)
            rewrites += clean.rewrites - 1
            for crashAt in 0..<clean.steps {
                try DeliveredStoreTests.run(changes, seed: seed, crashAt: crashAt)
                runs += 1
            }
        }
        #expect(runs > 1000, "the explorer crashed only \(runs) times")
        #expect(rewrites > 16, "the explorer compacted only \(rewrites) times")
    }

    @Test func recordsReadBackWhole() throws {
        let file = CrashingFile([])
        var store = try DeliveredStore.open([], file: file, capacity: 10).store
        #expect(store.serverIs(ServerInstance(bus: "b", owner: ":1.4")).writeFailure == nil)
        let n = NotifBusClient.Notification(
            identifier: "m1", content: NotificationContent(title: "Ana", categoryIdentifier: "INVITE", userInfo: ["emailId": "e-1", "n": 1.5]))
        let routes: [String: ActionRoute] = [
            "default": .defaultAction, "ACCEPT": .action("ACCEPT"), "inline-reply": .inlineReply("R"), "T": .textInputButton("T"),
        ]
        try store.record(n, desktopId: 7, category: Self.category, routes: routes, caller: ":1.9")
        let again = try DeliveredStore.open(file.durable, file: CrashingFile([]), capacity: 10).store
        #expect(again.server == ServerInstance(bus: "b", owner: ":1.4"))
        #expect(again.table.delivered.map(\.notification) == [n])
        #expect(again.table.earlierCallers(than: ":1.10") == [":1.9"])
        var table = again.table
        #expect(table.actionInvoked(desktopId: 7, key: "ACCEPT")?.notification.content.userInfo["n"] == 1.5)
    }

    /// The userInfo an app sent is kept as its bytes through a restart: the click posts
    /// `1e9` as `1e9`, and the notification's value is read from those bytes.
    @Test func userInfoBytesReadBackUnchanged() throws {
        let file = CrashingFile([])
        var store = try DeliveredStore.open([], file: file, capacity: 10).store
        let raw = Array(#"{"n":[1e9, 2.50],"s":"\u00e9"}"#.utf8)
        let parsed = try #require(try JSONValue(parsingAnyDepth: raw).objectValue)
        let n = NotifBusClient.Notification(identifier: "m1", content: NotificationContent(title: "t", userInfo: parsed))
        try store.record(n, desktopId: 3, category: nil, routes: Self.routes, caller: nil, userInfo: raw)
        #expect(store.table.userInfo(desktopId: 3) == raw)
        let text = String(decoding: file.durable, as: UTF8.self)
        #expect(!text.contains("1000000000"), "the record holds the tree, not the bytes: \(text)")
        let again = try DeliveredStore.open(file.durable, file: CrashingFile([]), capacity: 10).store
        #expect(again.table.userInfo(desktopId: 3) == raw)
        #expect(again.table.delivered.map(\.notification) == [n])
        // A record whose userInfo text is not an object is a bad record, as any damage is.
        let otherFile = CrashingFile([])
        var other = try DeliveredStore.open([], file: otherFile, capacity: 10).store
        try other.record(n, desktopId: 4, category: nil, routes: Self.routes, caller: nil, userInfo: Array("[1]".utf8))
        let loaded = try DeliveredStore.open(otherFile.durable, file: CrashingFile([]), capacity: 10)
        #expect(loaded.store.table.count == 0 && loaded.problem != nil)
    }

    @Test func aCorruptRecordKeepsWhatCameBeforeIt() throws {
        let file = CrashingFile([])
        var store = try DeliveredStore.open([], file: file, capacity: 10).store
        for id: UInt32 in 1...3 {
            try store.record(NotifBusClient.Notification(identifier: "n\(id)"), desktopId: id, category: nil, routes: Self.routes, caller: nil)
        }
        var bytes = file.durable
        // Flip one byte inside the third record's body.
        bytes[bytes.count - 5] ^= 0x20
        let loaded = try DeliveredStore.open(bytes, file: CrashingFile([]), capacity: 10)
        #expect(loaded.store.table.delivered.map(\.desktopId) == [1, 2])
        #expect(loaded.problem?.hasPrefix("a checksum mismatch at byte") == true)
        let foreign = try DeliveredStore.open(Array("not a journal".utf8), file: CrashingFile([]), capacity: 10)
        #expect(foreign.store.table.count == 0 && foreign.problem == "not a delivered-table journal (bad header)")
    }

    @Test func aFailedWriteLeavesTheTableAsItWas() throws {
        // Steps 0-3 are the rewrite at open, 4 the append, 5 its sync: the sync fails.
        let file = CrashingFile([], crashAtStep: 5)
        var store = try DeliveredStore.open([], file: file, capacity: 10).store
        #expect(throws: JournalFileError.self) {
            try store.record(NotifBusClient.Notification(identifier: "a"), desktopId: 1, category: nil, routes: Self.routes, caller: nil)
        }
        #expect(store.table.count == 0)
    }

    @Test func aSmallerCapacityEvictsOnOpen() throws {
        let file = CrashingFile([])
        var store = try DeliveredStore.open([], file: file, capacity: 10).store
        for id: UInt32 in 1...4 {
            try store.record(NotifBusClient.Notification(identifier: "n\(id)"), desktopId: id, category: nil, routes: Self.routes, caller: nil)
        }
        let loaded = try DeliveredStore.open(file.durable, file: CrashingFile([]), capacity: 2)
        #expect(loaded.store.table.delivered.map(\.desktopId) == [3, 4])
        #expect(loaded.evicted.sorted() == [1, 2])
    }
}
