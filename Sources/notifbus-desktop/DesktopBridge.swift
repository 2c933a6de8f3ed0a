// The bridge between the broker and the desktop's notification server: it serves the
// `notifications` channel (add, remove, list, capabilities), asks the willPresent chain how
// to present, and turns the server's signals into one didReceive per notification, kept
// and posted in order across broker restarts. The delivered table is shared by the
// channel's tasks and the bus thread, under one lock.
import Dispatch
import Glibc
import NotifBusClient
import NotifBusDesktop
import NotifBusProtocol

/// What `notifbus desktop` was asked to do.
struct BridgeOptions: Sendable {
    var socket: String? = nil
    var appName = "notifbus"
    /// The presentation for a willPresent that no observer decided: like an app in the background.
    var unhandled: PresentationOptions = .banner
    /// Bounds every D-Bus call.
    var dbusTimeoutMs: Int64 = 5000
    /// How many shown notifications the bridge remembers; adding one more closes the oldest.
    var maxDelivered = DeliveryTable.defaultCapacity
    var verbose = false
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
    private let lock = Lock()
    private var table: DeliveryTable
    private var info: NotificationServerInfo? = nil
    /// The unique name that owns org.freedesktop.Notifications, once known.
    private var owner: String? = nil
    /// Counts server changes, so that what was read from an earlier server is not kept.
    private var generation: UInt64 = 0

    /// The responses to post, in signal order (`postResponses`). Each entry is one answered
    /// notification, so it grows only as fast as a person answers them.
    private let responseStream: AsyncStream<NotificationResponse>
    private let responses: AsyncStream<NotificationResponse>.Continuation
    /// Responses taken from the server's signals and not yet done with (posted, refused or
    /// given up), oldest first: the head is the one being posted.
    private var taken: [NotificationResponse] = []
    /// Whether the head of `taken` has been sent and waits for the broker's answer.
    private var headSent = false
    private var stopping = false
    /// Counts the broker connection's losses and returns (`watchBroker`), so that work begun
    /// on one broker session can tell that it ended.
    private var brokerChanges = 0

    init(broker: NotifBusConnection, server: NotificationServer, options: BridgeOptions) {
        self.broker = broker
        self.server = server
        self.options = options
        table = DeliveryTable(capacity: options.maxDelivered)
        (responseStream, responses) = AsyncStream.makeStream(of: NotificationResponse.self)
    }

    // MARK: The channel

