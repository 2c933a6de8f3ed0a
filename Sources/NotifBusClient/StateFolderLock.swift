// One process per state folder: the broker's and the bridges' `--state-dir` each hold an
// exclusive `flock` on a lock file inside the folder for as long as they live. Two processes
// writing one journal would each acknowledge writes the other then loses. This only
// claims the folder; what is kept in it is the claimant's business.
import Glibc

/// A state folder claimed by this process. The lock lasts until the process ends (the
/// kernel drops it then, whatever the way out); it is never handed to a program this
/// process runs (close-on-exec).
package struct StateFolderLock: Sendable {
    /// The lock file's path: `FOLDER/NAME.lock`.
    package let path: String

    /// Why the folder could not be claimed; `description` is the one line to print.
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
        /// The pid written by the process that holds the folder, when it is held.
        package let holder: Int32?
    }

    /// Creates `folder` when it is missing (mode 0700, and each missing parent too, as a
    /// fresh account has no `~/.local/state`), then takes `FOLDER/NAME.lock` without
    /// waiting and writes this process's pid into it. `what` names the claimant in the
    /// message another claimant gets (`broker`, `NATS bridge`).
    package static func claim(_ folder: String, name: String, for what: String) throws(Failure) -> StateFolderLock {
        try createFolder(folder)
        let path = folder + "/" + name + ".lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw Failure(description: "cannot open the lock file \(path): \(String(cString: strerror(errno)))", holder: nil)
        }
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            defer { close(fd) }
            guard code == EWOULDBLOCK else {
                throw Failure(description: "cannot lock \(path): \(String(cString: strerror(code)))", holder: nil)
            }
            let holder = holderPID(fd)
            let who = holder.map { "pid \($0)" } ?? "a process that has not written its pid yet"
            throw Failure(
                description: "state folder \(folder) is in use by another \(what) (\(who), holding \(path)); "
                    + "give each \(what) a --state-dir of its own",
                holder: holder)
        }
        // The pid for the next claimant's message; the lock, not this text, is what counts.
        let text = Array("\(getpid())\n".utf8)
        let written = ftruncate(fd, 0) == 0 && text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } == text.count
        if !written {
            defer { close(fd) }
            throw Failure(description: "cannot write \(path): \(String(cString: strerror(errno)))", holder: nil)
        }
        return StateFolderLock(path: path)
    }

    /// The pid the holder wrote. It writes it right after locking, so a claimant that comes
    /// in between reads an empty file: it looks again for a short while (bounded: 20 tries).
    static func holderPID(_ fd: Int32) -> Int32? {
        for attempt in 0..<20 {
            var buffer = [UInt8](repeating: 0, count: 32)
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            if n > 0, let end = buffer[..<n].firstIndex(of: UInt8(ascii: "\n")),
                let pid = Int32(String(decoding: buffer[..<end], as: UTF8.self)), pid > 0
            {
                return pid
            }
            if attempt < 19 { usleep(5_000) }
        }
        return nil
    }

    /// `folder` and its missing parents, each made with mode 0700; an existing folder is
    /// left as it is, and anything else at the path (a file, a symbolic link) is refused.
    static func createFolder(_ folder: String) throws(Failure) {
        guard !folder.isEmpty else { throw Failure(description: "the state folder's path is empty", holder: nil) }
        var prefix = folder.hasPrefix("/") ? "" : "."
        for part in folder.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + part
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw Failure(description: "cannot create \(prefix): \(String(cString: strerror(errno)))", holder: nil)
            }
        }
        var st = stat()
        guard lstat(folder, &st) == 0 else {
            throw Failure(description: "cannot use \(folder): \(String(cString: strerror(errno)))", holder: nil)
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            throw Failure(description: "\(folder) is not a folder (a symbolic link is refused too)", holder: nil)
        }
    }
}
