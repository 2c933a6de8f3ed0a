// The method channels' routes and the calls in flight: one handler per (channel, method)
// or per whole channel, latest wins; each call remembers its invoker until it returns or
// times out. It keeps records only; frames are the broker's part.
import NotifBusProtocol

struct HandlerKey: Hashable {
    let channel: String
    let method: String?
}

struct HandlerRecord {
    let id: Int
    let client: ConnectionID
    let key: HandlerKey
}

struct PendingCall {
    let invoker: ConnectionID
    let requestID: RequestID
    let handlerClient: ConnectionID
}

/// Handlers by id and route, and calls by id with their deadlines.
struct ChannelRouter {
    private(set) var handlers: [Int: HandlerRecord] = [:]
    private var routes: [HandlerKey: Int] = [:]
    private var nextHandlerID = 1
    private var calls: [Int64: PendingCall] = [:]
    /// Call deadlines in creation order: one timeout for all calls keeps them sorted.
    private var callDeadlines = FIFO<(deadline: Instant, call: Int64)>()
    private var nextCallID: Int64 = 1

    /// The handler holding exactly this route, if any.
    func holder(of key: HandlerKey) -> Int? { routes[key] }

    /// The live handler a wire id (`"h3"`) names.
    func find(_ text: String) -> Int? {
        guard let id = parseTaggedID(text, tag: "h"), handlers[id] != nil else { return nil }
        return id
    }

    /// Registers a handler of `client` for `key`; the one holding the route before is removed
    /// and returned.
    mutating func register(_ key: HandlerKey, client: ConnectionID) -> (id: Int, replaced: HandlerRecord?) {
        let id = nextHandlerID
        nextHandlerID += 1
        var replaced: HandlerRecord? = nil
        if let old = routes[key] { replaced = handlers.removeValue(forKey: old) }
        handlers[id] = HandlerRecord(id: id, client: client, key: key)
        routes[key] = id
        return (id, replaced)
    }

    mutating func remove(_ id: Int) -> HandlerRecord? {
        guard let record = handlers.removeValue(forKey: id) else { return nil }
        if routes[record.key] == id { routes[record.key] = nil }
        return record
    }

    /// The handler for `method` on `channel`: the method's own route, else the whole channel's.
    func route(channel: String, method: String) -> HandlerRecord? {
        guard let id = routes[HandlerKey(channel: channel, method: method)] ?? routes[HandlerKey(channel: channel, method: nil)] else {
            return nil
        }
        return handlers[id]
    }

    /// Records a call and returns its id.
    mutating func startCall(_ call: PendingCall, deadline: Instant) -> Int64 {
        let id = nextCallID
        nextCallID += 1
        calls[id] = call
        callDeadlines.append((deadline, id))
        return id
    }

    /// Ends call `id` if `c` is the connection it was routed to; nil for anyone else.
    mutating func returnCall(_ id: Int64, from c: ConnectionID) -> PendingCall? {
        guard let call = calls[id], call.handlerClient == c else { return nil }
        calls[id] = nil
        return call
    }

    mutating func removeCall(_ id: Int64) -> PendingCall? { calls.removeValue(forKey: id) }

    /// The oldest call whose deadline is at or before `now`, removed.
    mutating func popExpiredCall(now: Instant) -> (id: Int64, call: PendingCall)? {
        while let front = callDeadlines.first, front.deadline <= now {
            _ = callDeadlines.popFirst()
            if let call = calls.removeValue(forKey: front.call) { return (front.call, call) }
        }
        return nil
    }

    var nextCallDeadline: Instant? { callDeadlines.first?.deadline }

    /// Every call in flight, in creation order, removed.
    mutating func removeAllCalls() -> [PendingCall] {
        let all = calls.sorted { $0.key < $1.key }.map(\.value)
        calls.removeAll()
        callDeadlines.removeAll()
        return all
    }
}
