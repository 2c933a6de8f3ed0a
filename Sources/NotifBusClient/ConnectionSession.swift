// The protocol state of one client connection, as a value: the socket in use and its
// generation, the requests waiting for replies and their deadlines, the handlers of
// observers and calls, and the reconnection bookkeeping. Its transitions are mutating
// methods named for what happened. It must not do I/O, touch Dispatch sources or lock:
// `NotifBusConnection` holds it under its one lock, carries out what the transitions
// return (arm the timer, finish requests, close a socket), and tests drive it directly.
// Deadlines are `DispatchTime` values, compared and never waited on.
import Dispatch
import NotifBusProtocol

/// The state of a ``NotifBusConnection`` that its `lock` guards.
///
/// The lifecycle, as `socket`, `resumption.reconnecting` and `closedReason` show it:
///
///     what happens                  socket        reconnecting  closedReason
///     init(socket: s)               s, gen 0      false         nil
///     readerEnded → .reconnect      -1            true          nil
///     adopt(socket: s')             s', gen + 1   true          nil
///     readerEnded → .keepTrying     -1            true          nil   (an attempt's socket)
///     reconnected(…) → true         s'            false         nil
///     closedByClient()              unchanged     unchanged     set
///     readerEnded → .finish         unchanged     false         set
///     abandonReconnecting()         unchanged     false         set
///     ended()                       unchanged     unchanged     set, and `hasEnded`
///
/// Invariants:
/// - A request is in `pending` from `register(_:id:)` until exactly one of `takeRequest(_:)`
///   (its reply, or a failed write), `expire(now:)` (its deadline) or `readerEnded(…)` (the
///   socket's end) takes it out; whoever takes it out finishes it, so it finishes once.
/// - While `pending` is not empty, `armedDeadline` is set and comes no later than any of
///   their deadlines: the timer fires in time for each (early, for a request answered
///   since, and then it is armed again for the earliest left).
/// - `socket` is -1 or the socket of `generation`; `generation` grows by one per adopted
///   socket, so a frame meant for an older socket is never written on a newer one.
/// - Request ids are never reused on a connection, across sockets too: a late reply on an
///   older socket finds no request.
/// - Every observer id with an eviction handler has an observer handler.
/// - `closedReason`, once set, stays set; `hasEnded` is set after it.
struct ConnectionSession {
    typealias EvictionHandler = @Sendable (Eviction) -> Void

    // MARK: The socket

    /// The present socket; -1 while the connection has none (reconnecting).
    private(set) var socket: Int32
    /// Counts the sockets this connection has had.
    private(set) var generation = 0
    /// Why the connection ended for good; nil while it is open or reconnecting.
    private(set) var closedReason: String? = nil
    /// Whether the end was carried out: requests failed, waiters woken, timer stopped.
    private(set) var hasEnded = false
    /// Tasks waiting in `waitForClose()`, resumed with the reason by `ended()`.
    private var closeWaiters: [CheckedContinuation<String, Never>] = []
    /// Tasks waiting for the connection's course to change (`NotifBusConnection.awaitChange`),
    /// by key: the next change of its socket, of reconnecting or of its end wakes them all,
    /// and each asks again whether it still waits.
    private var changeWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextChangeWaiter = 0
    /// Waiters a change woke, to be resumed once the lock is released (`takeWoken()`).
    private(set) var woken: [CheckedContinuation<Void, Never>] = []
    /// Listeners of `connectionStates()`, by the key each was given.
    private var stateListeners: [Int: AsyncStream<ConnectionState>.Continuation] = [:]
    private var nextListener = 0

    // MARK: What the broker said

    /// The broker's id for this connection, its `server` string and its `--max-frame`.
    private(set) var clientID = ""
    private(set) var server = ""
    private(set) var maxFrame = Limits.defaultMaxFrame
    /// The last error frame (`"id": null`), kept to explain a refusal before `hello`.
    private(set) var lastErrorFrame: BrokerError? = nil

    // MARK: Requests

    private var nextRequestID: Int64 = 1
    /// The requests waiting for their replies, by id.
    private(set) var pending: [Int64: NotifBusConnection.PendingRequest] = [:]
    /// The deadline the one timer is armed for; nil while it is not armed.
    private(set) var armedDeadline: DispatchTime? = nil
    /// How often the timer was armed; tests check that replies cost it nothing.
    private(set) var timerArmings = 0

