// The notification profile on a connection: the category set, typed observers for the
// three delegate methods, typed posts, and the launch payload. Payload rules are the
// broker's; this file only converts between Swift values and the §3.6 JSON.
//
//     UNUserNotificationCenterDelegate method              notifbus event   observer / post
//     userNotificationCenter(_:willPresent:withCompletionHandler:)  willPresent  addWillPresentObserver / post(willPresent:)
//     userNotificationCenter(_:didReceive:withCompletionHandler:)   didReceive   addDidReceiveObserver / post(didReceive:)
//     userNotificationCenter(_:openSettingsFor:)                     openSettings addOpenSettingsObserver / post(openSettings:)
import NotifBusProtocol

extension NotifBusConnection {
    /// The slot where the broker keeps an unhandled click that would launch the app (§3.6).
    public static let launchSlot = "launch"

    // MARK: Categories

    /// Replaces the broker's whole category set, as
    /// `UNUserNotificationCenter.setNotificationCategories(_:)`. Returns how many categories
    /// are now in force. A set the broker refuses throws `bad_request` and leaves the old
    /// set in force. The order is kept: `notificationCategories()` returns this array.
    /// With a `once` key (§3.8), the same set sent again with that key replaces nothing.
    @discardableResult
    public func setNotificationCategories(_ categories: [NotificationCategory], once: String? = nil) async throws(NotifBusError) -> Int {
        var fields: [String: JSONValue] = ["categories": .array(categories.map(\.jsonValue))]
        if let once { fields["once"] = .string(once) }
        let result = try await request(Op.setCategories, fields)
        guard let count = result["count"]?.intValue else { throw .protocolViolation("setCategories result without 'count': \(result)") }
        return Int(count)
    }

    /// The category set in force, exactly as it was accepted, as
    /// `UNUserNotificationCenter.notificationCategories()`.
    public func notificationCategories() async throws(NotifBusError) -> [NotificationCategory] {
        let result = try await request(Op.getCategories)
        guard let list = result["categories"] else { throw .protocolViolation("getCategories result without 'categories'") }
        do {
            return try NotificationCategory.list(json: list)
        } catch {
            throw .protocolViolation("the broker's categories do not read: \(error)")
        }
    }

    // MARK: Typed observers

    /// Observes `willPresent`, as `userNotificationCenter(_:willPresent:withCompletionHandler:)`.
    /// Return the options to present with (this completes the event: the Apple completion
    /// handler called with them; `[]` means "do not present"), or `nil` to pass the
    /// notification on to the next observer.
    @discardableResult
    public func addWillPresentObserver(
        priority: Int32 = Limits.defaultPriority, key: String? = nil,
        onEvicted: (@Sendable (Eviction) -> Void)? = nil,
        _ willPresent: @escaping @Sendable (Notification) async -> PresentationOptions?
    )
        async throws(NotifBusError) -> ObserverRegistration
    {
        try await addObserver(events: [ProfileEvent.willPresent.rawValue], priority: priority, key: key, onEvicted: onEvicted) { event in
            // The broker checked the payload; one that still does not read is not ours to decide.
            guard let notification = try? NotifBusConnection.notification(inWillPresent: event.payload),
                let options = await willPresent(notification)
            else { return .next }
            return .complete(options.jsonValue)
        }
    }

    /// Observes `didReceive`, as `userNotificationCenter(_:didReceive:withCompletionHandler:)`:
    /// the user chose an action (or the default or dismiss action) on a notification.
    /// `.handled` ends the chain; `.pass` gives the response to the next observer; `.stop`
    /// ends it unhandled. A launching response nobody handles is retained for launch.
    @discardableResult
    public func addDidReceiveObserver(
        priority: Int32 = Limits.defaultPriority, key: String? = nil,
        onEvicted: (@Sendable (Eviction) -> Void)? = nil,
        _ didReceive: @escaping @Sendable (NotificationResponse) async -> DelegateReply
    )
        async throws(NotifBusError) -> ObserverRegistration
    {
        try await addObserver(events: [ProfileEvent.didReceive.rawValue], priority: priority, key: key, onEvicted: onEvicted) { event in
            guard let response = try? NotificationResponse(json: event.payload) else { return .next }
            return await didReceive(response).observerReply
        }
    }

