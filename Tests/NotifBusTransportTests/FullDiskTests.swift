// A full disk, simulated by a file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) on a broker
// child process: the limit is per process, so it cannot be set on the test process whose
// other tests write files at the same time. A refused write is answered storage_failed,
// changes nothing, and what was acknowledged is all there after a restart.
import CLibevent
import Glibc
import NotifBusProtocol
import Testing

@testable import NotifBusTransport

/// A `notifbus broker` child on a socket in `folder`, its stderr in a file there.
final class BrokerChild {
    let pid: pid_t
    let socket: String
    let logPath: String

    /// The built `notifbus`: $NOTIFBUS_BIN, else beside the test bundle.
    static var binary: String {
        if let env = getenv("NOTIFBUS_BIN"), !String(cString: env).isEmpty { return String(cString: env) }
        let bundle = CommandLine.arguments[0]
        let folder = bundle.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return (folder.isEmpty ? "." : folder) + "/notifbus"
    }

    /// Starts the broker, under `ulimit -f fileLimitKiB` when given, and waits (bounded)
    /// until its socket accepts connections.
    init(folder: String, stateDirectory: String, fileLimitKiB: Int?, name: String) throws {
        socket = folder + "/bus"
        logPath = folder + "/\(name).log"
        var args = [BrokerChild.binary, "broker", "--socket", socket, "--state-dir", stateDirectory]
        if let fileLimitKiB {
            // An ignored signal stays ignored across exec: the write then fails with EFBIG.
            args = ["/bin/bash", "-c", "trap '' XFSZ; ulimit -f \(fileLimitKiB) && exec \"$@\"", "bash"] + args
        }
        guard access(args[0], X_OK) == 0 else { throw TestFailure("\(args[0]) is not built") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, logPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv = args.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, args[0], &actions, nil, argv, environ)
        guard rc == 0 else { throw TestFailure("posix_spawn \(args[0]): \(String(cString: strerror(rc)))") }
        pid = child
        let deadline = nowMs() + 10_000
        while (try? connect()) == nil {
            guard nowMs() < deadline, !exited() else {
                stop()
                throw TestFailure("the broker did not start: \(log)")
            }
            var none = pollfd()
            _ = poll(&none, 0, 20)
        }
    }

    deinit { stop() }

    var log: String { String(decoding: fileBytes(logPath) ?? [], as: UTF8.self) }

    private var reaped = false

    func exited() -> Bool {
        guard !reaped else { return true }
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid { reaped = true }
        return reaped
    }

    /// SIGTERM, then SIGKILL if it has not exited within 5 s; always reaped.
    func stop() {
        guard !exited() else { return }
        kill(pid, SIGTERM)
        let deadline = nowMs() + 5_000
        while !exited() {
            if nowMs() >= deadline {
                kill(pid, SIGKILL)
                var status: Int32 = 0
                waitpid(pid, &status, 0)
                reaped = true
                return
            }
            var none = pollfd()
            _ = poll(&none, 0, 10)
        }
    }

    func connect() throws -> Peer {
        let fd = Glibc.socket(AF_UNIX, notifbus_stream_cloexec(), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(socket.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path)
            raw[path.count] = 0
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw TestFailure("connect \(socket): \(String(cString: strerror(errno)))")
        }
        return Peer(fd: fd)
    }
}

extension Peer {
    /// Sends a request and waits (bounded, on poll) for the frame that answers it.
    func request(_ text: String, id: Int64, timeoutMs: UInt64 = 10_000) -> JSONValue? {
        send(text)
        let deadline = nowMs() + timeoutMs
        var seen: [JSONValue] = []
        while true {
            seen += frames()
            if let reply = seen.first(where: { $0["id"] == .integer(id) }) { return reply }
            guard !sawEnd, nowMs() < deadline else { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&pfd, 1, 50)
            readAvailable()
        }
    }
}

@Suite struct FullDiskTests {
    @Test func aWriteTheDiskCannotTakeIsRefusedAndChangesNothing() throws {
        let folder = try TempFolder()
        let state = folder.path + "/state"
        let small = #"{"emailId":"e-1"}"#
        let big = "\"" + String(repeating: "b", count: 8000) + "\""
        do {
            // 4 KiB: the first records fit, an 8 KB value does not.
            let broker = try BrokerChild(folder: folder.path, stateDirectory: state, fileLimitKiB: 4, name: "limited")
            let c = try broker.connect()
            #expect(c.request(#"{"op":"hello","id":0,"protocol":1}"#, id: 0)?["result"] != nil)
            #expect(c.request(#"{"op":"put","id":1,"slot":"kept","value":"# + small + "}", id: 1)?["result"]?["replaced"] == .bool(false))
            let sizeBefore = fileSize(state + "/" + StateJournal.fileName)
            let refused = c.request(#"{"op":"put","id":2,"slot":"big","value":"# + big + "}", id: 2)
            #expect(errorCode(refused) == "storage_failed", "\(String(describing: refused))")
            // The torn record was cut off again; memory agrees with the disk.
            #expect(fileSize(state + "/" + StateJournal.fileName) == sizeBefore)
            #expect(c.request(#"{"op":"peek","id":3,"slot":"big"}"#, id: 3)?["result"] == .null)
            #expect(c.request(#"{"op":"take","id":4,"slot":"kept"}"#, id: 4)?["result"]?["emailId"] == "e-1")
            // A take changes the journal too: with room for it, it is stored.
            #expect(c.request(#"{"op":"put","id":5,"slot":"after","value":"# + small + "}", id: 5)?["result"] != nil)
            broker.stop()
            #expect(broker.log.contains("File too large"), "\(broker.log)")
        }
        let restarted = try BrokerChild(folder: folder.path, stateDirectory: state, fileLimitKiB: nil, name: "restarted")
        let c = try restarted.connect()
        #expect(c.request(#"{"op":"hello","id":0,"protocol":1}"#, id: 0)?["result"] != nil)
        #expect(c.request(#"{"op":"peek","id":1,"slot":"big"}"#, id: 1)?["result"] == .null)
        #expect(c.request(#"{"op":"peek","id":2,"slot":"kept"}"#, id: 2)?["result"] == .null)
        #expect(c.request(#"{"op":"peek","id":3,"slot":"after"}"#, id: 3)?["result"]?["emailId"] == "e-1")
        #expect(!restarted.log.contains("corrupt"), "\(restarted.log)")
    }
}