    // MARK: Handlers

    /// Each observer's handler, and its own eviction handler if it has one, by the broker's id.
    private var observerHandlers: [String: NotifBusConnection.ObserverHandler] = [:]
    private var observerEvictionHandlers: [String: EvictionHandler] = [:]
    /// Each method handler, by the broker's id.
    private var callHandlers: [String: MethodChannel.Handler] = [:]
    /// (channel, method) (`NotifBusConnection.registrationKey`) to the handler id for it.
    private var channelRegistrations: [String: String] = [:]
    /// Receives the frames `monitor` mirrors.
    var monitorHandler: (@Sendable (SeenFrame) -> Void)? = nil
    /// `onEvicted`: runs for every eviction, after the observer's own handler.
    var evictionHandler: EvictionHandler? = nil
    /// `onErrorFrame`.
    var errorFrameHandler: (@Sendable (BrokerError) -> Void)? = nil

    // MARK: Reconnection

    /// The application's registrations in order, and what decides a reconnect.
    private(set) var resumption = Resumption()

    init(socket: Int32) {
        self.socket = socket
    }

    /// Whether the connection works: not closed, not reconnecting.
    var isOpen: Bool { closedReason == nil && !resumption.reconnecting }
    /// Whether a connection is being made again (and requests that cannot go out wait for it).
    var isReconnecting: Bool { resumption.reconnecting }
    /// Whether a request made now waits for the connection to come back before it is sent.
    var holdsNewRequests: Bool { resumption.reconnecting && closedReason == nil }

    // MARK: Greeting and closing

    /// The broker answered `hello`.
    mutating func greeted(client: String, server: String, maxFrame: Int?) {
        clientID = client
        self.server = server
        if let maxFrame { self.maxFrame = maxFrame }
    }

    /// Set once `hello` succeeded: until then a lost connection is not made again.
    mutating func configureReconnection(policy: ReconnectPolicy, resendKeyed: Bool) {
        resumption.policy = policy
        resumption.resendKeyed = resendKeyed
    }

    /// The application closed the connection. Returns the socket to shut down (-1 when
    /// there is none) the first time, nil after.
    mutating func closedByClient() -> Int32? {
        guard closedReason == nil else { return nil }
        closedReason = "closed by this client"
        courseChanged()
        return socket
    }

    /// No reader thread could be started for the socket: nothing can be answered on it. A
    /// reason given before (a close by this client meanwhile) stays the reason.
    mutating func readerCouldNotStart() {
        if closedReason == nil { closedReason = "cannot start the reader thread" }
        courseChanged()
    }

    /// The connection's end is carried out: returns the `waitForClose()` waiters to resume.
    /// The timer is stopped, so nothing is armed any more.
    mutating func ended() -> [CheckedContinuation<String, Never>] {
        hasEnded = true
        armedDeadline = nil
        courseChanged()
        defer { closeWaiters.removeAll() }
        return closeWaiters
    }

    /// A task waits for the end: returns the reason at once when the end came already,
    /// else keeps `waiter` for `ended()` and returns nil.
    mutating func waitForClose(_ waiter: CheckedContinuation<String, Never>) -> String? {
        if hasEnded { return closedReason ?? "closed" }
        closeWaiters.append(waiter)
        return nil
    }

    /// A listener of `connectionStates()` arrives: its key, or nil when the connection is
    /// closed for good and the listener's sequence ends at once.
    mutating func addStateListener(_ listener: AsyncStream<ConnectionState>.Continuation) -> Int? {
        if closedReason != nil && !resumption.reconnecting { return nil }
        let key = nextListener
        nextListener += 1
        stateListeners[key] = listener
        return key
    }

    /// The listener's sequence ended.
    mutating func removeStateListener(_ key: Int) {
        stateListeners[key] = nil
    }

    /// The listeners to tell of a change.
    var listeners: [AsyncStream<ConnectionState>.Continuation] { Array(stateListeners.values) }

    /// The connection ends for good: returns every listener, whose sequences end, and keeps none.
    mutating func takeListeners() -> [AsyncStream<ConnectionState>.Continuation] {
        defer { stateListeners.removeAll() }
        return Array(stateListeners.values)
    }

    // MARK: Requests

    /// A fresh request id.
    mutating func newRequestID() -> Int64 {
        defer { nextRequestID += 1 }
        return nextRequestID
    }

