// The bridge between the broker and the desktop's notification server: it serves the
// `notifications` channel (add, remove, list, capabilities), asks the willPresent chain how
// to present, and turns the server's signals into one didReceive per notification, kept
// and posted in order across broker restarts; a click kept for launch starts the app
// (`--app-id`). The delivered table (on disk with `--state-dir`) is shared by the
// channel's tasks and the bus thread, under one lock.
import Dispatch
import Glibc
import NotifBusClient
import NotifBusDesktop
import NotifBusProtocol

/// What `notifbus desktop` was asked to do.
struct BridgeOptions: Sendable {
    var socket: String? = nil
    /// `--app-name`: the name shown, over the desktop file's.
    var appName: String? = nil
    /// `--app-id`: the app's desktop file id, which the bridge starts for a click kept for launch.
    var appID: String? = nil
    /// `--state-dir`: where the delivered table is kept.
    var stateDir: String? = nil
    /// `--start-timeout`: how long a start may take until the app observes didReceive.
    var startTimeoutMs: Int64 = 10_000
    /// The presentation for a willPresent that no observer decided: like an app in the background.
    var unhandled: PresentationOptions = .banner
    /// Bounds every D-Bus call.
    var dbusTimeoutMs: Int64 = 5000
    /// How many shown notifications the bridge remembers; adding one more closes the oldest.
    var maxDelivered = DeliveryTable.defaultCapacity
    var verbose = false
}

/// Who the notifications are from: the name and icon shown, and the desktop file id.
struct AppIdentity: Sendable {
    var id: String? = nil
    var name = "notifbus"
    var icon = ""
}

/// A response taken from the server's signals, numbered in signal order (AppStarts), with
/// the activation token the server sent for its notification, if any.
struct TakenResponse: Sendable {
    let number: UInt64
    let response: NotificationResponse
    /// The notification's `userInfo` as the app sent it, when known: posted unchanged.
    let userInfo: RawJSON?
    let activationToken: String?
}

