// Prepares and binds the broker's Unix socket: checks the folder against planted paths,
// refuses to steal a live broker's socket, replaces a stale one, applies the socket mode,
// and listens. It does not accept connections; the server does.
import CLibevent
import Glibc
import NotifBusProtocol

/// Why the broker cannot listen; the CLI prints it and exits 1.
public struct ListenError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

public enum ListeningSocket {
    /// Connections the kernel may hold before `accept`.
    static let backlog: Int32 = 4096

    /// Creates the default folder if needed and checks that the socket's folder is safe.
    static func prepareFolder(for path: String) throws(ListenError) {
        let folder = parentFolder(of: path)
        let uid = getuid()
        if SocketPath.isDefault(path) {
            if !makePrivateFolder(folder) {
                throw ListenError("cannot create \(folder): \(SystemError("mkdir"))")
            }
        }
        var st = stat()
        guard lstat(folder, &st) == 0 else { throw ListenError("cannot use folder \(folder): \(SystemError("lstat"))") }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            throw ListenError("\(folder) is not a folder (a symbolic link is refused too)")
        }
        guard st.st_uid == uid || st.st_uid == 0 else {
            throw ListenError("refusing socket folder \(folder): owned by uid \(st.st_uid), not by \(uid)")
        }
        let othersWrite = st.st_mode & (S_IWGRP | S_IWOTH) != 0
        let sticky = st.st_mode & S_ISVTX != 0
        if SocketPath.isDefault(path) {
            guard st.st_uid == uid, st.st_mode & 0o077 == 0 else {
                throw ListenError("refusing socket folder \(folder): it must be owned by uid \(uid) with mode 0700")
            }
        } else if othersWrite && !sticky {
            throw ListenError("refusing socket folder \(folder): other users can write to it")
        }
    }

    static func parentFolder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let parent = String(path[..<slash])
        return parent.isEmpty ? "/" : parent
    }

    static func makeAddress(_ path: String) throws(ListenError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= SocketPath.maxBytes else {
            throw ListenError("socket path must be 1 to \(SocketPath.maxBytes) bytes: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    /// Whether something accepts connections at `path`.
    static func isLive(_ path: String) throws(ListenError) -> Bool {
        var address = try makeAddress(path)
        let fd = socket(AF_UNIX, notifbus_stream_cloexec(), 0)
        guard fd >= 0 else { throw ListenError("socket: \(SystemError("socket"))") }
        defer { close(fd) }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if rc == 0 { return true }
        let e = errno
        if e == ECONNREFUSED || e == ENOENT { return false }
        throw ListenError("cannot probe existing socket \(path): \(SystemError("connect", code: e))")
    }

    /// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
    static let activationFD: Int32 = 3

    /// A listening socket passed by systemd socket activation (`LISTEN_FDS`, `LISTEN_PID`
    /// naming this process), with its path; nil when the broker was not socket-activated.
    /// The variables are removed so that children do not inherit them.
    public static func activated() throws(ListenError) -> (fd: Int32, path: String)? {
        guard let pidText = getenv("LISTEN_PID").map({ String(cString: $0) }),
            let fdsText = getenv("LISTEN_FDS").map({ String(cString: $0) })
        else { return nil }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        guard let pid = Int32(pidText), pid == getpid() else { return nil }
        guard let count = Int(fdsText), count >= 1 else { throw ListenError("LISTEN_FDS=\(fdsText) passes no socket") }
        if count > 1 { logLine("notifbus: socket activation passed \(count) sockets; using the first") }
        let fd = activationFD
        var accepting: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0, accepting == 1 else {
            throw ListenError("descriptor \(fd) from socket activation is not a listening socket")
        }
        var address = sockaddr_un()
        var addressLength = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &addressLength) }
        }
        guard rc == 0, address.sun_family == sa_family_t(AF_UNIX) else {
            throw ListenError("descriptor \(fd) from socket activation is not a Unix socket")
        }
        let path = withUnsafeBytes(of: &address.sun_path) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return (fd, path)
    }

    /// Binds and listens at `path` with permission bits `mode`; returns the descriptor.
    public static func open(path: String, mode: mode_t) throws(ListenError) -> Int32 {
        try prepareFolder(for: path)
        var address = try makeAddress(path)
        var st = stat()
        if lstat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFSOCK else {
                throw ListenError("\(path) exists and is not a socket; leaving it alone")
            }
            if try isLive(path) {
                throw ListenError("another broker is already listening on \(path)")
            }
            guard unlink(path) == 0 || errno == ENOENT else {
                throw ListenError("cannot replace stale socket \(path): \(SystemError("unlink"))")
            }
        }
        let fd = socket(AF_UNIX, notifbus_stream_cloexec_nonblocking(), 0)
        guard fd >= 0 else { throw ListenError("socket: \(SystemError("socket"))") }
        // Bind under a umask that leaves no window with looser bits than asked for. The umask
        // is the process's: two binds at once (brokers of one test process) each restoring
        // what the other set would leave it at 0177 for good, so binds take turns.
        pthread_mutex_lock(umaskLock)
        let previous = umask(0o177)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        let bindErrno = errno
        umask(previous)
        pthread_mutex_unlock(umaskLock)
        guard rc == 0 else {
            close(fd)
            throw ListenError("cannot bind \(path): \(SystemError("bind", code: bindErrno))")
        }
        guard chmod(path, mode) == 0 else {
            let error = SystemError("chmod")
            close(fd)
            unlink(path)
            throw ListenError("cannot set mode of \(path): \(error)")
        }
        guard listen(fd, backlog) == 0 else {
            let error = SystemError("listen")
            close(fd)
            unlink(path)
            throw ListenError("cannot listen on \(path): \(error)")
        }
        return fd
    }
}

/// Held while `ListeningSocket.open` narrows the process's umask to bind. Never freed: one
/// for the life of the process.
nonisolated(unsafe) private let umaskLock: UnsafeMutablePointer<pthread_mutex_t> = {
    let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    pthread_mutex_init(lock, nil)
    return lock
}()
