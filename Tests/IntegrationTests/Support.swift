// Support for integration tests: start the built `notifbus` binary on a socket in a fresh
// folder, run CLI processes, and speak raw frames. Every wait is bounded.
import Foundation
import Glibc
import NotifBusProtocol
import Testing

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

enum Binaries {
    /// The built `notifbus`: $NOTIFBUS_BIN, else beside the test bundle, else .build/debug.
    static let notifbus: String = {
        if let env = ProcessInfo.processInfo.environment["NOTIFBUS_BIN"], !env.isEmpty { return env }
        let besideBundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("notifbus").path
        if FileManager.default.isExecutableFile(atPath: besideBundle) { return besideBundle }
        return repositoryRoot.appendingPathComponent(".build/debug/notifbus").path
    }()

    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
}

/// A fresh, short folder (sun_path is 107 bytes) removed when the test ends.
final class TempFolder: @unchecked Sendable {
    let path: String

    init() {
        var template = Array("/tmp/nbt.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        path = made.map { String(cString: $0) } ?? "/tmp/nbt.fallback.\(getpid())"
        // 0700 whatever the umask: a broker of this process binding at this moment narrows it.
        chmod(path, 0o700)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// A pipe whose two ends are close-on-exec. Foundation's `Pipe` makes them inheritable, so a
/// process that another test starts in parallel could inherit a write end and hold it open:
/// the reader then waits for an end of file that comes only when that unrelated process
/// exits. The child given an end as its standard output or error gets it by `dup2`, which
/// clears the flag on the copy. The read end is a plain descriptor: `CapturedOutput` owns it.
struct ClosingPipe {
    let readFD: Int32
    let fileHandleForWriting: FileHandle

    init() throws {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw TestFailure("pipe: \(String(cString: strerror(errno)))") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        readFD = fds[0]
        fileHandleForWriting = FileHandle(fileDescriptor: fds[1], closeOnDealloc: true)
    }
}

/// What a child writes to its standard output and error, read by a thread of its own with
/// poll and read: no dispatch source, whose events came late or after the data was taken
/// (a 26 KB man page came back cut at 16 KB, and as a user with a soft limit of 1024
/// descriptors most ends of file came only after the 5 s bound). The thread owns the read
/// ends and closes them when both pipes have ended, or when the `Child` is gone.
final class CapturedOutput: @unchecked Sendable {
    private let lock = NSLock()
    private var out = Data()
    private var err = Data()
    /// Both pipes reached their end: the child, and whatever it left behind, closed them.
    private var ended = false
    /// The `Child` is gone: the reader stops at its next turn.
    private var abandoned = false

    var stdout: Data { lock.withLock { out } }
    var stderr: Data { lock.withLock { err } }
    var hasEnded: Bool { lock.withLock { ended } }
    func abandon() { lock.withLock { abandoned = true } }

    /// Reads `stdoutFD` and `stderrFD` until both end; polls at most 100 ms at a time, so
    /// that it sees `abandon()` however long a process left behind holds a pipe.
    func read(stdoutFD: Int32, stderrFD: Int32) {
        var fds = [stdoutFD, stderrFD]
        var buffer = [UInt8](repeating: 0, count: 65536)
        while fds.contains(where: { $0 >= 0 }) && !lock.withLock({ abandoned }) {
            var polled = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if poll(&polled, 2, 100) < 0 && errno != EINTR { break }
            for i in 0..<2 where fds[i] >= 0 && polled[i].revents != 0 {
                let n = Glibc.read(fds[i], &buffer, buffer.count)
                if n > 0 {
                    lock.withLock {
                        if i == 0 { out.append(contentsOf: buffer[0..<n]) } else { err.append(contentsOf: buffer[0..<n]) }
                    }
                } else if n == 0 || errno != EINTR {
                    close(fds[i])
                    fds[i] = -1
                }
            }
        }
        for fd in fds where fd >= 0 { close(fd) }
        lock.withLock { ended = true }
    }
}

/// A child process with captured output.
final class Child: @unchecked Sendable {
    let process = Process()
    private let output = CapturedOutput()
    private static let spawnLock = NSLock()

    init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        // Pipes are made and handed to the child, and the test's write ends closed, while no
        // other child of this process is being started: none can inherit them in between.
        Child.spawnLock.lock()
        defer { Child.spawnLock.unlock() }
        let stdoutPipe = try ClosingPipe()
        let stderrPipe = try ClosingPipe()
        process.standardOutput = stdoutPipe.fileHandleForWriting
        process.standardError = stderrPipe.fileHandleForWriting
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            close(stdoutPipe.readFD)
            close(stderrPipe.readFD)
            throw error
        }
        // The child has its own copies; the test's must go, or end of file never comes.
        try stdoutPipe.fileHandleForWriting.close()
        try stderrPipe.fileHandleForWriting.close()
        let output = self.output
        Thread.detachNewThread { output.read(stdoutFD: stdoutPipe.readFD, stderrFD: stderrPipe.readFD) }
    }

    var pid: Int32 { process.processIdentifier }
    var stdout: String { String(decoding: output.stdout, as: UTF8.self) }
    var stderr: String { String(decoding: output.stderr, as: UTF8.self) }
    var stdoutLines: [String] { stdout.split(separator: "\n").map(String.init) }

    /// Waits until `condition` holds, polling; false on timeout.
    func waitFor(_ timeout: Duration = .seconds(10), _ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition() { return true }
            usleep(5_000)
        }
        return condition()
    }