    /// Why a request may not be registered to go out on socket `wanted` (nil: whichever is
    /// present), or nil when it may.
    func requestRefusal(on wanted: Int?) -> String? {
        if let closedReason { return closedReason }
        if let wanted, wanted != generation { return ConnectionSession.replaced }
        if socket < 0 { return NotifBusConnection.notSent }
        return nil
    }

    /// The socket a frame for socket `wanted` (nil: whichever is present) is written on.
    func socket(for wanted: Int?) -> Result<Int32, NotifBusError> {
        if let wanted, wanted != generation { return .failure(.connectionLost(ConnectionSession.replaced)) }
        if socket < 0 { return .failure(.connectionLost("the connection to the broker was lost")) }
        return .success(socket)
    }

    /// Why a frame meant for an older socket goes nowhere.
    static let replaced = "the connection was replaced"

    /// Request `id` waits for its reply. Returns the deadline to arm the timer for, or nil
    /// when the timer is armed for one no later than `request`'s.
    mutating func register(_ request: NotifBusConnection.PendingRequest, id: Int64) -> DispatchTime? {
        pending[id] = request
        if let armed = armedDeadline, armed <= request.deadline { return nil }
        armedDeadline = request.deadline
        timerArmings += 1
        return request.deadline
    }

    /// Takes request `id` out to be finished (its reply came, or it could not be written);
    /// nil when it was finished already. Its deadline goes with it: the timer stays armed,
    /// and finds nothing due for it.
    mutating func takeRequest(_ id: Int64) -> NotifBusConnection.PendingRequest? {
        pending.removeValue(forKey: id)
    }

