// Clients that outlive the broker: after a lost connection, connect again with growing
// delays, greet, make every live observer, handler and the monitor again (marked `resume`,
// PROTOCOL.md §13), and tell the application. Of the application's requests in flight it
// sends again only those with a `once` key, which the broker applies at most once.
import Glibc
import NotifBusProtocol

/// When a connection that was lost connects again by itself.
public enum ReconnectPolicy: Sendable {
    /// When it holds observers, handlers, a monitor, a waiting `take` or a keyed request
    /// in flight (the default).
    case whenHoldingRegistrations
    /// Always, until `close()`.
    case always
    /// Never: a lost connection stays lost.
    case never
}

/// A change of the connection, from `connectionStates()`.
public enum ConnectionState: Sendable, Equatable {
    /// The connection was lost; pending calls failed with `connectionLost`, new ones wait.
    case disconnected(reason: String)
    /// Back, with every live observer and handler made again. `ids` maps each one's first
    /// id to its new one; `superseded` lists those whose key or route a newer registration
    /// had taken (their `onEvicted` also runs).
    case reconnected(ids: [String: String], superseded: [String])
}

/// The delays between connection attempts: 0, then about 10 ms growing by half each time
/// up to 1 s, each scaled by a random 75-100 % so that many clients do not knock at once.
struct RetryDelays {
    static let firstMs = 10.0
    static let growth = 1.5
    /// A restarted broker is found within a second.
    static let maxMs = 1000.0
    /// The range each delay is scaled by.
    static let jitter = 0.75...1.0
    var nextMs = 0.0

    /// The delay before the next attempt; `jitter` (75-100 %, random by default) scales it.
    mutating func next(jitter: Double = Double.random(in: RetryDelays.jitter)) -> Duration {
        let current = nextMs
        nextMs = nextMs == 0 ? RetryDelays.firstMs : min(RetryDelays.maxMs, nextMs * RetryDelays.growth)
        return .microseconds(Int64(current * 1000 * jitter))
    }
}

extension NotifBusConnection {
    /// The connection's changes from now on: `.disconnected` at each loss, `.reconnected`
    /// at each return. The sequence ends when the connection is closed for good.
    public func connectionStates() -> AsyncStream<ConnectionState> {
        AsyncStream { continuation in
            let finished = withState { state -> Bool in
                guard let key = state.addStateListener(continuation) else { return true }
                // A strong capture: the continuation is dropped from the table when the
                // sequence ends either way (here, or in finishStates when the connection
                // closes), which ends the cycle; a weak one would cost a side table per stream.
                continuation.onTermination = { [self] _ in
                    withState { $0.removeStateListener(key) }
                }
                return false
            }
            if finished { continuation.finish() }
        }
    }

    /// The broker's present id of an observer or handler this connection registered,
    /// given the id it first returned (they differ after a reconnect).
    public func currentID(of handle: String) -> String {
        withState { $0.currentID(of: handle) }
    }

    func publish(_ state: ConnectionState) {
        for c in withState({ $0.listeners }) { c.yield(state) }
    }

    func finishStates() {
        let all = withState { $0.takeListeners() }
        for c in all { c.finish() }
    }

    /// Holds a request made while reconnecting until the connection is back, within
    /// `bound`; returns how long it waited.
    func waitWhileReconnecting(_ op: String, bound: Duration, waitedBefore: Duration = .zero) async throws(NotifBusError) -> Duration {
        let clock = ContinuousClock()
        let start = clock.now - waitedBefore
        while withState({ $0.holdsNewRequests }) {
            let left = bound - (clock.now - start)
            if left <= .zero {
                throw .timedOut("'\(op)' not sent within \(bound.readable): the broker is unreachable (reconnecting)")
            }
            await awaitChange(within: left) { $0.holdsNewRequests }
        }
        return clock.now - start
    }

    /// After a request sent on socket `generation` failed with `connectionLost`: waits
    /// (within `bound`) until the reader of that socket has decided, and says whether a new
    /// connection is being made or was made, so that the request may go out again.
    func connectionReplaced(since generation: Int, within bound: Duration) async -> Bool {
        let clock = ContinuousClock()
        let start = clock.now
        while true {
            if let verdict = withState({ $0.replacement(since: generation) }) { return verdict }
            let left = bound - (clock.now - start)
            if left <= .zero { return false }
            await awaitChange(within: left) { $0.replacement(since: generation) == nil }
        }
    }

