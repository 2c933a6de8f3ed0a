// Support for the transport's tests: fresh folders, the peer end of a socket pair that
// reads and writes frames with bounded waits, and a way to turn a `BrokerServer`'s loop
// until a condition holds. Nothing here sleeps to synchronize.
import CLibevent
import Glibc
import NotifBusCore
import NotifBusProtocol
import Testing

@testable import NotifBusTransport

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A fresh, short folder (sun_path is 107 bytes), removed with all it holds when dropped.
final class TempFolder {
    let path: String

    init() throws {
        var template = Array("/tmp/nbtt.XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw TestFailure("mkdtemp: \(String(cString: strerror(errno)))")
        }
        path = String(cString: made)
        // 0700 whatever the umask: a broker of this process binding at this moment narrows it.
        chmod(path, 0o700)
    }

    deinit {
        TempFolder.remove(path)
    }

    static func remove(_ path: String) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            if let dir = opendir(path) {
                while let entry = readdir(dir) {
                    let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                    if name != "." && name != ".." { remove(path + "/" + name) }
                }
                closedir(dir)
            }
            rmdir(path)
        } else {
            unlink(path)
        }
    }
}

func fileBytes(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    return readAll(fd)
}

func fileSize(_ path: String) -> Int {
    var st = stat()
    return stat(path, &st) == 0 ? Int(st.st_size) : -1
}

func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw TestFailure("open \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    guard bytes.withUnsafeBytes({ writeAll(fd, $0) }) else { throw TestFailure("write \(path)") }
}

func folderEntries(_ path: String) -> [String] {
    guard let dir = opendir(path) else { return [] }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != "." && name != ".." { names.append(name) }
    }
    return names.sorted()
}

func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }

/// The monotonic clock in milliseconds, for bounding waits.
func nowMs() -> UInt64 { monotonicNow() / 1_000_000 }

/// The test's end of a socket pair whose other end a `BrokerServer` adopted. Reads never
/// block: the test turns the server's loop between them.
final class Peer {
    private(set) var fd: Int32
    var decoder = FrameDecoder()
    /// Set once a read returned the end of the stream (or the connection was reset).
    private(set) var sawEnd = false
    /// Set when that end was a reset (the broker closed with input of ours unread).
    private(set) var resetByBroker = false
    /// Bytes read so far.
    private(set) var received = 0

    init(fd: Int32) {
        self.fd = fd
    }

    deinit { closeEnd() }

    func closeEnd() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    func send(_ text: String) {
        let body = utf8(text)
        sendRaw(FrameHeader.encode(length: body.count) + body)
    }

    /// Sends all of `bytes` without blocking: the broker end reads only when the test turns
    /// the loop, so callers keep what they send below the socket buffer (a short send is
    /// recorded as a test failure).
    func sendRaw(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
            if n <= 0 {
                Issue.record("peer send: \(String(cString: strerror(errno)))")
                return
            }
            offset += n
        }
    }

    /// Tries one send without blocking; the errno when it failed.
    func trySend(_ bytes: [UInt8]) -> Int32? {
        let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
        return n >= 0 ? nil : errno
    }

    /// Reads what the socket holds now into the decoder; false when nothing was there.
    @discardableResult
    func readAvailable() -> Bool {
        var any = false
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !sawEnd {
            let n = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress!, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                decoder.append(buffer[0..<n])
                received += n
                any = true
                continue
            }
            if n == 0 {
                sawEnd = true
            } else if errno == ECONNRESET {
                sawEnd = true
                resetByBroker = true
            }
            break
        }
        return any
    }

    /// Every complete frame decoded so far, as JSON.
    func frames() -> [JSONValue] {
        var out: [JSONValue] = []
        while let body = try? decoder.next() {
            guard let value = try? JSONValue(parsing: body) else {
                Issue.record("the broker sent a frame that is not JSON")
                continue
            }
            out.append(value)
        }
        return out
    }
}

/// A broker server on a socket in a fresh folder whose loop the test turns; connections
/// are socket pairs it adopts, never accepted ones.
final class ServerHarness {
    let folder: TempFolder
    let server: BrokerServer

    init(_ configure: (inout ServerOptions) -> Void = { _ in }) throws {
        folder = try TempFolder()
        var options = ServerOptions(socketPath: folder.path + "/bus")
        // As `notifbus broker` does: the broker's own uid is admitted (root is, whoever runs the tests).
        options.core.brokerUID = getuid()
        configure(&options)
        server = try BrokerServer(options: options)
    }

    /// A connection over a socket pair: the broker owns one end, the returned peer the
    /// other. `sendBufferBytes` bounds the broker end's send buffer, to make output back up.
    func connect(sendBufferBytes: Int32? = nil) throws -> (ConnectionID, Peer) {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, notifbus_stream_cloexec_nonblocking(), 0, &fds) == 0 else {
            throw TestFailure("socketpair: \(String(cString: strerror(errno)))")
        }
        if var size = sendBufferBytes {
            setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        let id = server.nextConnectionID
        server.adopt(fds[0], credentials: PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid()), now: monotonicNow())
        server.flushPending()
        return (id, Peer(fd: fds[1]))
    }

    /// Turns the loop, letting `peer` read between turns, until `condition` holds or
    /// `timeoutMs` passes; whether it held.
    @discardableResult
    func turn(until condition: () -> Bool, reading peer: Peer? = nil, timeoutMs: UInt64 = 10_000) -> Bool {
        let deadline = nowMs() + timeoutMs
        while true {
            peer?.readAvailable()
            if condition() { return true }
            guard nowMs() < deadline else { return false }
            _ = server.turn(maxWaitMs: 20)
        }
    }

    /// Sends `hello` and waits for its reply.
    func greet(_ peer: Peer) throws {
        peer.send(#"{"op":"hello","id":0,"protocol":1,"name":"transport-test"}"#)
        var replies: [JSONValue] = []
        turn(
            until: {
                replies += peer.frames()
                return !replies.isEmpty
            }, reading: peer)
        guard replies.first?["result"] != nil else { throw TestFailure("hello was not answered: \(replies)") }
    }

    /// Whether the core still counts any connection as its client.
    var coreHasClients: Bool { server.core.hasClients }

    /// The cut-offs the core reports in `status`.
    var reportedCutOffs: Int { server.core.buffers.cutOff }

    /// The libevent events now added to the server's base.
    var addedEvents: Int32 { event_base_get_num_events(server.base, UInt32(EVENT_BASE_COUNT_ADDED)) }
}