    /// Observes `openSettings`, as `userNotificationCenter(_:openSettingsFor:)`: the user
    /// asked for the app's notification settings, from a notification (or from the system
    /// settings, when it is `nil`). `.handled` means this observer showed them.
    @discardableResult
    public func addOpenSettingsObserver(
        priority: Int32 = Limits.defaultPriority, key: String? = nil,
        onEvicted: (@Sendable (Eviction) -> Void)? = nil,
        _ openSettings: @escaping @Sendable (Notification?) async -> DelegateReply
    )
        async throws(NotifBusError) -> ObserverRegistration
    {
        try await addObserver(events: [ProfileEvent.openSettings.rawValue], priority: priority, key: key, onEvicted: onEvicted) { event in
            // `try?` would flatten "no notification" into "unreadable"; keep them apart.
            let notification: Notification?
            do {
                notification = try NotifBusConnection.notification(inOpenSettings: event.payload)
            } catch {
                return .next
            }
            return await openSettings(notification).observerReply
        }
    }

    // MARK: Typed posts

    /// Posts `willPresent`: the notification arrived while the app is in the foreground.
    /// `PostResult.presentationOptions` is the decision.
    public func post(willPresent notification: Notification, once: String? = nil, timeout: Duration? = nil) async throws(NotifBusError)
        -> PostResult
    {
        try await post(ProfileEvent.willPresent.rawValue, payload: ["notification": notification.jsonValue], once: once, timeout: timeout)
    }

