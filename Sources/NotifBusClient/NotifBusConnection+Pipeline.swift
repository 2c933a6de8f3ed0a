// Pipelined requests on the Swift client: several requests written to the socket in one
// write, in the caller's order, whose replies are awaited later. It must not reorder
// requests, and it never waits for a reply before the whole group is written. Each request
// has the group's deadline, taken out with it when its reply comes.
import Dispatch
import NotifBusProtocol

/// The replies of a group of requests sent by `NotifBusConnection.pipeline`, in request order.
public final class PipelinedReplies: @unchecked Sendable {
    /// One request's outcome: its `result`, or the error it was answered with or failed by.
    public typealias Reply = Result<JSONValue, NotifBusError>
    private let lock = Lock()
    private var results: [Reply?]
    private var remaining: Int
    private var waiters: [Int: [CheckedContinuation<Reply, Never>]] = [:]
    /// Signalled once, when the last reply came: a thread in `waitAll` wakes once per group.
    private let allDone = DispatchSemaphore(value: 0)

    init(count: Int) {
        self.count = count
        results = Array(repeating: nil, count: count)
        remaining = count
        if count == 0 { allDone.signal() }
    }

    func fill(_ index: Int, _ result: Reply) {
        let (resume, last) = lock.withLock { () -> ([CheckedContinuation<Reply, Never>], Bool) in
            guard results[index] == nil else { return ([], false) }
            results[index] = result
            remaining -= 1
            return (waiters.removeValue(forKey: index) ?? [], remaining == 0)
        }
        for waiter in resume { waiter.resume(returning: result) }
        if last { allDone.signal() }
    }

    /// The number of requests in the group (kept apart from `results`, which `fill` changes
    /// under the lock while readers look).
    public let count: Int

    /// Whether reply `index` has come (or failed) already, so that `wait(for:)` would not wait.
    public func isComplete(_ index: Int) -> Bool { lock.withLock { results[index] != nil } }

    /// Whether every reply has come (or failed) already.
    public var isComplete: Bool { lock.withLock { remaining == 0 } }

    /// Waits for reply `index` (bounded by the pipeline's timeout).
    public func wait(for index: Int) async -> Reply {
        await withCheckedContinuation { continuation in
            let ready = lock.withLock { () -> Reply? in
                if let result = results[index] { return result }
                waiters[index, default: []].append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Blocks the calling thread (not a task) until every reply has come, or until `deadline`;
    /// returns them in order, or nil at the deadline (call again to go on waiting). The thread
    /// is woken once for the whole group, not once per reply. Only for this package's own
    /// programs that wait on threads of their own (the NATS bridge and its benchmark): the
    /// public API waits with `wait()`, and shows no Dispatch times.
    package func waitAll(until deadline: DispatchTime) -> [Reply]? {
        guard allDone.wait(timeout: deadline) == .success else { return nil }
        allDone.signal()
        return lock.withLock { results.map { $0! } }
    }

    /// Waits for every reply and returns them in order.
    public func wait() async -> [Reply] {
        var all: [Reply] = []
        for index in 0..<count { all.append(await wait(for: index)) }
        return all
    }
}

extension NotifBusConnection {
    /// Writes `requests` (op and fields each) to the broker in one write, in this order, and
    /// returns at once. The broker reads them in that order, so either all of them reach it or,
    /// when this process dies during the write, a prefix of them does; a write that needs more
    /// than the socket's free buffer space can be cut between two requests.
    public func pipeline(
        _ requests: [(op: String, fields: [String: JSONValue])],
        timeout: Duration? = nil
    ) -> PipelinedReplies {
        let replies = PipelinedReplies(count: requests.count)
        guard !requests.isEmpty else { return replies }
        let bound = timeout ?? requestTimeout
        let deadline = NotifBusConnection.deadline(after: bound)
        let (ids, closed) = lock.withLock { () -> ([Int64], String?) in
            if let reason = closedReason { return ([], reason) }
            var ids: [Int64] = []
            for index in requests.indices {
                let id = nextRequestID
                nextRequestID += 1
                ids.append(id)
                registerPending(id, deadline: deadline, timeoutMessage: "no reply to '\(requests[index].op)' within \(bound.readable)") { result in
                    replies.fill(index, result.map { JSONValue(validated: $0.result) })
                }
            }
            return (ids, nil)
        }
        if let closed {
            for index in requests.indices { replies.fill(index, .failure(.connectionLost(closed))) }
            return replies
        }
        var bytes: [UInt8] = []
        for (index, request) in requests.enumerated() {
            var message = request.fields
            message["op"] = .string(request.op)
            message["id"] = .integer(ids[index])
            bytes += NotifBusConnection.frame(.object(message))
        }
        if let error = send(bytes) {
            for id in ids { complete(id, .failure(error)) }
        }
        return replies
    }
}
