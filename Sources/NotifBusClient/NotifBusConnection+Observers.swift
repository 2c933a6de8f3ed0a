// Observers on the Swift client: `addObserver` with priority and unique key, removal, and
// the delivery of events to their handlers, which may take as long as they need.
import NotifBusProtocol

extension NotifBusConnection {
    /// Subscribes to `events`. Lower priorities run first; a `key` replaces whichever
    /// observer held it, anywhere on the broker. The handler's answer decides the chain.
    @discardableResult
    public func addObserver(
        events: [String], priority: Int32 = Limits.defaultPriority, key: String? = nil,
        onEvicted: (@Sendable (Eviction) -> Void)? = nil,
        handler: @escaping ObserverHandler
    ) async throws(NotifBusError) -> ObserverRegistration {
        var fields: [String: JSONValue] = ["events": .array(events.map { .string($0) }), "priority": .integer(Int64(priority))]
        if let key { fields["key"] = .string(key) }
        let result = try await request(Op.subscribe, fields) { [self] result in
            guard let id = result["observer"]?.stringValue else { return }
            withState {
                $0.observerAdded(id, events: events, priority: priority, key: key, handler: handler, onEvicted: onEvicted)
            }
        }
        guard let id = result["observer"]?.stringValue else { throw .protocolViolation("subscribe result without 'observer'") }
        let replaced = result["replaced"]?.arrayValue?.compactMap(\.stringValue) ?? []
        return ObserverRegistration(id: id, replaced: replaced)
    }

    /// Removes an observer by id (any connection's). Returns the removed ids.
    @discardableResult
    public func removeObserver(_ id: String) async throws(NotifBusError) -> [String] {
        let result = try await request(Op.unsubscribe, ["observer": .string(currentID(of: id))])
        return forgetObservers(result)
    }

    /// Removes whichever observer holds `key`. Returns the removed ids.
    @discardableResult
    public func removeObserverByUniqueKey(_ key: String) async throws(NotifBusError) -> [String] {
        let result = try await request(Op.unsubscribe, ["key": .string(key)])
        return forgetObservers(result)
    }

    /// Drops the observers an `unsubscribe` removed; returns their ids, as the broker gave them.
    private func forgetObservers(_ result: JSONValue) -> [String] {
        let removed = result["removed"]?.arrayValue?.compactMap(\.stringValue) ?? []
        withState { $0.observersRemoved(removed) }
        return removed
    }

    /// Posts an event and waits for its outcome. `timeout` bounds the whole chain,
    /// including the time spent queued behind other events.
    ///
    /// With a `once` key (§3.8) the event runs at most once for that key: sent again with
    /// the same key and payload (by this client after a reconnect, or by another), it
    /// answers with the first post's result, `isRepeat` set; with another payload it throws
    /// `once_conflict`. A post whose chain a broker crash cut throws `interrupted`.
    public func post(
        _ name: String, payload: JSONValue = .null, once: String? = nil, timeout: Duration? = nil
    ) async throws(NotifBusError) -> PostResult {
        var fields: [String: JSONValue] = ["name": .string(name)]
        if payload != .null { fields["payload"] = payload }
        if let once { fields["once"] = .string(once) }
        let answer = try await answeredRequest(Op.post, fields, timeout: timeout, onReply: nil)
        return try PostResult(JSONValue(validated: answer.result), isRepeat: answer.isRepeat)
    }

    /// The broker's `status`. A large status comes in pages (each reply's `next` names the
    /// following one); this asks for each in turn and returns them merged: the lists joined,
    /// the figures of the last page. `timeout` (default: the connection's request timeout)
    /// bounds the whole walk.
    public func status(timeout: Duration? = nil) async throws(NotifBusError) -> BrokerStatus {
        let limit = timeout ?? requestTimeout
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        var latest = try await request(Op.status, timeout: limit)
        var lists: [String: [JSONValue]] = [:]
        for name in BrokerStatus.pagedLists { lists[name] = latest[name]?.arrayValue ?? [] }
        while let cursor = latest["next"]?.stringValue {
            let left = deadline - clock.now
            guard left > .zero else { throw .timedOut("status: its pages were not all read within \(limit.readable)") }
            let page = try await request(Op.status, ["page": .string(cursor)], timeout: left)
            if page["next"]?.stringValue == cursor {
                throw .protocolViolation("status page \(cursor) names itself as the next page")
            }
            guard case .object = page else { throw .protocolViolation("status page \(cursor) is not an object") }
            for name in BrokerStatus.pagedLists { lists[name, default: []].append(contentsOf: page[name]?.arrayValue ?? []) }
            latest = page
        }
        guard case .object(var whole) = latest else { throw .protocolViolation("status is not an object") }
        for (name, items) in lists { whole[name] = .array(items) }
        return BrokerStatus(.object(whole))
    }

