// `fdatasync` on a thread of its own, so that the event loop goes on running chains while
// the disk works: the loop asks for a sync by writing the journal's descriptor into one
// pipe, the thread syncs and writes the result (0 or errno) into another, whose read end
// the loop watches. One sync is in flight at a time; the journal keeps its descriptor open
// and unchanged until the loop has read the result (`StateJournal.beginSync`/`endSync`).
// Pipe writes of 4 bytes are atomic, so the two ends need no lock.
import Glibc

final class JournalSyncer {
    /// The loop writes requests here; the thread reads them.
    private let requestRead: Int32
    private let requestWrite: Int32
    /// The thread writes results here; the loop watches `resultRead`.
    let resultRead: Int32
    private let resultWrite: Int32
    private(set) var inFlight = false

    /// Starts the thread; nil when the system gives no pipe or thread (the loop then syncs
    /// in line).
    init?() {
        var request: [Int32] = [-1, -1]
        var result: [Int32] = [-1, -1]
        guard pipe(&request) == 0 else { return nil }
        guard pipe(&result) == 0 else {
            close(request[0])
            close(request[1])
            return nil
        }
        for fd in request + result { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        _ = fcntl(result[0], F_SETFL, O_NONBLOCK)
        requestRead = request[0]
        requestWrite = request[1]
        resultRead = result[0]
        resultWrite = result[1]
        let ends = UnsafeMutablePointer<Int32>.allocate(capacity: 2)
        ends[0] = requestRead
        ends[1] = resultWrite
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { raw in
                let ends = raw!.assumingMemoryBound(to: Int32.self)
                JournalSyncer.serve(requests: ends[0], results: ends[1])
                ends.deallocate()
                return nil
            }, ends)
        guard rc == 0 else {
            ends.deallocate()
            for fd in [requestRead, requestWrite, resultRead, resultWrite] { close(fd) }
            return nil
        }
        pthread_detach(thread)
    }

    /// The thread's loop: one sync per request, until the request pipe is closed.
    private static func serve(requests: Int32, results: Int32) {
        var fd: Int32 = 0
        while readExactly(requests, &fd) {
            var outcome: Int32 = fdatasync(fd) == 0 ? 0 : errno
            _ = withUnsafeBytes(of: &outcome) { writeAll(results, $0) }
        }
        close(requests)
        close(results)
    }

    private static func readExactly(_ fd: Int32, _ value: inout Int32) -> Bool {
        withUnsafeMutableBytes(of: &value) { raw in
            var got = 0
            while got < raw.count {
                let n = read(fd, raw.baseAddress! + got, raw.count - got)
                if n > 0 {
                    got += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    return false
                }
            }
            return true
        }
    }

    /// Asks the thread to sync `fd`; false (nothing asked) when the request cannot be written.
    func start(_ fd: Int32) -> Bool {
        precondition(!inFlight, "one journal sync at a time")
        var fd = fd
        guard withUnsafeBytes(of: &fd, { writeAll(requestWrite, $0) }) else { return false }
        inFlight = true
        return true
    }

    /// The result of the sync in flight once the thread wrote it: 0, or fdatasync's errno.
    /// With `waitMs` the call waits that long for it (shutdown); nil while it is not there.
    func result(waitMs: Int32 = 0) -> Int32? {
        guard inFlight else { return nil }
        if waitMs > 0 {
            var p = pollfd(fd: resultRead, events: Int16(POLLIN), revents: 0)
            _ = poll(&p, 1, waitMs)
        }
        var outcome: Int32 = 0
        let n = withUnsafeMutableBytes(of: &outcome) { read(resultRead, $0.baseAddress!, $0.count) }
        guard n == MemoryLayout<Int32>.size else { return nil }
        inFlight = false
        return outcome
    }

    deinit {
        // Closing the request pipe ends the thread, which closes its own ends.
        close(requestWrite)
        close(resultRead)
    }
}
