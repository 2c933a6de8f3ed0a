// The bridge's `--state-dir`: the folder, and the delivered table's journal file in it.
// Everything the bridge keeps on disk is opened here, once, at start. It refuses a folder
// another user could write to and never follows a link; the journal's rules are
// DeliveredStore's.
import Glibc
import NotifBusDesktop

/// Why the state folder cannot be used.
struct StateFolderError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

enum StateFolder {
    static let journalName = "delivered.journal"

    /// Checks the folder, which `StateFolderLock.claim` made (mode 0700, with missing
    /// parents) before, and opens the journal: its content and the file to append to.
    static func open(_ folder: String) throws(StateFolderError) -> (bytes: [UInt8], file: JournalOnDisk) {
        var st = stat()
        guard lstat(folder, &st) == 0 else { throw StateFolderError("cannot read \(folder): \(errorText())") }
        guard st.st_mode & S_IFMT == S_IFDIR else { throw StateFolderError("\(folder) is not a folder (a symbolic link is refused too)") }
        // Another user who owns or can write the folder could plant links or forge clicks.
        guard st.st_uid == getuid() || st.st_uid == 0 else {
            throw StateFolderError("refusing state folder \(folder): owned by uid \(st.st_uid), not by \(getuid())")
        }
        guard st.st_mode & (S_IWGRP | S_IWOTH) == 0 else {
            throw StateFolderError("refusing state folder \(folder): other users can write to it")
        }
        let path = folder + "/" + journalName
        var bytes: [UInt8] = []
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        if fd >= 0 {
            defer { close(fd) }
            guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { throw StateFolderError("\(path) is not a regular file; move it away") }
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n >= 0 else { throw StateFolderError("cannot read \(path): \(errorText())") }
                if n == 0 { break }
                bytes += chunk[0..<n]
            }
        } else if errno != ENOENT {
            throw StateFolderError("cannot open \(path): \(errorText())")
        }
        return (bytes, JournalOnDisk(folder: folder, path: path))
    }

    static func errorText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

    /// Writes all of `bytes`; false (errno set) on an error.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }
}

/// The journal file: appends through one descriptor, rewrites through a temp file.
final class JournalOnDisk: JournalFile {
    let folder: String
    let path: String
    private var fd: Int32 = -1

    init(folder: String, path: String) {
        self.folder = folder
        self.path = path
    }

    deinit { if fd >= 0 { close(fd) } }

    private func fail(_ what: String) -> JournalFileError { JournalFileError("\(what) \(path): \(StateFolder.errorText())") }

    func append(_ bytes: [UInt8]) throws(JournalFileError) {
        guard fd >= 0 else { throw JournalFileError("\(path) is not open") }
        guard StateFolder.writeAll(fd, bytes) else { throw fail("write") }
    }

    func sync() throws(JournalFileError) {
        guard fdatasync(fd) == 0 else { throw fail("fdatasync") }
    }

    func truncate(to length: Int) throws(JournalFileError) {
        guard ftruncate(fd, off_t(length)) == 0 else { throw fail("ftruncate") }
    }

    func replace(with bytes: [UInt8]) throws(JournalFileError) {
        let tmp = path + ".tmp"
        unlink(tmp)
        let tmpFD = Glibc.open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard tmpFD >= 0 else { throw fail("open \(tmp) for") }
        guard StateFolder.writeAll(tmpFD, bytes), fsync(tmpFD) == 0 else {
            let error = fail("write \(tmp) for")
            close(tmpFD)
            unlink(tmp)
            throw error
        }
        close(tmpFD)
        guard rename(tmp, path) == 0 else {
            let error = fail("rename \(tmp) over")
            unlink(tmp)
            throw error
        }
        let dirFD = Glibc.open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            fsync(dirFD)
            close(dirFD)
        }
        if fd >= 0 { close(fd) }
        fd = Glibc.open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw fail("open") }
    }
}