    /// Measures one `ping` round trip.
    public func ping() async throws(NotifBusError) -> Duration {
        let clock = ContinuousClock()
        let start = clock.now
        _ = try await request(Op.ping)
        return clock.now - start
    }

    /// Mirrors every frame the broker exchanges with other connections to `handler`.
    public func monitor(_ handler: @escaping @Sendable (SeenFrame) -> Void) async throws(NotifBusError) {
        withState { $0.monitorHandler = handler }
        _ = try await request(Op.monitor)
        withState { $0.monitoringStarted() }
    }

    func deliverEvent(_ frame: BrokerFrame.Event, generation gen: Int = 0) {
        let event = frame.event, observer = frame.observer
        let handler = withState { $0.observerHandler(for: observer) }
        guard let handler else {
            sendMessage(generation: gen, ["op": .string(Op.next), "event": .integer(event)])
            return
        }
        let delivered = ObserverEvent(event: event, observer: observer, name: frame.name, rawPayload: frame.payload)
        Task { [self] in
            let reply = await handler(delivered)
            switch reply {
            case .next: sendMessage(generation: gen, ["op": .string(Op.next), "event": .integer(event)])
            case .stop: sendMessage(generation: gen, ["op": .string(Op.stop), "event": .integer(event)])
            case .complete(let value):
                var answer: [String: JSONValue] = ["op": .string(Op.complete), "event": .integer(event)]
                if let value { answer["value"] = value }
                // A value above maxFrame cannot go out: the event goes on down the chain.
                sendMessage(generation: gen, .object(answer)) { _ in ["op": .string(Op.next), "event": .integer(event)] }
            }
        }
    }
}

/// The broker's `status`, with typed access to what tools read most.
public struct BrokerStatus: Sendable {
    /// The lists that continue from one status page to the next.
    static let pagedLists = ["clients", "observers", "handlers", "slots"]

    /// The reply as received (§10.1); the properties below read it.
    public let raw: JSONValue

    init(_ raw: JSONValue) { self.raw = raw }

    /// The broker's name and version (`"notifbus/0.1.0"`).
    public var server: String { raw["server"]?.stringValue ?? "" }
    /// Milliseconds since the broker started.
    public var uptimeMs: Int64 { raw["uptimeMs"]?.intValue ?? 0 }
    /// Greeted clients: `client`, `name`, `pid`, `uid`, `queued` (its waiting posts) and
    /// `unresponsive` (a hop of it timed out and it has sent no frame since).
    public var clients: [JSONValue] { raw["clients"]?.arrayValue ?? [] }
    /// Observers in chain order: `observer`, `client`, `events`, `priority`, `key`.
    public var observers: [JSONValue] { raw["observers"]?.arrayValue ?? [] }
    /// Method handlers: `handler`, `client`, `channel`, `method` (null: the whole channel).
    public var handlers: [JSONValue] { raw["handlers"]?.arrayValue ?? [] }
    /// Posts waiting behind the running one.
    public var pending: Int64 { raw["queue"]?["pending"]?.intValue ?? 0 }
    /// The event whose chain is running, if any.
    public var currentEvent: Int64? { raw["queue"]?["current"]?.intValue }
    /// Names of the slots that hold a value.
    public var slots: [String] { raw["slots"]?.arrayValue?.compactMap(\.stringValue) ?? [] }

    /// A counter by its wire name (`posted`, `hopTimeouts`, …).
    public func counter(_ name: String) -> Int64 { raw["counters"]?[name]?.intValue ?? 0 }
}