/// Prints one line on stderr, prefixed with the tool's name.
func log(_ text: String) {
    let line = Array("notifbus desktop: \(text)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

final class DesktopBridge: @unchecked Sendable {
    let broker: NotifBusConnection
    let server: NotificationServer
    let options: BridgeOptions
    let identity: AppIdentity
    /// Starts the app; nil without `--app-id`.
    let launcher: AppLauncher?
    private let lock = Lock()
    private var store: DeliveredStore
    private var starts: AppStarts
    /// The session bus's id: with the server's unique name, it names the server instance.
    private var busID: String? = nil
    private var info: NotificationServerInfo? = nil
    /// The unique name that owns org.freedesktop.Notifications, once known.
    private var owner: String? = nil
    /// Counts server changes, so that what was read from an earlier server is not kept.
    private var generation: UInt64 = 0

    /// The responses to post, in signal order (`postResponses`). Each entry is one answered
    /// notification, so it grows only as fast as a person answers them.
    private let responseStream: AsyncStream<TakenResponse>
    private let responses: AsyncStream<TakenResponse>.Continuation
    /// Responses taken from the server's signals and not yet done with (posted, refused or
    /// given up), oldest first: the head is the one being posted.
    private var taken: [NotificationResponse] = []
    /// Whether the head of `taken` has been sent and waits for the broker's answer.
    private var headSent = false
    private var stopping = false
    /// Counts the broker connection's losses and returns (`watchBroker`), so that work begun
    /// on one broker session can tell that it ended.
    private var brokerChanges = 0
    /// Notify answers whose record could not be written to `--state-dir`, by id, until their
    /// `add` sees it (the record is made on the bus thread, before `notify` returns).
    private var unrecorded: [UInt32: JournalFileError] = [:]
    /// When the bridge started (`nowMs`).
    private let started = ContinuousClock.now
    /// This run's part of the `once` keys of its posts (`nextKey`): 128 random bits, so that
    /// no run, before or after a restart, reuses another's keys.
    private let runID = String(UInt64.random(in: .min ... .max), radix: 16) + "-" + String(UInt64.random(in: .min ... .max), radix: 16)
    /// The posts keyed so far in this run.
    private var postedKeys = 0

    init(
        broker: NotifBusConnection, server: NotificationServer, options: BridgeOptions, identity: AppIdentity,
        store: DeliveredStore, launcher: AppLauncher?
    ) {
        self.broker = broker
        self.server = server
        self.options = options
        self.identity = identity
        self.store = store
        self.launcher = launcher
        starts = AppStarts(timeoutMs: options.startTimeoutMs)
        (responseStream, responses) = AsyncStream.makeStream(of: TakenResponse.self)
    }

    // MARK: The channel

    /// Serves one call of the `notifications` channel.
    func handle(_ call: MethodCall) async throws -> JSONValue {
        do {
            switch DesktopChannel.Method(rawValue: call.method) {
            case .add?: return try await add(call.arguments, raw: call.rawArguments)
            case .removeDeliveredNotifications?: return try await remove(call.arguments)
            case .removeAllDeliveredNotifications?: return try await removeAll()
            case .getDeliveredNotifications?:
                let list = lock.withLock { store.table.delivered }
                return ["notifications": .array(list.map(\.jsonValue))]
            case .capabilities?: return try await refreshedInfo().jsonValue
            case nil:
                throw PlatformError(
                    code: ErrorCode.notImplemented.rawValue,
                    message: "the desktop bridge has no method '\(call.method)' (it has: "
                        + DesktopChannel.Method.allCases.map(\.rawValue).joined(separator: ", ") + ")")
            }
        } catch let error as DesktopError {
            throw error.platformError
        } catch NotifBusError.invalidArgument(let why) {
            // The app's request could not be passed on as it is (a post above maxFrame).
            throw DesktopBridge.badArguments("the bridge could not pass the request on: \(why)")
        } catch let error as NotifBusError {
            throw PlatformError(code: error.code ?? ErrorCode.handlerGone.rawValue, message: "the bridge's broker call failed: \(error)")
        }
    }

    static func badArguments(_ message: String) -> PlatformError {
        PlatformError(code: DesktopChannel.ErrorCode.badArguments.rawValue, message: message)
    }

    /// Why an `add` whose text holds a NUL is refused (DESKTOP.md §2).
    static func nulRefused(_ field: String) -> PlatformError {
        badArguments("\(field) contains a NUL character (U+0000), which a D-Bus string cannot carry; the notification was not shown")
    }

    /// Shows a notification the `willPresent` chain lets through. Its `userInfo` goes into
    /// the post as the bytes the app sent (`raw`), never re-encoded.
    func add(_ arguments: JSONValue, raw: RawJSON) async throws -> JSONValue {
        let notification: NotifBusClient.Notification
        do {
            notification = try NotifBusClient.Notification(json: arguments)
        } catch {
            throw DesktopBridge.badArguments("add takes a Notification: \(error)")
        }
        if let field = NotifyArguments.fieldWithNUL(in: notification.content) { throw DesktopBridge.nulRefused(field) }
        // The invoker of an add is on the broker: while the bridge reconnects, its answer
        // could go nowhere, so the add fails at once instead of waiting for the broker.
        let session = lock.withLock { brokerChanges }
        guard broker.isOpen else { throw NotifBusError.connectionLost(DesktopBridge.reconnecting) }
        let userInfo = NotifyArguments.rawUserInfo(in: raw)
        let decision =
            if let userInfo {
                try await broker.post(willPresent: notification, userInfo: userInfo)
            } else {
                try await broker.post(willPresent: notification)
            }
        let chosen: PresentationOptions
        switch decision.outcome {
        case .completed: chosen = decision.presentationOptions ?? []
        case .stopped: chosen = []
        case .unhandled: chosen = options.unhandled
        }
        guard !chosen.isDisjoint(with: [.banner, .list, .alert]) else {
            return NotificationDelivery(presented: false, options: chosen, desktopId: nil).jsonValue
        }
        let categories = try await broker.notificationCategories()
        let category = notification.content.categoryIdentifier.flatMap { id in categories.first { $0.identifier == id } }
        if let category, let field = NotifyArguments.fieldWithNUL(in: category) { throw DesktopBridge.nulRefused(field) }
        let info = try await currentInfo()
        let replaces = lock.withLock { store.table.desktopId(forIdentifier: notification.identifier) } ?? 0
        // Its invoker has already been told it failed when the broker went away meanwhile:
        // nothing is shown then.
        guard broker.isOpen, lock.withLock({ brokerChanges }) == session else {
            throw NotifBusError.connectionLost(DesktopBridge.reconnecting + "; the notification was not shown")
        }
        let arguments = NotifyArguments(
            notification: notification, category: category, options: chosen,
            capabilities: Set(info.capabilities), appName: identity.name, replacesID: replaces,
            appIcon: identity.icon, desktopEntry: identity.id)
        if options.verbose { log("Notify\(arguments)") }
        let id = try await server.notify(arguments) { [self] id, sender in
            let (superseded, forgotten) = lock.withLock { () -> (UInt32?, [UInt32]) in
                // The connection that answered Notify owns the name: its signals are the ones to trust.
                if let sender {
                    owner = sender
                    noteServer(owner: sender)
                }
                let before = store.table.desktopId(forIdentifier: notification.identifier)
                do throws(JournalFileError) {
                    let forgotten = try store.record(
                        notification, desktopId: id, category: category, routes: arguments.routes, caller: server.bus.uniqueName,
                        userInfo: userInfo)
                    return (before == id ? nil : before, forgotten)
                } catch {
                    unrecorded[id] = error
                    return (nil, [])
                }
            }
            // Another add of this identifier was shown meanwhile under another id (both were
            // sent before either was answered): only the newest stays, as when it replaces.
            // The oldest ones forgotten to stay within --max-delivered leave the screen too, so
            // that nothing is shown whose answer the bridge would not know.
            let closing = (superseded.map { [$0] } ?? []) + forgotten
            if !closing.isEmpty {
                if !forgotten.isEmpty {
                    log("closing \(forgotten.count) oldest notification(s) to stay within --max-delivered \(options.maxDelivered)")
                }
                Task { for old in closing { try? await server.close(old) } }
            }
        }
        if let failure = lock.withLock({ unrecorded.removeValue(forKey: id) }) {
            // Shown, but a bridge started after a crash would not know it: it leaves the screen.
            try? await server.close(id)
            log("add \(notification.identifier): \(failure); closed it again")
            throw PlatformError(
                code: DesktopChannel.ErrorCode.storageFailed.rawValue,
                message: "the notification could not be written to --state-dir (\(failure)); it was closed again")
        }
        return NotificationDelivery(presented: true, options: chosen, desktopId: id).jsonValue
    }

    /// Records (under the lock) that the server instance is the one `owner` names; a new
    /// one empties the table. Logs what it forgot.
    @discardableResult
    private func noteServer(owner: String?) -> Int {
        let (forgotten, failure) = store.serverIs(ServerInstance(bus: busID, owner: owner))
        if let failure { log("cannot write the server change to --state-dir: \(failure)") }
        return forgotten
    }

    func remove(_ arguments: JSONValue) async throws -> JSONValue {
        guard let list = arguments["identifiers"]?.arrayValue else {
            throw DesktopBridge.badArguments("removeDeliveredNotifications takes {\"identifiers\": [...]}")
        }
        var identifiers: [String] = []
        for item in list {
            guard let s = item.stringValue else { throw DesktopBridge.badArguments("identifiers must be strings") }
            identifiers.append(s)
        }
        let removed = lock.withLock { journaled { $0.remove(identifiers: identifiers) } }
        try await close(removed)
        return ["removed": .array(removed.map { .string($0.identifier) })]
    }

    func removeAll() async throws -> JSONValue {
        let removed = lock.withLock { () -> [(identifier: String, desktopId: UInt32)] in
            let all = store.table.delivered.map(\.notification.identifier)
            return journaled { $0.remove(identifiers: all) }
        }
        try await close(removed)
        return ["removed": .array(removed.map { .string($0.identifier) })]
    }

    /// Runs a change of the table (under the lock) and writes down what it forgot. The
    /// change stands whatever the disk does; a failure is logged: after a crash, a
    /// notification it forgot could be answered again.
    /// The response `decide` makes of a signal for notification `id`, and what the table held
    /// for it that the response is posted with (the server's activation token, the app's
    /// `userInfo` bytes), read before `decide` forgets the notification.
    private func answer(_ id: UInt32, _ decide: (inout DeliveryTable) -> NotificationResponse?) -> (
        token: String?, userInfo: RawJSON?, response: NotificationResponse?
    ) {
        lock.withLock { (store.table.activationToken(desktopId: id), store.table.userInfo(desktopId: id), journaled(decide)) }
    }

    private func journaled<T>(_ body: (inout DeliveryTable) -> T) -> T {
        let (result, failure) = store.change(body)
        if let failure { log("cannot write a change of the delivered table to --state-dir: \(failure)") }
        return result
    }

    /// Closes on the server what the table no longer holds. A server that is gone has
    /// nothing left to close; any other failure is reported after every close was tried.
    func close(_ removed: [(identifier: String, desktopId: UInt32)]) async throws {
        var failure: DesktopError? = nil
        for entry in removed {
            do {
                try await server.close(entry.desktopId)
            } catch {
                if case .noServer = error { continue }
                failure = failure ?? error
            }
        }
        if let failure { throw failure }
    }

    /// The server's information, read once per server.
    func currentInfo() async throws(DesktopError) -> NotificationServerInfo {
        if let cached = lock.withLock({ info }) { return cached }
        return try await refreshedInfo()
    }

    /// Reads the server's information again and keeps it, unless the server changed meanwhile.
    func refreshedInfo() async throws(DesktopError) -> NotificationServerInfo {
        let before = lock.withLock { generation }
        let fresh = try await server.information()
        lock.withLock { if generation == before { info = fresh } }
        return fresh
    }

    // MARK: The server's signals (bus thread)

    /// A signal on org.freedesktop.Notifications. Only the name's owner is believed: any
    /// connection on the session bus may send a signal with this interface and path. While
    /// the owner is unknown nothing the bridge delivered is shown, so nothing is lost. A
    /// notification the signal decides is forgotten on disk (`--state-dir`) before its
    /// response is queued, so that no later bridge posts it again.
    func serverSignal(_ m: MessageReader) {
        let sender = m.sender
        let accepted = lock.withLock { owner != nil && owner == sender }
        guard accepted else {
            if options.verbose { log("ignored \(m.member ?? "a signal") from \(sender ?? "?"), which does not own \(NotificationServer.busName)") }
            return
        }
        let response: NotificationResponse?
        var answeredID: UInt32? = nil
        var token: String? = nil
        var userInfo: RawJSON? = nil
        do {
            switch m.member {
            case "ActionInvoked"?:
                let id = try m.uint32(), key = try m.string()
                (token, userInfo, response) = answer(id) { $0.actionInvoked(desktopId: id, key: key) }
                answeredID = id
            case "NotificationReplied"?:
                let id = try m.uint32(), text = try m.string()
                (token, userInfo, response) = answer(id) { $0.replied(desktopId: id, text: text) }
                answeredID = id
            case "NotificationClosed"?:
                let id = try m.uint32(), reason = try m.uint32()
                (_, userInfo, response) = answer(id) { $0.closed(desktopId: id, reason: reason) }
            case "ActivationToken"?:
                let id = try m.uint32(), value = try m.string()
                lock.withLock { store.noteActivationToken(value, desktopId: id) }
                return
            default:
                return
            }
        } catch {
            log("ignored a malformed \(m.member ?? "signal") from \(sender ?? "?"): \(error)")
            return
        }
        guard let response else { return }
        let next = lock.withLock { () -> TakenResponse? in
            guard !stopping else { return nil }
            taken.append(response)
            return TakenResponse(number: starts.take(), response: response, userInfo: userInfo, activationToken: token)
        }
        guard let next, case .enqueued = responses.yield(next) else {
            let kept = next != nil
            if kept { lock.withLock { _ = taken.popLast() } }
            log("\(DesktopBridge.describe(response)) not posted: the bridge is stopping")
            return
        }
        if !broker.isOpen { log("\(DesktopBridge.describe(response)) kept until the broker is back") }
        Task { [server, options] in
            // An answered notification leaves the screen, as on iOS; some servers (dunst
            // through dunstctl, KDE after a reply) keep it otherwise. The close that follows
            // finds no entry, so it posts nothing.
            if let answeredID {
                do {
                    try await server.close(answeredID)
                } catch {
                    if options.verbose { log("closing answered notification \(answeredID): \(error)") }
                }
            }
        }
    }

    /// Posts the responses one after the other, in the order the server's signals came:
    /// the broker runs one event at a time anyway, and a later click must not overtake an
    /// earlier one (as separate tasks could). Runs for the bridge's life.
    func postResponses() async {
        for await next in responseStream {
            let result = await post(next.response, userInfo: next.userInfo)
            lock.withLock { _ = taken.removeFirst() }
            if let result, result.isRetainedForLaunch, launcher != nil { await startApp(for: next) }
        }
    }

    /// Posts one response, waiting for the broker while it is away, under a `once` key of
    /// its own: whatever is lost on the way (the answer, the connection, the broker), the
    /// response is sent again with the same key, and a broker that had it answers with its
    /// first outcome instead of running it again (`FailedPost`). Returns the broker's result,
    /// if it answered with one. With `userInfo`, the notification's data goes as those bytes.
    @discardableResult
    func post(_ response: NotificationResponse, userInfo: RawJSON? = nil) async -> PostResult? {
        let what = DesktopBridge.describe(response)
        let key = nextKey()
        var again = false
        var pauseMs = DesktopBridge.firstRetryPauseMs
        while true {
            if await waitForBroker() || again { await waitForObservers() }
            lock.withLock { headSent = true }
            let answer: Result<PostResult, NotifBusError>
            do {
                if let userInfo {
                    answer = .success(try await broker.post(didReceive: response, userInfo: userInfo, once: key))
                } else {
                    answer = .success(try await broker.post(didReceive: response, once: key))
                }
            } catch {
                answer = .failure(error)
            }
            lock.withLock { headSent = false }
            switch answer {
            case .success(let result):
                log(
                    "\(what)\(again ? " (posted again)" : "")\(result.isRepeat ? " (the broker had it already)" : ""): "
                        + result.outcome.rawValue + (result.by.map { " by \($0)" } ?? "")
                        + (result.isRetainedForLaunch ? ", retained for launch" : ""))
                return result
            case .failure(let error):
                switch FailedPost(error) {
                case .postAgain:
                    log("\(what) got no answer (\(error)); posting it again under its key once the broker is back")
                    again = true
                    if case .broker = error { await waitForSessionEnd(lock.withLock { brokerChanges }) }
                case .retryLater:
                    log("\(what) was not taken now (\(error)); posting it again in \(pauseMs) ms")
                    again = true
                    try? await Task.sleep(for: .milliseconds(pauseMs))
                    pauseMs = min(pauseMs * 2, DesktopBridge.lastRetryPauseMs)
                case .interrupted:
                    log("\(what) was cut short: the broker stopped while its chain ran (\(error)); not posted again")
                    return nil
                case .refused:
                    log("\(what) was refused: \(error)")
                    return nil
                }
            }
        }
    }

    /// A `once` key no other post of any bridge run uses: the run's random id and a count.
    func nextKey() -> String {
        lock.withLock {
            postedKeys += 1
            return "notifbus-desktop/\(runID)/\(postedKeys)"
        }
    }

    /// Waits until the broker connection works (it reconnects by itself); returns whether
    /// it was away.
    func waitForBroker() async -> Bool {
        var waited = false
        while !broker.isOpen {
            waited = true
            try? await Task.sleep(for: DesktopBridge.pollInterval)
        }
        return waited
    }

    /// After the broker came back, before the first response kept meanwhile is posted:
    /// waits until an observer of didReceive is registered there, for at most
    /// `observerGraceSeconds`. The apps reconnect by themselves too, and one the bridge
    /// overtook would see its clicks end unhandled (launch retention keeps only the last).
    func waitForObservers() async {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(DesktopBridge.observerGraceSeconds)
        let event = JSONValue.string(ProfileEvent.didReceive.rawValue)
        while clock.now < deadline {
            if let status = try? await broker.status(timeout: .seconds(DesktopBridge.observerGraceSeconds)),
                status.observers.contains(where: { $0["events"]?.arrayValue?.contains(event) == true })
            {
                return
            }
            try? await Task.sleep(for: DesktopBridge.observerPollInterval)
        }
        log("no observer of didReceive is back after \(DesktopBridge.observerGraceSeconds) s; posting the responses kept anyway")
    }

    /// After a `shutting_down` answer: waits until that broker session is over (the
    /// connection was lost, or lost and made again, since `changes`), for at most
    /// `sessionEndSeconds` (a stopping broker closes within 2 s, PROTOCOL.md §12).
    func waitForSessionEnd(_ changes: Int) async {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(DesktopBridge.sessionEndSeconds)
        while broker.isOpen, lock.withLock({ brokerChanges }) == changes, clock.now < deadline {
            try? await Task.sleep(for: DesktopBridge.pollInterval)
        }
    }

    /// Follows the broker connection for the bridge's life: logs each loss and return,
    /// and counts them. `states` is `broker.connectionStates()`, taken before any loss.
    func watchBroker(_ states: AsyncStream<ConnectionState>) async {
        for await state in states {
            lock.withLock { brokerChanges += 1 }
            switch state {
            case .disconnected(let reason):
                log("the broker connection was lost (\(reason)); reconnecting, \(unpostedCount) response(s) kept")
            case .reconnected(_, let superseded):
                // A superseded channel is reported to onEvicted, which ends the bridge.
                guard superseded.isEmpty else { continue }
                log("reconnected as \(broker.clientID): serving channel '\(DesktopChannel.name)' again; \(unpostedCount) response(s) to post")
            }
        }
    }

    /// Logs each response taken and not yet posted, oldest first (before the bridge exits).
    func logUnposted() {
        let (left, sent) = lock.withLock { (taken, headSent) }
        for (i, response) in left.enumerated() {
            log("\(DesktopBridge.describe(response)) \(i == 0 && sent ? "posted, with no answer yet" : "not posted")")
        }
    }

    /// `didReceive ACTION on IDENTIFIER`, for the log.
    static func describe(_ response: NotificationResponse) -> String {
        "didReceive \(response.actionIdentifier) on \(response.notification.identifier)"
    }

    /// Why an add fails while the broker connection is being made again.
    static let reconnecting = "the desktop bridge is reconnecting to the broker"
    /// How often a wait for the broker looks again; a restarted broker is found within a
    /// second anyway (the client's retry delays).
    static let pollInterval = Duration.milliseconds(20)
    /// Bounds the wait for a stopping broker to close, beyond its own 2 s.
    static let sessionEndSeconds: Int64 = 3
    /// Bounds the wait for an app's observer after a reconnect: the clients retry at least
    /// once a second (PROTOCOL.md §13, decision 40), so one that was there is back well
    /// within it, and the SIGTERM drain's 5 s still leaves time to post.
    static let observerGraceSeconds: Int64 = 3
    /// How often that wait asks the broker's `status`.
    static let observerPollInterval = Duration.milliseconds(50)
    /// The pause before a post the broker could not take now (`queue_full`,
    /// `storage_failed`) is sent again, doubled per try up to the last: a full queue drains
    /// at the pace of its events, a full disk when someone frees it.
    static let firstRetryPauseMs = 50
    static let lastRetryPauseMs = 5_000

    /// How many responses are still to be posted.
    var unpostedCount: Int { lock.withLock { taken.count } }

    /// SIGINT or SIGTERM: signals are no longer turned into responses (each one that comes
    /// is logged as not posted); those already taken are still posted, and `postResponses`
    /// returns after the last.
    /// Returns false when it was asked before.
    func finishResponses() -> Bool {
        guard
            lock.withLock({ () -> Bool in
                defer { stopping = true }
                return !stopping
            })
        else { return false }
        responses.finish()
        return true
    }

    /// `NameOwnerChanged` for org.freedesktop.Notifications: a new server knows none of the
    /// old one's notifications, and may have other capabilities. Only the bus itself sends
    /// it: any connection can send a signal with this path and interface, addressed to the
    /// bridge alone, and the match rule's sender does not filter those out (sd-bus cannot
    /// check a well-known sender name on its side), so the sender is checked here.
    func ownerChanged(_ m: MessageReader) {
        guard m.sender == SessionBus.busName else {
            if options.verbose { log("ignored NameOwnerChanged from \(m.sender ?? "?"), which is not the bus (\(SessionBus.busName))") }
            return
        }
        guard let name = try? m.string(), name == NotificationServer.busName,
            let old = try? m.string(), let new = try? m.string()
        else { return }
        let forgotten = lock.withLock { () -> Int in
            owner = new.isEmpty ? nil : new
            info = nil
            generation += 1
            return noteServer(owner: owner)
        }
        log("notification server changed (\(old.isEmpty ? "none" : old) -> \(new.isEmpty ? "none" : new)); forgot \(forgotten) delivered")
        guard !new.isEmpty else { return }
        Task { [self] in
            do {
                let info = try await refreshedInfo()
                log("server \(info.name) \(info.version), capabilities: \(info.capabilities.joined(separator: " "))")
            } catch {
                log("cannot read the new server's capabilities: \(error)")
            }
        }
    }

    /// At start: learns the bus's id and who owns the server's name (without activating
    /// anything), and keeps the notifications read from `--state-dir` only when that same
    /// server instance showed them. `evicted`: ids the journal dropped to fit
    /// `--max-delivered`, closed on that server. Returns the earlier bridge connections the
    /// kept notifications' signals go to.
    func restore(evicted: [UInt32]) async -> Set<String> {
        let id = await busString("GetId") { _ in }
        let unique = await busString("GetNameOwner") { w in w.string(NotificationServer.busName) }
        return lock.withLock {
            busID = id
            if owner == nil { owner = unique }
            let kept = store.table.count
            let forgotten = noteServer(owner: owner)
            if forgotten > 0 {
                log("forgot the \(forgotten) delivered notification(s) read from --state-dir: the server that showed them is gone")
            } else if kept > 0 {
                log("read \(kept) delivered notification(s) from --state-dir; their clicks are posted as before")
                if !evicted.isEmpty { Task { [server] in for old in evicted { try? await server.close(old) } } }
            }
            return store.table.earlierCallers(than: server.bus.uniqueName)
        }
    }

    /// Calls a method of the bus daemon that returns one string; nil when it fails.
    private func busString(_ member: String, _ arguments: @escaping @Sendable (inout MessageWriter) -> Void) async -> String? {
        await withCheckedContinuation { continuation in
            server.bus.call(
                destination: SessionBus.busName, path: "/org/freedesktop/DBus", interface: SessionBus.busName,
                member: member, timeoutMicros: server.timeoutMicros, autoStart: false, arguments: arguments
            ) { reply in
                guard case .success(let reader) = reply else { return continuation.resume(returning: nil) }
                continuation.resume(returning: try? reader.string())
            }
        }
    }

    /// A signal the monitor saw on its way to one of the bridge's earlier connections (a
    /// bridge before a restart): the server sends a notification's signals to the connection
    /// that called Notify for it. It is believed as the bridge's own are.
    func earlierConnectionSignal(_ m: MessageReader, earlier: Set<String>) {
        guard m.isSignal, m.interface == NotificationServer.interface, let to = m.destination, earlier.contains(to) else { return }
        serverSignal(m)
    }

    // MARK: Starting the app

    /// Milliseconds since the bridge started: the clock of `AppStarts`.
    var nowMs: Int64 {
        let elapsed = ContinuousClock.now - started
        return elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
    }

    /// Whether the broker lists the app's observer: one of didReceive under the key `--app-id`.
    func appObserving() async -> Bool {
        guard let id = identity.id, let status = try? await broker.status(timeout: .seconds(2)) else { return false }
        let event = JSONValue.string(ProfileEvent.didReceive.rawValue)
        return status.observers.contains { $0["key"]?.stringValue == id && $0["events"]?.arrayValue?.contains(event) == true }
    }

    /// The post of `next` ended with it kept in `launch`: unless the app observes
    /// didReceive, starts it and holds the posting until the app observes (the responses
    /// taken meanwhile then go to it, in order) or the start fails (AppStarts).
    func startApp(for next: TakenResponse) async {
        guard let launcher, let id = identity.id else { return }
        let what = DesktopBridge.describe(next.response)
        let observing = await appObserving()
        switch lock.withLock({ starts.posted(next.number, retainedForLaunch: true, appObserving: observing, now: nowMs) }) {
        case .postNext: return
        case .notStarted(.appObserving):
            log("\(what): \(id) observes didReceive (it runs), so it is not started")
            return
        case .notStarted(.joinedFailedStart):
            log("\(what): it came during a start of \(id) that failed; not started again")
            return
        case .start: break
        }
        let begun = nowMs
        var end: AppStarts.StartEnd = .stillStarting
        if let how = launcher.start(for: next.response, activationToken: next.activationToken) {
            log("starting \(id) for \(what): \(how)")
        } else {
            end = lock.withLock { starts.failed(launcher.takeFailure() ?? "it could not be started") }
        }
        while end == .stillStarting {
            if lock.withLock({ stopping }) {
                end = lock.withLock { starts.failed("the bridge is stopping") }
            } else if let failure = launcher.takeFailure() {
                end = lock.withLock { starts.failed(failure) }
            } else if await appObserving() {
                end = lock.withLock { starts.observed() }
            } else {
                end = lock.withLock { starts.tick(now: nowMs) }
                if end == .stillStarting { try? await Task.sleep(for: DesktopBridge.observerPollInterval) }
            }
        }
        switch end {
        case .handedOver(let held):
            log(
                "\(id) observes didReceive \(nowMs - begun) ms after its start"
                    + (held > 0 ? "; the \(held) response(s) taken meanwhile go to it now" : ""))
        case .failed(let reason, let held):
            log(
                "could not start \(id) for \(what): \(reason); the click stays in slot 'launch'"
                    + (held > 0 ? "; the \(held) response(s) taken meanwhile are posted without starting it again" : ""))
        case .stillStarting: break
        }
    }
}

extension DesktopBridge {
    /// How long SIGINT or SIGTERM waits for the responses already taken to be posted.
    static let drainSeconds: UInt32 = 5

    /// On any of `numbers`, stops taking responses, waits for `posting` (the task running
    /// `postResponses`, which waits for a reconnecting broker) and exits 0; after
    /// `drainSeconds` it exits 1, logging each response left. The returned sources must be kept alive.
    func stopOnSignals(_ numbers: [Int32], posting: Task<Void, Never>) -> [any DispatchSourceSignal] {
        numbers.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { @Sendable [self] in
                guard finishResponses() else { return }
                log(
                    "stopping (signal \(number)); posting \(unpostedCount) response(s) still queued"
                        + (broker.isOpen ? "" : " once the broker is back"))
                _ = DetachedThread.start { [self] in
                    sleep(DesktopBridge.drainSeconds)
                    logUnposted()
                    log("\(unpostedCount) response(s) not posted or not answered within \(DesktopBridge.drainSeconds) s; exiting")
                    exit(1)
                }
                Task {
                    await posting.value
                    log("stopped; every response taken was posted")
                    exit(0)
                }
            }
            source.resume()
            return source
        }
    }
}
