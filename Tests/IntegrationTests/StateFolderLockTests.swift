// One process per state folder: a second broker or a second desktop bridge on a folder that
// another holds exits 1 naming the holder's pid, before it reads or writes anything there;
// the folder is free again once the holder is gone, however it ended. Real processes
// throughout (the desktop bridges run on a private session bus). The NATS bridge keeps no
// state folder: the broker's idempotency keys hold what it must not forget.
import Foundation
import Glibc
import Testing

@Suite(.ownThread, .timeLimit(.minutes(3))) struct StateFolderLockTests {
    /// The pid a lock file names, once its holder wrote it.
    static func holder(_ lockFile: String) -> Int32? {
        guard let text = try? String(contentsOfFile: lockFile, encoding: .utf8) else { return nil }
        return Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test func aSecondBrokerOnTheSameStateFolderIsRefusedAndNothingIsLost() throws {
        let folder = TempFolder()
        let state = folder.path + "/st"
        let a = try BrokerUnderTest(["--state-dir", state], folder: folder, socketName: "a.sock")
        #expect(try a.cli(["put", "a", #""fromA""#]).0 == 0)

        let b = try Child(Binaries.notifbus, ["broker", "--socket", folder.path + "/b.sock", "--state-dir", state])
        #expect(b.waitExit() == 1)
        #expect(b.stderr.contains("state folder \(state) is in use by another broker (pid \(a.child.pid)"), "\(b.stderr)")
        #expect(!RawClient.canConnect(folder.path + "/b.sock"), "the refused broker must not listen")
        #expect(Self.holder(state + "/broker.lock") == a.child.pid)

        // A crash frees the folder: the next broker takes it, with what the first acknowledged.
        a.child.signal(SIGKILL)
        #expect(a.child.waitExit() != nil)
        let c = try BrokerUnderTest(["--state-dir", state], folder: folder, socketName: "c.sock")
        #expect(try c.cli(["take", "a"]).1 == "\"fromA\"\n")
        #expect(Self.holder(state + "/broker.lock") == c.child.pid)
    }

    @Test func aSecondDesktopBridgeOnTheSameStateFolderIsRefused() throws {
        let desktop = try PrivateDesktop()
        let broker = try BrokerUnderTest()
        let state = broker.folder.path + "/desktop"
        let exe = URL(fileURLWithPath: Binaries.notifbus).deletingLastPathComponent().appendingPathComponent("notifbus-desktop").path
        func bridge() throws -> Child {
            try Child(exe, ["--socket", broker.socket, "--state-dir", state], environment: desktop.environment)
        }
        let first = try bridge()
        defer { first.signal(SIGKILL) }
        #expect(first.waitFor(.seconds(15)) { first.stderr.contains("serving channel") }, "\(first.stderr)")
        #expect(Self.holder(state + "/desktop.lock") == first.pid)

        let second = try bridge()
        #expect(second.waitExit() == 1)
        #expect(second.stderr.contains("is in use by another desktop bridge (pid \(first.pid)"), "\(second.stderr)")

        first.signal(SIGKILL)
        #expect(first.waitExit() != nil)
        let third = try bridge()
        defer { third.signal(SIGKILL) }
        #expect(third.waitFor(.seconds(15)) { third.stderr.contains("serving channel") }, "\(third.stderr)")
        #expect(Self.holder(state + "/desktop.lock") == third.pid)
    }
}
