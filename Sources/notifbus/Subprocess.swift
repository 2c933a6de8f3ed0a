// Runs a shell command with bytes on its stdin, capturing stdout and stderr, bounded by a
// timeout: the engine of `handle --exec`. posix_spawn and poll, so the CLI (which is also
// the broker) does not load Foundation.
import Glibc
import NotifBusClient

struct SubprocessResult {
    /// The exit status, or nil when the command was killed for running too long.
    let status: Int32?
    let stdout: [UInt8]
    let stderr: [UInt8]
}

enum Subprocess {
    /// Output kept from each stream; a command printing more is cut off there.
    static let maxOutputBytes = 16 << 20

    /// Runs `/bin/sh -c command` on a thread of its own and returns when it has exited.
    static func run(_ command: String, input: [UInt8], timeoutMs: Int64) async -> SubprocessResult {
        await withCheckedContinuation { continuation in
            let started = DetachedThread.start {
                continuation.resume(returning: runBlocking(command, input: input, timeoutMs: timeoutMs))
            }
            if !started { continuation.resume(returning: SubprocessResult(status: 127, stdout: [], stderr: Array("cannot start a thread".utf8))) }
        }
    }

    static func runBlocking(_ command: String, input: [UInt8], timeoutMs: Int64) -> SubprocessResult {
        var toChild: [Int32] = [-1, -1], fromOut: [Int32] = [-1, -1], fromErr: [Int32] = [-1, -1]
        guard makePipe(&toChild), makePipe(&fromOut), makePipe(&fromErr) else {
            return SubprocessResult(status: 127, stdout: [], stderr: Array("pipe: \(String(cString: strerror(errno)))".utf8))
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromOut[1], 1)
        posix_spawn_file_actions_adddup2(&actions, fromErr[1], 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        // The child starts with default signal handling and nothing blocked, whatever this
        // process ignores (SIGPIPE) or blocks.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("sh"), strdup("-c"), strdup(command), nil]
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, environ)
        for p in argv { free(p) }
        posix_spawn_file_actions_destroy(&actions)
        posix_spawnattr_destroy(&attributes)
        close(toChild[0])
        close(fromOut[1])
        close(fromErr[1])
        guard rc == 0 else {
            close(toChild[1])
            close(fromOut[0])
            close(fromErr[0])
            return SubprocessResult(status: 127, stdout: [], stderr: Array("cannot run /bin/sh: \(String(cString: strerror(rc)))".utf8))
        }
        _ = fcntl(toChild[1], F_SETFL, fcntl(toChild[1], F_GETFL) | O_NONBLOCK)

        var out: [UInt8] = [], err: [UInt8] = []
        var written = 0
        var writeFD = toChild[1]
        if input.isEmpty { close(writeFD); writeFD = -1 }
        var readFDs = [fromOut[0], fromErr[0]]
        let deadline = monotonicMilliseconds() + timeoutMs
        var timedOut = false
        var buffer = [UInt8](repeating: 0, count: 65536)
        while writeFD >= 0 || readFDs.contains(where: { $0 >= 0 }) {
            let left = deadline - monotonicMilliseconds()
            if left <= 0 {
                timedOut = true
                break
            }
            var fds = [
                pollfd(fd: writeFD, events: Int16(POLLOUT), revents: 0),
                pollfd(fd: readFDs[0], events: Int16(POLLIN), revents: 0),
                pollfd(fd: readFDs[1], events: Int16(POLLIN), revents: 0),
            ]
            let n = poll(&fds, 3, Int32(min(left, 1000)))
            if n < 0 && errno != EINTR { break }
            if writeFD >= 0 && fds[0].revents != 0 {
                let w = input.withUnsafeBytes { write(writeFD, $0.baseAddress! + written, $0.count - written) }
                if w > 0 { written += w }
                if w < 0 && errno != EAGAIN && errno != EINTR || written == input.count {
                    close(writeFD)
                    writeFD = -1
                }
            }
            for i in 0..<2 where readFDs[i] >= 0 && fds[i + 1].revents != 0 {
                let r = buffer.withUnsafeMutableBytes { read(readFDs[i], $0.baseAddress!, $0.count) }
                if r > 0 {
                    if i == 0 { if out.count < maxOutputBytes { out += buffer[0..<r] } } else if err.count < maxOutputBytes { err += buffer[0..<r] }
                } else if r == 0 || (errno != EINTR && errno != EAGAIN) {
                    close(readFDs[i])
                    readFDs[i] = -1
                }
            }
        }
        if writeFD >= 0 { close(writeFD) }
        for fd in readFDs where fd >= 0 { close(fd) }
        if timedOut {
            kill(pid, SIGTERM)
            usleep(200_000)
            kill(pid, SIGKILL)
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        if timedOut { return SubprocessResult(status: nil, stdout: out, stderr: err) }
        // WIFEXITED / WEXITSTATUS, spelled out: the macros do not import.
        let exited = status & 0x7F == 0
        return SubprocessResult(status: exited ? (status >> 8) & 0xFF : 128 + (status & 0x7F), stdout: out, stderr: err)
    }

    /// A pipe whose ends close on exec (the child gets its copies through dup2).
    static func makePipe(_ fds: inout [Int32]) -> Bool {
        guard pipe(&fds) == 0 else { return false }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return true
    }

    static func monotonicMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