    /// Waits until the connection's course changes (its socket, reconnecting, its end) or
    /// `bound` passes; returns at once when `waiting` no longer holds. `waiting` is asked
    /// under the lock, so that no change can come between the question and the wait.
    func awaitChange(within bound: Duration, while waiting: (inout ConnectionSession) -> Bool) async {
        let key = withState { $0.newChangeWaiterKey() }
        var timer: Task<Void, Never>? = nil
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let parked = withState { session -> Bool in
                guard waiting(&session) else { return false }
                session.addChangeWaiter(key, waiter)
                return true
            }
            guard parked else { return waiter.resume() }
            timer = Task { [self] in
                try? await Task.sleep(for: bound)
                withState { $0.removeChangeWaiter(key) }?.resume()
            }
        }
        timer?.cancel()
    }

    func reconnectLoop() async {
        var delays = RetryDelays()
        while true {
            let delay = delays.next()
            if delay > .zero { try? await Task.sleep(for: delay) }
            if isClosed { return giveUp() }
            guard let socket = try? NotifBusConnection.openSocket(socketPath) else { continue }
            let generation = withState { $0.adopt(socket: socket) }
            guard let generation else {
                Glibc.close(socket)
                return giveUp()
            }
            startReader()
            guard let (ids, superseded, evictions) = await resume(generation) else {
                withState { if $0.socket == socket { shutdown(socket, Int32(SHUT_RDWR)) } }
                continue
            }
            let back = withState { $0.reconnected(generation: generation, socket: socket) }
            guard back else { continue }
            publish(.reconnected(ids: ids, superseded: superseded))
            let general = onEvicted
            for (eviction, specific) in evictions {
                specific?(eviction)
                general?(eviction)
            }
            return
        }
    }

    private func giveUp() {
        let reason = withState { $0.abandonReconnecting() }
        finishReading(reason: reason)
    }

    /// Greets and makes every registration again, in order; nil when the socket failed.
    private func resume(_ generation: Int) async -> ([String: String], [String], [(Eviction, (@Sendable (Eviction) -> Void)?)])? {
        do {
            _ = try await greet(generation: generation)
        } catch {
            return nil
        }
        var ids: [String: String] = [:]
        var superseded: [String] = []
        var evictions: [(Eviction, (@Sendable (Eviction) -> Void)?)] = []
        let entries = withState { $0.resumption.entries }
        for entry in entries {
            var fields: [String: JSONValue] = ["resume": true]
            let op: String
            switch entry.kind {
            case .observer(let events, let priority, let key, _, _):
                op = Op.subscribe
                fields["events"] = .array(events.map { .string($0) })
                fields["priority"] = .integer(Int64(priority))
                if let key { fields["key"] = .string(key) }
            case .handler(let channel, let method, _):
                op = Op.handle
                fields["channel"] = .string(channel)
                if let method { fields["method"] = .string(method) }
            }
            do {
                _ = try await exchange(
                    op, fields, bound: requestTimeout,
                    onReply: { [self] result in
                        let id = result["observer"]?.stringValue ?? result["handler"]?.stringValue ?? ""
                        withState { $0.registrationResumed(entry, as: id) }
                    }, generation: generation)
                ids[entry.handle] = currentID(of: entry.handle)
            } catch {
                guard case .broker(let e) = error else { return nil }
                let by = e.details?["by"]?.stringValue ?? ""
                withState { $0.registrationSuperseded(entry) }
                superseded.append(entry.handle)
                switch entry.kind {
                case .observer(_, _, _, _, let onEvicted): evictions.append((.observer(entry.current, by: by), onEvicted))
                case .handler: evictions.append((.handler(entry.current, by: by), nil))
                }
            }
        }
        if withState({ $0.resumption.monitoring }) {
            do {
                _ = try await exchange(Op.monitor, [:], bound: requestTimeout, onReply: nil, generation: generation)
            } catch {
                return nil
            }
        }
        return (ids, superseded, evictions)
    }
}

extension NotifBusConnection {
    /// Whether the connection is closed for good: by `close()`, or lost without reconnecting.
    /// False while it reconnects.
    public var isClosed: Bool { withState { $0.closedReason != nil } }
}