    /// Posts `willPresent` with `userInfo` written as these bytes (one JSON object) in place
    /// of `notification.content.userInfo`: for a bridge that passes on what an app sent, so
    /// that the app's data arrives byte for byte (a number keeps its text) and is never
    /// rebuilt into a larger frame.
    public func post(
        willPresent notification: Notification, userInfo: RawJSON, once: String? = nil, timeout: Duration? = nil
    ) async throws(NotifBusError) -> PostResult {
        let bytes = try NotifBusConnection.encoded(notification, userInfo: userInfo)
        let payload = Array(#"{"notification":"#.utf8) + bytes + [UInt8(ascii: "}")]
        return try await post(ProfileEvent.willPresent, payload: payload, once: once, timeout: timeout)
    }

    /// Posts `didReceive`: the user answered a notification. The broker refuses a response
    /// its categories do not allow (`invalid_action`). `PostResult.isRetainedForLaunch`
    /// says whether it was kept for an app that is not running.
    public func post(didReceive response: NotificationResponse, once: String? = nil, timeout: Duration? = nil) async throws(NotifBusError)
        -> PostResult
    {
        try await post(ProfileEvent.didReceive.rawValue, payload: response.jsonValue, once: once, timeout: timeout)
    }

    /// Posts `didReceive` with the notification's `userInfo` written as these bytes (one JSON
    /// object), as `post(willPresent:userInfo:)` does: a bridge posts the click on a
    /// notification with the data the app sent, unchanged.
    public func post(
        didReceive response: NotificationResponse, userInfo: RawJSON, once: String? = nil, timeout: Duration? = nil
    ) async throws(NotifBusError) -> PostResult {
        let bytes = try NotifBusConnection.encoded(response.notification, userInfo: userInfo)
        var bare = response
        bare.notification.content.userInfo = [:]  // written as `bytes`: not built as a tree
        let payload = NotifBusConnection.encoded(bare.jsonValue, with: "notification", as: bytes)
        return try await post(ProfileEvent.didReceive, payload: payload, once: once, timeout: timeout)
    }

    /// A profile event posted with a payload given as its bytes.
    private func post(_ event: ProfileEvent, payload: [UInt8], once: String?, timeout: Duration?) async throws(NotifBusError)
        -> PostResult
    {
        var fields: [String: JSONValue] = ["name": .string(event.rawValue)]
        if let once { fields["once"] = .string(once) }
        let answer = try await answeredRequest(Op.post, fields, raw: [("payload", payload)], timeout: timeout, onReply: nil)
        return try PostResult(JSONValue(validated: answer.result), isRepeat: answer.isRepeat)
    }

    /// The JSON of `notification` with its content's `userInfo` written as `userInfo`.
    static func encoded(_ notification: Notification, userInfo: RawJSON) throws(NotifBusError) -> [UInt8] {
        guard JSONScanner.isValidDocument(userInfo), userInfo.first == UInt8(ascii: "{") else {
            throw .invalidArgument("userInfo must be one JSON object")
        }
        var bare = notification
        bare.content.userInfo = [:]  // written as `userInfo`: not built as a tree
        let content = encoded(bare.content.jsonValue, with: "userInfo", as: userInfo)
        return encoded(bare.jsonValue, with: "content", as: content)
    }

    /// The JSON of `object` with its member `name` written as `bytes` (one JSON value),
    /// after its other members.
    static func encoded(_ object: JSONValue, with name: String, as bytes: [UInt8]) -> [UInt8] {
        guard case .object(var members) = object else { preconditionFailure("not an object: \(object)") }
        members.removeValue(forKey: name)
        var out = JSONValue.object(members).encoded
        out.removeLast()
        if out.count > 1 { out.append(UInt8(ascii: ",")) }
        out += JSONValue.string(name).encoded + [UInt8(ascii: ":")] + bytes + [UInt8(ascii: "}")]
        return out
    }

    /// Posts `openSettings`, from a notification or (with `nil`) from the system settings.
    public func post(openSettings notification: Notification?, once: String? = nil, timeout: Duration? = nil) async throws(NotifBusError)
        -> PostResult
    {
        try await post(
            ProfileEvent.openSettings.rawValue, payload: ["notification": notification?.jsonValue ?? .null], once: once, timeout: timeout)
    }

    // MARK: Launch

    /// Takes the response that launched the app — a launching click nobody handled — once;
    /// nil when there is none. With `wait`, an empty slot is waited on for that long. A slot
    /// value that is not a `didReceive` payload throws `protocolViolation` (and is gone).
    public func launchNotificationResponse(wait: Duration? = nil) async throws(NotifBusError) -> NotificationResponse? {
        guard let value = try await take(NotifBusConnection.launchSlot, wait: wait) else { return nil }
        do {
            return try NotificationResponse(json: value)
        } catch {
            throw .protocolViolation("slot '\(NotifBusConnection.launchSlot)' holds no notification response: \(error)")
        }
    }

    /// How long `receiveNotificationResponses` waits for the launch response of an app
    /// started by D-Bus activation: the desktop bridge puts it in `launch` before it
    /// activates the app, so it is there; the wait covers a broker that is slow.
    public static let activationWait = Duration.seconds(5)

    /// The one call an app makes at start where `notifbus desktop --app-id APP_ID` may start
    /// it (Protocol/DESKTOP.md §7): takes the response that launched the app from slot
    /// `launch` (once; nil when none did), then observes didReceive with `didReceive` under
    /// the key `appID`, which tells the bridge the app runs and hands it the clicks that came
    /// while it started, in order. `activatedFor` is the notification identifier of a D-Bus
    /// activation (the target of `ActivateAction`): the response is then waited for up to
    /// `wait` (default `activationWait`) and is the same one; the D-Bus call itself is not a
    /// second click.
    public func receiveNotificationResponses(
        appID: String, activatedFor: String? = nil, wait: Duration? = nil, priority: Int32 = Limits.defaultPriority,
        _ didReceive: @escaping @Sendable (NotificationResponse) async -> DelegateReply
    ) async throws(NotifBusError) -> AppStart {
        let launch = try await launchNotificationResponse(wait: wait ?? (activatedFor == nil ? nil : NotifBusConnection.activationWait))
        let observer = try await addDidReceiveObserver(priority: priority, key: appID, didReceive)
        return AppStart(launchResponse: launch, observer: observer)
    }

    static func notification(inWillPresent payload: JSONValue) throws(NotificationDecodingError) -> Notification {
        try Notification(JSONObjectReader(payload, path: "payload").object("notification"))
    }

    static func notification(inOpenSettings payload: JSONValue) throws(NotificationDecodingError) -> Notification? {
        if payload.isNull { return nil }
        let r = try JSONObjectReader(payload, path: "payload")
        guard r.optional("notification") != nil else { return nil }
        return try Notification(r.object("notification"))
    }
}

/// What an app gets from `receiveNotificationResponses`.
public struct AppStart: Sendable {
    /// The click that started the app, taken once from `launch`; nil when it started without one.
    public let launchResponse: NotificationResponse?
    /// The app's observer of didReceive (its key is the app id).
    public let observer: ObserverRegistration
}

extension PostResult {
    /// The presentation decided for a `willPresent`: the completing observer's options, or
    /// nil when the event was stopped or unhandled (the notification is not presented).
    public var presentationOptions: PresentationOptions? {
        guard outcome == .completed else { return nil }
        return try? PresentationOptions(json: value)
    }

    /// Whether the broker kept a `didReceive` payload for launch (`"retained":"launch"`).
    public var isRetainedForLaunch: Bool { retained == NotifBusConnection.launchSlot }
}