    /// The timer fired at `now`: takes out every request whose deadline has passed, earliest
    /// first (by id among equals), and returns them with the deadline to arm the timer for
    /// next (nil: none is pending, the timer stays unarmed).
    mutating func expire(now: DispatchTime) -> (due: [NotifBusConnection.PendingRequest], rearm: DispatchTime?) {
        let ids = pending.filter { $0.value.deadline <= now }
            .sorted { ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key) }
            .map(\.key)
        let due = ids.compactMap { pending.removeValue(forKey: $0) }
        armedDeadline = pending.values.map(\.deadline).min()
        if armedDeadline != nil { timerArmings += 1 }
        return (due, armedDeadline)
    }

    /// A request with a `once` key starts: whether it is to be sent again after a reconnect
    /// (then it counts as in flight until `keyedRequestEnded()`).
    mutating func keyedRequestStarted() -> Bool {
        if resumption.resendKeyed { resumption.keyedInFlight += 1 }
        return resumption.resendKeyed
    }

    /// A request that `keyedRequestStarted()` counted is over.
    mutating func keyedRequestEnded() {
        resumption.keyedInFlight -= 1
    }

    /// A `take` starts waiting (a connection with one reconnects to go on waiting).
    mutating func takeStarted() { resumption.waitingTakes += 1 }
    /// A `take` is over.
    mutating func takeEnded() { resumption.waitingTakes -= 1 }

    /// After a request sent on socket `sentOn` was lost: true when another connection is
    /// being made or was made (the request may go out again), false when none will be,
    /// nil while the reader of that socket has not decided yet.
    func replacement(since sentOn: Int) -> Bool? {
        if resumption.reconnecting || generation != sentOn { return closedReason == nil }
        return closedReason != nil || hasEnded ? false : nil
    }

    // MARK: Frames in

    /// An error frame (`"id": null`) came: kept, and returns the handler to tell.
    mutating func errorFrameArrived(_ error: BrokerError) -> (@Sendable (BrokerError) -> Void)? {
        lastErrorFrame = error
        return errorFrameHandler
    }

    /// The handler of the observer the broker delivers an event to, if it is still ours.
    func observerHandler(for observer: String) -> NotifBusConnection.ObserverHandler? {
        observerHandlers[observer]
    }

    /// The handler of the method handler the broker sends a call to, if it is still ours.
    func callHandler(for handler: String) -> MethodChannel.Handler? {
        callHandlers[handler]
    }

    /// The broker evicted an observer or a handler of this connection: it is dropped.
    /// Returns the handlers to tell: the general one, and the observer's own.
    mutating func evicted(_ eviction: Eviction) -> (general: EvictionHandler?, specific: EvictionHandler?) {
        switch eviction {
        case .observer(let o, _):
            observerHandlers[o] = nil
            return (evictionHandler, observerEvictionHandlers.removeValue(forKey: o))
        case .handler(let h, _):
            callHandlers[h] = nil
            return (evictionHandler, nil)
        }
    }

    // MARK: Registrations

    /// The broker made observer `id` for the application.
    mutating func observerAdded(
        _ id: String, events: [String], priority: Int32, key: String?,
        handler: @escaping NotifBusConnection.ObserverHandler, onEvicted: EvictionHandler?
    ) {
        observerHandlers[id] = handler
        if let onEvicted { observerEvictionHandlers[id] = onEvicted }
        resumption.add(.observer(events: events, priority: priority, key: key, handler: handler, onEvicted: onEvicted), id: id)
    }

    /// The broker removed observers `ids`.
    mutating func observersRemoved(_ ids: [String]) {
        for id in ids {
            observerHandlers[id] = nil
            observerEvictionHandlers[id] = nil
        }
        resumption.forget(ids)
    }

    /// The id of this connection's handler for `registrationKey`, if it has one.
    func channelRegistration(_ registrationKey: String) -> String? {
        channelRegistrations[registrationKey]
    }

    /// The broker made handler `id` for (channel, method); it replaces this connection's
    /// earlier handler for them.
    mutating func handlerAdded(_ id: String, channel: String, method: String?, handler: @escaping MethodChannel.Handler) {
        let key = NotifBusConnection.registrationKey(channel, method)
        if let old = channelRegistrations[key] { callHandlers[old] = nil }
        channelRegistrations[key] = id
        callHandlers[id] = handler
        resumption.add(.handler(channel: channel, method: method, handler: handler), id: id)
    }

    /// Handler `id`, registered under `registrationKey`, was removed.
    mutating func handlerRemoved(_ id: String, registrationKey: String) {
        if channelRegistrations[registrationKey] == id { channelRegistrations[registrationKey] = nil }
        callHandlers[id] = nil
        resumption.forget([id])
    }

    /// A `monitor` request was answered: the monitor is made again after a reconnect.
    mutating func monitoringStarted() { resumption.monitoring = true }

    /// The broker's present id of the registration the application knows as `handle`.
    func currentID(of handle: String) -> String { resumption.current(handle) }

    // MARK: Losing and making the connection

    /// The reader of `endedSocket`, of generation `readerGeneration`, reached its end for
    /// `reason`. For the present generation: decides what comes next, takes out every pending
    /// request to fail (with the returned reason) and drops every handler, which the broker
    /// forgot with the socket. For an older one (a socket given up on while a newer one was
    /// adopted), nil: the newer socket carries everything, and nothing changes. One step, so
    /// that no socket can be adopted between the question and the change.
    mutating func readerEnded(socket endedSocket: Int32, generation readerGeneration: Int, reason: String) -> (
        failed: [NotifBusConnection.PendingRequest], reason: String, next: Resumption.Next
    )? {
        guard readerGeneration == generation else { return nil }
        defer { courseChanged() }
        let next = resumption.decide(closed: closedReason != nil, live: Set(observerHandlers.keys).union(callHandlers.keys))
        if next == .finish && closedReason == nil { closedReason = reason }
        if next != .finish && socket == endedSocket { socket = -1 }
        let failed = Array(pending.values)
        pending.removeAll()
        observerHandlers.removeAll()
        observerEvictionHandlers.removeAll()
        callHandlers.removeAll()
        channelRegistrations.removeAll()
        return (failed, closedReason ?? reason, next)
    }

    /// A new socket is connected while reconnecting: it becomes the present one, of the
    /// returned generation; nil when the connection was closed meanwhile (close the socket).
    mutating func adopt(socket newSocket: Int32) -> Int? {
        guard closedReason == nil else { return nil }
        socket = newSocket
        generation += 1
        courseChanged()
        return generation
    }

    /// A registration was made again on the present socket as `id`.
    mutating func registrationResumed(_ entry: Resumption.Entry, as id: String) {
        switch entry.kind {
        case .observer(_, _, _, let handler, let onEvicted):
            observerHandlers[id] = handler
            if let onEvicted { observerEvictionHandlers[id] = onEvicted }
        case .handler(let channel, let method, let handler):
            channelRegistrations[NotifBusConnection.registrationKey(channel, method)] = id
            callHandlers[id] = handler
        }
        resumption.moved(entry.handle, to: id)
    }

    /// A registration could not be made again (a newer one took its key or route).
    mutating func registrationSuperseded(_ entry: Resumption.Entry) {
        resumption.forget([entry.current])
    }

    /// Everything was made again on socket `generation`: the connection is back, unless that
    /// socket was replaced or closed meanwhile (false).
    mutating func reconnected(generation resumed: Int, socket resumedSocket: Int32) -> Bool {
        guard generation == resumed, socket == resumedSocket, closedReason == nil else { return false }
        resumption.reconnecting = false
        courseChanged()
        return true
    }

    /// Reconnecting stops because the connection was closed: returns the reason it ends with.
    mutating func abandonReconnecting() -> String {
        resumption.reconnecting = false
        courseChanged()
        return closedReason ?? "closed"
    }

    // MARK: Waiting for the course to change

    /// A key for a task about to wait for a change (`addChangeWaiter`).
    mutating func newChangeWaiterKey() -> Int {
        nextChangeWaiter += 1
        return nextChangeWaiter
    }

    /// `waiter` waits, under `key`, for the next change of course.
    mutating func addChangeWaiter(_ key: Int, _ waiter: CheckedContinuation<Void, Never>) {
        changeWaiters[key] = waiter
    }

    /// The waiter of `key`, if no change woke it yet: its wait is over (its bound passed).
    mutating func removeChangeWaiter(_ key: Int) -> CheckedContinuation<Void, Never>? {
        changeWaiters.removeValue(forKey: key)
    }

    /// The waiters a change woke since the last call, to resume.
    mutating func takeWoken() -> [CheckedContinuation<Void, Never>] {
        defer { woken.removeAll() }
        return woken
    }

    /// The socket, reconnecting or the end changed: every waiting task is woken.
    private mutating func courseChanged() {
        guard !changeWaiters.isEmpty else { return }
        woken.append(contentsOf: changeWaiters.values)
        changeWaiters.removeAll()
    }
}

