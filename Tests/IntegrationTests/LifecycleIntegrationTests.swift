// The broker's lifecycle and transport rules: readiness line, live and stale sockets, a
// path that is not a socket, flag errors, socket mode, uid checks and the client limit.
import Foundation
import Glibc
import NotifBusProtocol
import Testing

@Suite(.ownThread, .timeLimit(.minutes(5))) struct LifecycleIntegrationTests {
    @Test func readinessLineAndSocketMode() throws {
        let broker = try BrokerUnderTest()
        #expect(broker.child.waitFor { broker.child.stderr.contains("notifbus: listening on \(broker.socket)") })
        var st = stat()
        #expect(stat(broker.socket, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o600)
        let custom = try BrokerUnderTest(["--socket-mode", "660"])
        #expect(stat(custom.socket, &st) == 0 && st.st_mode & 0o777 == 0o660)
    }

    @Test func liveSocketIsLeftAlone() throws {
        let broker = try BrokerUnderTest()
        let second = try Child(Binaries.notifbus, ["broker", "--socket", broker.socket])
        #expect(second.waitExit() == 1)
        #expect(second.stderr.contains("another broker"))
        #expect(RawClient.canConnect(broker.socket))
    }

    @Test func staleSocketIsReplacedAndNonSocketKept() throws {
        let folder = TempFolder()
        let stale = folder.path + "/s"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(stale.utf8))
        }
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        close(fd)  // bound, never listened: connecting is refused
        let broker = try BrokerUnderTest(folder: folder)
        #expect(RawClient.canConnect(broker.socket))

        let plain = folder.path + "/plain"
        _ = FileManager.default.createFile(atPath: plain, contents: Data("keep me".utf8))
        let refused = try Child(Binaries.notifbus, ["broker", "--socket", plain])
        #expect(refused.waitExit() == 1)
        #expect(try String(contentsOfFile: plain, encoding: .utf8) == "keep me")
    }

    @Test(arguments: [
        ["--hop-timeout", "5x"], ["--hop-timeout", "0ms"], ["--call-timeout", "1h"], ["--max-frame", "0"], ["--max-queue", "-1"],
        ["--max-clients", "0"], ["--socket-mode", "999"], ["--allow-uid", "bob"], ["--bogus"], ["extra"],
        ["--once-keys", "-1"], ["--once-age", "0h"], ["--once-age", "1d"], ["--once-bytes", "many"],
    ])
    func badFlagsExitTwo(_ flags: [String]) throws {
        let folder = TempFolder()
        let child = try Child(Binaries.notifbus, ["broker", "--socket", folder.path + "/s"] + flags)
        #expect(child.waitExit() == 2)
        let lines = child.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(child.stderr)")
    }

    /// The key window's flags reach the broker: `--once-age` takes hours and fractions.
    @Test func onceFlagsSetTheWindow() throws {
        let broker = try BrokerUnderTest(["--once-keys", "5", "--once-age", "1.5h", "--once-bytes", "4096"])
        let client = try RawClient(broker.socket)
        try client.hello()
        let once = client.request(#"{"op":"status","id":1}"#)?["result"]?["once"]
        #expect(once == ["keys": 0, "bytes": 0, "maxKeys": 5, "maxAgeMs": 5_400_000, "maxBytes": 4096], "\(String(describing: once))")
    }

    @Test func maxClientsIsEnforced() throws {
        let broker = try BrokerUnderTest(["--max-clients", "2"])
        usleep(200_000)  // let the broker see the readiness probe's connection close
        let a = try RawClient(broker.socket), b = try RawClient(broker.socket)
        try a.hello()
        try b.hello()
        let c = try RawClient(broker.socket)
        #expect(errorCode(c.read()) == "too_many_clients")
        #expect(c.isClosedByPeer())
        #expect(a.request(#"{"op":"ping","id":1}"#)?["result"] == [:])
    }

    @Test func otherUIDIsForbiddenUnlessAllowed() throws {
        guard getuid() == 0 else { return }  // dropping privileges needs root
        for allowed in [false, true] {
            let folder = TempFolder()
            chmod(folder.path, 0o755)
            let broker = try BrokerUnderTest(["--socket-mode", "0666"] + (allowed ? ["--allow-uid", "65534"] : []), folder: folder)
            let script = """
                import os, socket, struct, json
                os.setgid(65534); os.setuid(65534)
                s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(\(String(reflecting: broker.socket)))
                body = json.dumps({"op": "hello", "id": 1, "protocol": 1}).encode()
                s.sendall(struct.pack(">I", len(body)) + body)
                n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
                print(json.loads(s.recv(n, socket.MSG_WAITALL)))
                """
            let child = try Child(SystemPython.path, ["-c", script])
            #expect(child.waitExit() == 0, "\(child.stderr)")
            _ = broker
            if allowed {
                #expect(child.stdout.contains("'result'"), "\(child.stdout)")
            } else {
                #expect(child.stdout.contains("forbidden"), "\(child.stdout)")
            }
        }
    }

    @Test func unsafeSocketFolderIsRefused() throws {
        let folder = TempFolder()
        chmod(folder.path, 0o777)
        let child = try Child(Binaries.notifbus, ["broker", "--socket", folder.path + "/s"])
        #expect(child.waitExit() == 1)
        #expect(child.stderr.contains("other users can write"))
    }
}

/// A Python that an unprivileged uid can run (pyenv shims live under /root).
enum SystemPython {
    static let path: String = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "/usr/bin/env"
}
