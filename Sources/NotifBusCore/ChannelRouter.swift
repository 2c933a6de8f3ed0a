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

/// Where an invoke goes: the handler and its connection (plain integers, so that handing
/// one out copies no strings).
struct Route: Equatable {
    let id: Int
    let client: ConnectionID
}

struct PendingCall {
    let invoker: ConnectionID
    let requestID: RequestID
    let handlerClient: ConnectionID
}

/// Handlers by id and route, and calls by id with their deadlines.
struct ChannelRouter {
    private(set) var handlers = IDTable<HandlerRecord>()
    /// Each route's handler, its record kept here too so that routing an invoke is one lookup.
    private var routes: [HandlerKey: HandlerRecord] = [:]
    /// The last method routed and where it went (valid while `lastKnown`), so that a stream
    /// of invokes of one method compares two names instead of hashing them; forgotten
    /// whenever a route changes. Separate fields, so that the comparison copies nothing.
    private var lastChannel: [UInt8] = []
    private var lastMethod: [UInt8] = []
    private var lastRoute: Route? = nil
    private var lastKnown = false
    private var nextHandlerID = 1
    private var calls = CallTable()
    /// No call below this id is in flight: the oldest call in flight, whose deadline is the
    /// next to come (one timeout for all calls keeps deadlines in id order), is found from
    /// here, each ended id passed over once. So nothing is kept per call beyond its record.
    private var oldestCall: Int64 = 1
    /// The oldest call in flight and its deadline (nil for none), while `oldestKnown`: set
    /// when a call starts with none in flight and when the last one ends, so that a call at
    /// a time costs no search; found again after the oldest call ends with others in flight.
    private var oldest: (id: Int64, deadline: Instant)? = nil
    private var oldestKnown = true
    /// Ended ids `findOldestCall` passes over one by one at most.
    static let longestWalk: Int64 = 4 * Int64(CallTable.ringSize)
    private var nextCallID: Int64 = 1

    /// The handler holding exactly this route, if any.
    func holder(of key: HandlerKey) -> Int? { routes[key]?.id }

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
        if let old = routes[key] { replaced = handlers.removeValue(forKey: old.id) }
        let record = HandlerRecord(id: id, client: client, key: key)
        handlers.insert(id, record)
        routes[key] = record
        lastKnown = false
        return (id, replaced)
    }

    mutating func remove(_ id: Int) -> HandlerRecord? {
        guard let record = handlers.removeValue(forKey: id) else { return nil }
        if routes[record.key]?.id == id { routes[record.key] = nil }
        lastKnown = false
        return record
    }

    /// The handler for `method` on `channel`: the method's own route, else the whole channel's.
    mutating func route(channel: JSONName, method: JSONName) -> Route? {
        if lastKnown && ChannelRouter.same(method, lastMethod) && ChannelRouter.same(channel, lastChannel) { return lastRoute }
        let channelText = channel.text
        let record = routes[HandlerKey(channel: channelText, method: method.text)] ?? routes[HandlerKey(channel: channelText, method: nil)]
        let route = record.map { Route(id: $0.id, client: $0.client) }
        lastChannel = channel.withUTF8 { Array($0) }
        lastMethod = method.withUTF8 { Array($0) }
        lastRoute = route
        lastKnown = true
        return route
    }

    @inline(__always)
    static func same(_ name: JSONName, _ utf8: [UInt8]) -> Bool {
        utf8.withUnsafeBytes { name.hasUTF8($0) }
    }

    /// Records a call and returns its id.
    mutating func startCall(_ call: PendingCall, deadline: Instant) -> Int64 {
        let id = nextCallID
        nextCallID += 1
        if calls.isEmpty {
            oldest = (id, deadline)
            oldestKnown = true
        }
        calls.insert(id, call, deadline: deadline)
        return id
    }

    /// Ends call `id` if `c` is the connection it was routed to; nil for anyone else.
    mutating func returnCall(_ id: Int64, from c: ConnectionID) -> PendingCall? {
        guard calls.handlerClient(of: id) == c else { return nil }
        let call = calls.removeValue(forKey: id)
        ended(id)
        return call
    }

    /// The calls routed to `c` and not yet returned, in creation order, removed.
    mutating func removeCalls(servedBy c: ConnectionID) -> [PendingCall] {
        let served = calls.sortedEntries.filter { $0.value.handlerClient == c }
        for entry in served {
            calls.removeValue(forKey: entry.key)
            ended(entry.key)
        }
        return served.map(\.value)
    }

    /// The oldest call whose deadline is at or before `now`, removed.
    mutating func popExpiredCall(now: Instant) -> (id: Int64, call: PendingCall)? {
        guard let (id, deadline) = oldestCallInFlight(), deadline <= now, let call = calls.removeValue(forKey: id) else { return nil }
        ended(id)
        return (id, call)
    }

    /// The deadline of the oldest call in flight.
    var nextCallDeadline: Instant? {
        mutating get { oldestCallInFlight()?.deadline }
    }

    /// The oldest call in flight and its deadline.
    @inline(__always)
    private mutating func oldestCallInFlight() -> (id: Int64, deadline: Instant)? {
        if oldestKnown { return oldest }
        return findOldestCall()
    }

    /// Finds the oldest call in flight from `oldestCall`, moving it past the calls that
    /// ended before it; over a long run of ended ids (a call that stayed while many came and
    /// went), from the smallest id the call table holds instead, so that no search takes
    /// longer than a look at every call held.
    private mutating func findOldestCall() -> (id: Int64, deadline: Instant)? {
        oldest = nil
        oldestKnown = true
        if nextCallID &- oldestCall > ChannelRouter.longestWalk { oldestCall = calls.oldestID ?? nextCallID }
        while oldestCall < nextCallID {
            if let deadline = calls.deadline(of: oldestCall) {
                oldest = (oldestCall, deadline)
                break
            }
            oldestCall &+= 1
        }
        return oldest
    }

    /// Call `id` ended: with none left in flight there is no oldest one, and when it was the
    /// oldest, the next is found when asked for.
    @inline(__always)
    private mutating func ended(_ id: Int64) {
        if calls.isEmpty {
            oldest = nil
            oldestKnown = true
            oldestCall = nextCallID
        } else if oldestKnown && oldest?.id == id {
            oldestKnown = false
            oldestCall = id &+ 1
        }
    }

    /// Every call in flight, in creation order, removed.
    mutating func removeAllCalls() -> [PendingCall] {
        let all = calls.sortedEntries.map(\.value)
        calls.removeAll()
        oldest = nil
        oldestKnown = true
        oldestCall = nextCallID
        return all
    }
}