/// The application's registrations in order, and what decides whether a lost connection
/// is made again. Part of ``ConnectionSession``.
struct Resumption {
    enum Kind {
        case observer(
            events: [String], priority: Int32, key: String?, handler: NotifBusConnection.ObserverHandler,
            onEvicted: (@Sendable (Eviction) -> Void)?)
        case handler(channel: String, method: String?, handler: MethodChannel.Handler)
    }

    struct Entry {
        /// The id the application got first; it stays valid.
        let handle: String
        /// The broker's id on the present socket.
        var current: String
        let kind: Kind
    }

    enum Next { case finish, reconnect, keepTrying }

    /// `.never` until `hello` succeeded.
    var policy = ReconnectPolicy.never
    private(set) var entries: [Entry] = []
    var monitoring = false
    var waitingTakes = 0
    /// Whether requests with a `once` key are sent again after a reconnect.
    var resendKeyed = false
    /// Such requests not yet answered.
    var keyedInFlight = 0
    var reconnecting = false

    mutating func add(_ kind: Kind, id: String) {
        if case .handler(let channel, let method, _) = kind {
            entries.removeAll {
                if case .handler(channel, method, _) = $0.kind { return true }
                return false
            }
        }
        entries.append(Entry(handle: id, current: id, kind: kind))
    }

    mutating func forget(_ ids: [String]) { entries.removeAll { ids.contains($0.current) } }

    mutating func moved(_ handle: String, to id: String) {
        if let i = entries.firstIndex(where: { $0.handle == handle }) { entries[i].current = id }
    }

    func current(_ handle: String) -> String { entries.first { $0.handle == handle }?.current ?? handle }

    /// What a reader whose socket ended does next. `live`: the ids that socket still held.
    mutating func decide(closed: Bool, live: Set<String>) -> Next {
        if reconnecting { return .keepTrying }
        if closed { return .finish }
        entries.removeAll { !live.contains($0.current) }
        let holds = !entries.isEmpty || monitoring || waitingTakes > 0 || keyedInFlight > 0
        switch policy {
        case .never: return .finish
        case .always: break
        case .whenHoldingRegistrations: if !holds { return .finish }
        }
        reconnecting = true
        return .reconnect
    }
}
