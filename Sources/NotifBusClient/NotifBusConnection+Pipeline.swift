// Pipelined requests on the Swift client: several requests written to the socket in one
// write, in the caller's order, whose replies are awaited later. It must not reorder
// requests, and it never waits for a reply before the whole group is written. Each request
// has the group's deadline, taken out with it when its reply comes. Results are kept as the
// broker wrote them and read into trees only for the callers that ask for trees.
import Dispatch
import NotifBusProtocol

/// The replies of a group of requests sent by `NotifBusConnection.pipeline`, in request order.
public final class PipelinedReplies: @unchecked Sendable {
    /// One request's outcome: its `result`, or the error it was answered with or failed by.
    public typealias Reply = Result<JSONValue, NotifBusError>
    /// One request's outcome with its `result` as the broker wrote it.
    package typealias RawReply = Result<RawJSON, NotifBusError>
    private let lock = Lock()
    private var results: [RawReply?]
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

    func fill(_ index: Int, _ result: RawReply) {
        let (resume, last) = lock.withLock { () -> ([CheckedContinuation<Reply, Never>], Bool) in
            guard results[index] == nil else { return ([], false) }
            results[index] = result
            remaining -= 1
            return (waiters.removeValue(forKey: index) ?? [], remaining == 0)
        }
        if !resume.isEmpty {
            let tree = PipelinedReplies.tree(result)
            for waiter in resume { waiter.resume(returning: tree) }
        }
        if last { allDone.signal() }
    }

    private static func tree(_ raw: RawReply) -> Reply { raw.map { JSONValue(validated: $0) } }

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
            let ready = lock.withLock { () -> RawReply? in
                if let result = results[index] { return result }
                waiters[index, default: []].append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: PipelinedReplies.tree(ready)) }
        }
    }

    /// Blocks the calling thread (not a task) until every reply has come, or until `deadline`;
    /// returns them in order, or nil at the deadline (call again to go on waiting). The thread
    /// is woken once for the whole group, not once per reply. Only for this package's own
    /// programs that wait on threads of their own (the NATS bridge and its benchmark): the
    /// public API waits with `wait()`, and shows no Dispatch times.
    package func waitAll(until deadline: DispatchTime) -> [Reply]? {
        waitAllRaw(until: deadline)?.map(PipelinedReplies.tree)
    }

    /// As `waitAll`, with each result as the broker wrote it.
    package func waitAllRaw(until deadline: DispatchTime) -> [RawReply]? {
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

/// A request encoded by its sender: its op, and its members after `"id"` as JSON text that
/// starts with a comma. For this package's own programs that forward bodies byte for byte
/// (the NATS bridge); the frame written is `{"op":"<op>","id":<id>` + `members` + `}`.
package struct EncodedRequest: Sendable {
    package let op: String
    package let members: [UInt8]

    package init(op: String, members: [UInt8]) {
        self.op = op
        self.members = members
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
        pipeline(ops: requests.map(\.op), timeout: timeout) { index, id in
            var message = requests[index].fields
            message["op"] = .string(requests[index].op)
            message["id"] = .integer(id)
            return NotifBusConnection.frame(.object(message))
        }
    }

    /// As `pipeline(_:timeout:)`, for requests whose members are encoded already.
    package func pipeline(encoded requests: [EncodedRequest], timeout: Duration? = nil) -> PipelinedReplies {
        pipeline(ops: requests.map(\.op), timeout: timeout) { index, id in
            let request = requests[index]
            var body = Array(#"{"op":"#.utf8) + JSONValue.string(request.op).encoded + Array(#","id":"#.utf8)
            body += Array(String(id).utf8) + request.members + [UInt8(ascii: "}")]
            return FrameHeader.encode(length: body.count) + body
        }
    }

    /// Registers one request per op under fresh ids, then writes their frames (`frame(index, id)`) in one write.
    private func pipeline(ops: [String], timeout: Duration?, frame: (Int, Int64) -> [UInt8]) -> PipelinedReplies {
        let replies = PipelinedReplies(count: ops.count)
        guard !ops.isEmpty else { return replies }
        let bound = timeout ?? requestTimeout
        let deadline = NotifBusConnection.deadline(after: bound)
        let (ids, closed) = withState { state -> ([Int64], String?) in
            if let reason = state.closedReason { return ([], reason) }
            var ids: [Int64] = []
            // A group's requests mostly share their op: each message is written once per op.
            var messageOp = "", message = ""
            for index in ops.indices {
                let id = state.newRequestID()
                ids.append(id)
                if index == 0 || ops[index] != messageOp {
                    messageOp = ops[index]
                    message = "no reply to '\(messageOp)' within \(bound.readable)"
                }
                let request = PendingRequest(
                    completion: { result in replies.fill(index, result.map(\.result)) }, deadline: deadline, timeoutMessage: message)
                register(request, id: id, in: &state)
            }
            return (ids, nil)
        }
        if let closed {
            for index in ops.indices { replies.fill(index, .failure(.connectionLost(closed))) }
            return replies
        }
        var bytes: [UInt8] = []
        for index in ops.indices { bytes += frame(index, ids[index]) }
        if let error = send(bytes) {
            for id in ids { complete(id, .failure(error)) }
        }
        return replies
    }
}