    /// Waits for exit; nil on timeout.
    @discardableResult
    func waitExit(_ timeout: Duration = .seconds(10)) -> Int32? {
        guard waitFor(timeout, { !process.isRunning }) else { return nil }
        // Everything the child wrote is read once both pipes reach end of file (a process it
        // left behind may hold them open: then at most a few seconds more).
        _ = waitFor(.seconds(5)) { output.hasEnded }
        return process.terminationStatus
    }

    func signal(_ signum: Int32) {
        if process.isRunning { kill(process.processIdentifier, signum) }
    }

    /// SIGTERM, then SIGKILL after a bound.
    func stop() {
        signal(SIGTERM)
        if waitExit(.seconds(3)) == nil {
            signal(SIGKILL)
            waitExit(.seconds(3))
        }
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
        }
        output.abandon()
    }
}

/// A broker started for one test.
final class BrokerUnderTest: @unchecked Sendable {
    let folder: TempFolder
    let socket: String
    let child: Child
    let arguments: [String]
    /// Children started with `spawn`, kept alive as long as the broker.
    private var children: [Child] = []
    private let lock = NSLock()

    init(_ extra: [String] = [], folder: TempFolder = TempFolder(), socketName: String = "s") throws {
        self.folder = folder
        socket = folder.path + "/" + socketName
        arguments = ["broker", "--socket", socket] + extra
        child = try Child(Binaries.notifbus, arguments)
        guard child.waitFor(.seconds(10), { RawClient.canConnect(socket) }) else {
            child.stop()
            throw TestFailure("broker did not become ready: \(child.stderr)")
        }
    }

    /// Runs `notifbus ARGS --socket S` to completion and returns (status, stdout, stderr).
    func cli(_ args: [String], timeout: Duration = .seconds(15)) throws -> (Int32, String, String) {
        let c = try Child(Binaries.notifbus, args + ["--socket", socket])
        guard let status = c.waitExit(timeout) else {
            c.signal(SIGKILL)
            throw TestFailure("notifbus \(args) did not finish: \(c.stderr)")
        }
        return (status, c.stdout, c.stderr)
    }

    /// Starts a long-running CLI process (observe, handle, monitor).
    func spawn(_ args: [String]) throws -> Child {
        let c = try Child(Binaries.notifbus, args + ["--socket", socket])
        lock.withLock { children.append(c) }
        return c
    }

    deinit {
        child.stop()
        for c in lock.withLock({ children }) { c.signal(SIGKILL) }
    }
}

/// Raw frames over a blocking socket with poll-bounded reads.
final class RawClient {
    let fd: Int32
    private var decoder = FrameDecoder()

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0, RawClient.connect(fd, path) else {
            if fd >= 0 { close(fd) }
            throw TestFailure("cannot connect to \(path): \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(fd) }

    static func connect(_ fd: Int32, _ path: String) -> Bool {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count <= 107 else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
    }

    static func canConnect(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        return connect(fd, path)
    }

    func sendRaw(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            offset += n
        }
    }

    func send(_ text: String) {
        let body = Array(text.utf8)
        sendRaw(FrameHeader.encode(length: body.count) + body)
    }

    /// The next frame, or nil on timeout or when the broker closed the connection.
    func read(timeout: Duration = .seconds(20)) -> JSONValue? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let body = try? decoder.next() { return try? JSONValue(parsing: body) }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000) + 1
            guard poll(&pfd, 1, ms) > 0 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            guard n > 0 else { return nil }
            decoder.append(buffer[0..<n])
        }
    }

    /// Whether the broker closed the connection within `timeout` (frames before it are skipped).
    func isClosedByPeer(timeout: Duration = .seconds(3)) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n <= 0 { return true }
        }
        return false
    }

    func request(_ text: String, timeout: Duration = .seconds(20)) -> JSONValue? {
        send(text)
        return read(timeout: timeout)
    }

    func hello(name: String = "raw") throws {
        guard let reply = request("{\"op\":\"hello\",\"id\":0,\"protocol\":1,\"name\":\"\(name)\"}"), reply["result"] != nil else {
            throw TestFailure("hello failed")
        }
    }
}

func errorCode(_ frame: JSONValue?) -> String? {
    frame?["error"]?["code"]?.stringValue
}
