// The bridge's applied-id store on disk: what is synced survives a reopen, a torn last line
// is cut off, the window forgets only the oldest ids, and sequences never go back.
import Glibc
import NotifBusNATS
import NotifBusProtocol
import Testing

@Suite struct AppliedStoreTests {
    /// Removes a test's state folder: the store's file, its temp file, the folders.
    func remove(_ dir: String) {
        for name in ["/nats-d1.applied", "/nats-d1.applied.tmp"] { unlink(dir + name) }
        if rmdir(dir) != 0 { unlink(dir) }
        rmdir(String(dir.dropLast("/state".count)))
    }

    func folder() -> String {
        var template = Array("/tmp/nb-store-XXXXXX".utf8CString)
        let path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        return path + "/state"
    }

    @Test func syncedRecordsSurviveAReopen() throws {
        let dir = folder()
        defer { remove(dir) }
        do {
            let store = try AppliedStore(folder: dir, device: "d1", window: 10)
            _ = store.recordIntent("a")
            _ = store.recordIntent("b")
            store.recordApplied("a", outcome: ["msgId": "a"])
            try store.sync()
            _ = store.recordIntent("c")  // never synced: as if the process died here
        }
        let again = try AppliedStore(folder: dir, device: "d1", window: 10)
        #expect(again.state(of: "a") == .applied(outcome: ["msgId": "a"]))
        #expect(again.state(of: "b") == .intended(sequence: 2))
        #expect(again.state(of: "c") == nil)
        #expect(again.unresolved.map(\.id) == ["b"])
        #expect(again.recordIntent("d") == 3)
    }

    @Test func onlyIntentsMakeASyncNecessaryBeforeSending() throws {
        // The bridge fsyncs before sending a group only when an intent is not on disk yet;
        // outcomes wait for the next batch's intents (group commit).
        let dir = folder()
        defer { remove(dir) }
        let store = try AppliedStore(folder: dir, device: "d1", window: 10)
        #expect(!store.hasUnsyncedIntents)
        _ = store.recordIntent("a")
        #expect(store.hasUnsyncedIntents)
        try store.sync()
        #expect(!store.hasUnsyncedIntents)
        store.recordApplied("a", outcome: nil)
        #expect(store.hasUnsynced && !store.hasUnsyncedIntents)
        _ = store.recordIntent("b")
        try store.sync()
        #expect(!store.hasUnsynced && !store.hasUnsyncedIntents)
        let reopened = try AppliedStore(folder: dir, device: "d1", window: 10)
        #expect(reopened.state(of: "a") == .applied(outcome: nil))
        #expect(reopened.state(of: "b") == .intended(sequence: 2))
    }

    @Test func aTornLastLineIsCutOff() throws {
        let dir = folder()
        defer { remove(dir) }
        do {
            let store = try AppliedStore(folder: dir, device: "d1", window: 10)
            store.recordApplied("a", outcome: nil)
            try store.sync()
        }
        let path = dir + "/nats-d1.applied"
        let fd = open(path, O_WRONLY | O_APPEND)
        let torn = Array(#"{"a":"b","r":{"msg"#.utf8)
        _ = torn.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        let store = try AppliedStore(folder: dir, device: "d1", window: 10)
        #expect(store.state(of: "a") == .applied(outcome: nil))
        #expect(store.state(of: "b") == nil)
        store.recordApplied("c", outcome: nil)
        try store.sync()
        let reopened = try AppliedStore(folder: dir, device: "d1", window: 10)
        #expect(reopened.state(of: "c") == .applied(outcome: nil))
    }

    @Test func theWindowForgetsTheOldestOnly() throws {
        let dir = folder()
        defer { remove(dir) }
        do {
            let store = try AppliedStore(folder: dir, device: "d1", window: 3)
            for id in ["a", "b", "c", "d", "e"] { store.recordApplied(id, outcome: nil) }
            try store.sync()
            #expect(store.state(of: "b") == nil)
            #expect(store.state(of: "c") == .applied(outcome: nil))
        }
        let store = try AppliedStore(folder: dir, device: "d1", window: 3)
        #expect(["a", "b"].allSatisfy { store.state(of: $0) == nil })
        #expect(["c", "d", "e"].allSatisfy { store.state(of: $0) == .applied(outcome: nil) })
    }

    @Test func sequencesStayAboveTheMarker() throws {
        let dir = folder()
        defer { remove(dir) }
        do {
            let store = try AppliedStore(folder: dir, device: "d1", window: 10)
            store.raiseSequence(to: 40)
            try store.sync()
        }
        let store = try AppliedStore(folder: dir, device: "d1", window: 10)
        #expect(store.recordIntent("x") == 41)
    }

    @Test func aFileWhereTheFolderShouldBeIsRefused() throws {
        let dir = folder()
        defer { remove(dir) }
        let fd = open(dir, O_WRONLY | O_CREAT, 0o600)
        close(fd)
        #expect(throws: StoreError.self) { try AppliedStore(folder: dir, device: "d1", window: 10) }
    }
}