    /// Serves one call of the `notifications` channel.
    func handle(_ call: MethodCall) async throws -> JSONValue {
        do {
            switch DesktopChannel.Method(rawValue: call.method) {
            case .add?: return try await add(call.arguments)
            case .removeDeliveredNotifications?: return try await remove(call.arguments)
            case .removeAllDeliveredNotifications?: return try await removeAll()
            case .getDeliveredNotifications?:
                let list = lock.withLock { table.delivered }
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

    func add(_ arguments: JSONValue) async throws -> JSONValue {
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
        let decision = try await broker.post(willPresent: notification)
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
        let replaces = lock.withLock { table.desktopId(forIdentifier: notification.identifier) } ?? 0
        // Its invoker has already been told it failed when the broker went away meanwhile:
        // nothing is shown then.
        guard broker.isOpen, lock.withLock({ brokerChanges }) == session else {
            throw NotifBusError.connectionLost(DesktopBridge.reconnecting + "; the notification was not shown")
        }
        let arguments = NotifyArguments(
            notification: notification, category: category, options: chosen,
            capabilities: Set(info.capabilities), appName: options.appName, replacesID: replaces)
        if options.verbose { log("Notify\(arguments)") }
        let id = try await server.notify(arguments) { [self] id, sender in
            let (superseded, forgotten) = lock.withLock { () -> (UInt32?, [UInt32]) in
                // The connection that answered Notify owns the name: its signals are the ones to trust.
                if let sender { owner = sender }
                let before = table.desktopId(forIdentifier: notification.identifier)
                let forgotten = table.record(notification, desktopId: id, category: category, routes: arguments.routes)
                return (before == id ? nil : before, forgotten)
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
        return NotificationDelivery(presented: true, options: chosen, desktopId: id).jsonValue
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
        let removed = lock.withLock { table.remove(identifiers: identifiers) }
        try await close(removed)
        return ["removed": .array(removed.map { .string($0.identifier) })]
    }

    func removeAll() async throws -> JSONValue {
        let removed = lock.withLock { () -> [(identifier: String, desktopId: UInt32)] in
            let all = table.delivered.map(\.notification.identifier)
            return table.remove(identifiers: all)
        }
        try await close(removed)
        return ["removed": .array(removed.map { .string($0.identifier) })]
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
    /// the owner is unknown nothing the bridge delivered is shown, so nothing is lost.
    func serverSignal(_ m: MessageReader) {
        let sender = m.sender
        let accepted = lock.withLock { owner != nil && owner == sender }
        guard accepted else {
            if options.verbose { log("ignored \(m.member ?? "a signal") from \(sender ?? "?"), which does not own \(NotificationServer.busName)") }
            return
        }
        let response: NotificationResponse?
        var answeredID: UInt32? = nil
        do {
            switch m.member {
            case "ActionInvoked"?:
                let id = try m.uint32(), key = try m.string()
                response = lock.withLock { table.actionInvoked(desktopId: id, key: key) }
                answeredID = id
            case "NotificationReplied"?:
                let id = try m.uint32(), text = try m.string()
                response = lock.withLock { table.replied(desktopId: id, text: text) }
                answeredID = id
            case "NotificationClosed"?:
                let id = try m.uint32(), reason = try m.uint32()
                response = lock.withLock { table.closed(desktopId: id, reason: reason) }
            default:
                return
            }
        } catch {
            log("ignored a malformed \(m.member ?? "signal") from \(sender ?? "?"): \(error)")
            return
        }
        guard let response else { return }
        let kept = lock.withLock { () -> Bool in
            guard !stopping else { return false }
            taken.append(response)
            return true
        }
        guard kept, case .enqueued = responses.yield(response) else {
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
        for await response in responseStream {
            await post(response)
            lock.withLock { _ = taken.removeFirst() }
        }
    }

    /// Posts one response, waiting for the broker while it is away. A response nothing
    /// handled is posted again on the next broker session; one that may have been handled
    /// is logged and let go (`FailedPost`).
    func post(_ response: NotificationResponse) async {
        let what = DesktopBridge.describe(response)
        var again = false
        while true {
            if await waitForBroker() || again { await waitForObservers() }
            lock.withLock { headSent = true }
            let answer: Result<PostResult, NotifBusError>
            do {
                answer = .success(try await broker.post(didReceive: response))
            } catch {
                answer = .failure(error)
            }
            lock.withLock { headSent = false }
            switch answer {
            case .success(let result):
                log(
                    "\(what)\(again ? " (posted again)" : ""): \(result.outcome.rawValue)"
                        + (result.by.map { " by \($0)" } ?? "") + (result.isRetainedForLaunch ? ", retained for launch" : ""))
                return
            case .failure(let error):
                switch FailedPost(error) {
                case .postAgain:
                    log("\(what) was not handled (\(error)); posting it again once the broker is back")
                    again = true
                    await waitForSessionEnd(lock.withLock { brokerChanges })
                case .refused:
                    log("\(what) was refused: \(error)")
                    return
                case .outcomeUnknown:
                    log("\(what) may have been handled: no answer came (\(error)); not posted again")
                    return
                }
            }
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
            return table.reset()
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

    /// Learns who owns the name now, without activating anything.
    func lookUpOwner() {
        server.bus.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "GetNameOwner", timeoutMicros: server.timeoutMicros, autoStart: false,
            arguments: { w in w.string(NotificationServer.busName) }
        ) { [self] reply in
            guard case .success(let reader) = reply, let unique = try? reader.string() else { return }
            lock.withLock { if owner == nil { owner = unique } }
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
