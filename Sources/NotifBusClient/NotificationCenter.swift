// The Swift face of the desktop bridge (`notifbus desktop`): `NotificationCenter` calls the
// `notifications` method channel with the names of `UNUserNotificationCenter`, and the
// result types convert to and from that channel's JSON. It never talks to D-Bus itself.
import NotifBusProtocol

/// What `add` did with a notification: whether it is on screen, with which options, and the
/// desktop server's id for it.
public struct NotificationDelivery: Sendable, Hashable {
    /// Whether the notification was sent to the desktop's notification server.
    public var presented: Bool
    /// The presentation the `willPresent` chain decided (or `--unhandled` supplied).
    public var options: PresentationOptions
    /// The server's id (`Notify`'s answer); `nil` when not presented.
    public var desktopId: UInt32?

    /// A delivery result.
    public init(presented: Bool, options: PresentationOptions, desktopId: UInt32?) {
        self.presented = presented
        self.options = options
        self.desktopId = desktopId
    }

    /// Reads `{"presented": bool, "options": [...], "desktopId": n | null}`.
    public init(json: JSONValue) throws(NotificationDecodingError) {
        let r = try JSONObjectReader(json, path: "result")
        guard let presented = r.optional("presented")?.boolValue else {
            throw NotificationDecodingError(path: r.path("presented"), reason: "must be a boolean")
        }
        self.presented = presented
        options = try PresentationOptions(json: r.required("options"))
        desktopId = try r.optionalDesktopID("desktopId")
    }

    /// The result as the channel writes it.
    public var jsonValue: JSONValue {
        ["presented": .bool(presented), "options": options.jsonValue, "desktopId": desktopId.map { .integer(Int64($0)) } ?? .null]
    }
}

/// A notification the desktop still shows, as `UNNotification` in `getDeliveredNotifications`.
public struct DeliveredNotification: Sendable, Hashable {
    /// The notification as it was added (its `userInfo` included: that never left the bridge).
    public var notification: Notification
    /// The server's id for it.
    public var desktopId: UInt32

    /// A delivered notification.
    public init(notification: Notification, desktopId: UInt32) {
        self.notification = notification
        self.desktopId = desktopId
    }

    /// Reads `{"notification": {...}, "desktopId": n}`.
    public init(json: JSONValue) throws(NotificationDecodingError) {
        let r = try JSONObjectReader(json, path: "delivered")
        notification = try Notification(r.object("notification"))
        guard let id = try r.optionalDesktopID("desktopId") else {
            throw NotificationDecodingError(path: r.path("desktopId"), reason: "is required")
        }
        desktopId = id
    }

    /// The entry as the channel writes it.
    public var jsonValue: JSONValue {
        ["notification": notification.jsonValue, "desktopId": .integer(Int64(desktopId))]
    }
}

/// The desktop's notification server, as `GetServerInformation` and `GetCapabilities` tell.
public struct NotificationServerInfo: Sendable, Hashable {
    /// Such as `dunst`.
    public var name: String
    /// Who makes the server, as it says.
    public var vendor: String
    /// The server's own version.
    public var version: String
    /// The version of the Desktop Notifications Specification it implements.
    public var specVersion: String
    /// Such as `actions`, `body`, `inline-reply`.
    public var capabilities: [String]

    /// Server information.
    public init(name: String, vendor: String, version: String, specVersion: String, capabilities: [String]) {
        self.name = name
        self.vendor = vendor
        self.version = version
        self.specVersion = specVersion
        self.capabilities = capabilities
    }

    /// Reads `{"name", "vendor", "version", "specVersion", "capabilities": [...]}`.
    public init(json: JSONValue) throws(NotificationDecodingError) {
        let r = try JSONObjectReader(json, path: "result")
        name = try r.string("name")
        vendor = try r.string("vendor")
        version = try r.string("version")
        specVersion = try r.string("specVersion")
        capabilities = try r.strings("capabilities")
    }

    /// The result as the channel writes it.
    public var jsonValue: JSONValue {
        [
            "name": .string(name), "vendor": .string(vendor), "version": .string(version), "specVersion": .string(specVersion),
            "capabilities": .array(capabilities.map { .string($0) }),
        ]
    }
}

/// The desktop's notification center through the bridge, with the names of
/// `UNUserNotificationCenter`. The user's answers come back as `didReceive` events: observe
/// them with `addDidReceiveObserver`.
///
///     let center = NotificationCenter(connection: bus)
///     let delivery = try await center.add(Notification(identifier: "mail-1", content: content))
public struct NotificationCenter: Sendable {
    /// The connection the calls go through.
    public let connection: NotifBusConnection
    /// Bounds each call; `nil` uses the connection's request timeout.
    public let timeout: Duration?

    /// A center on `connection`.
    public init(connection: NotifBusConnection, timeout: Duration? = nil) {
        self.connection = connection
        self.timeout = timeout
    }

    var channel: MethodChannel { connection.methodChannel(DesktopChannel.name) }

    func call(_ method: DesktopChannel.Method, _ arguments: JSONValue? = nil) async throws(MethodChannelError) -> JSONValue {
        try await channel.invokeMethod(method.rawValue, arguments: arguments, timeout: timeout)
    }

    static func read<T>(_ body: () throws(NotificationDecodingError) -> T) throws(MethodChannelError) -> T {
        do {
            return try body()
        } catch {
            throw .transport(.protocolViolation("the bridge's result does not read: \(error)"))
        }
    }

    /// Presents `notification` as the `willPresent` chain decides, as
    /// `UNUserNotificationCenter.add(_:)`. Adding an identifier that is still delivered
    /// replaces that notification on screen.
    @discardableResult
    public func add(_ notification: Notification) async throws(MethodChannelError) -> NotificationDelivery {
        let result = try await call(.add, notification.jsonValue)
        return try NotificationCenter.read { () throws(NotificationDecodingError) in try NotificationDelivery(json: result) }
    }

    /// Closes the delivered notifications with these request identifiers; returns the ones
    /// that were delivered and are now closed.
    @discardableResult
    public func removeDeliveredNotifications(withIdentifiers identifiers: [String]) async throws(MethodChannelError) -> [String] {
        let result = try await call(.removeDeliveredNotifications, ["identifiers": .array(identifiers.map { .string($0) })])
        return try NotificationCenter.read { () throws(NotificationDecodingError) in try JSONObjectReader(result, path: "result").strings("removed") }
    }

    /// Closes every notification the bridge delivered; returns their identifiers.
    @discardableResult
    public func removeAllDeliveredNotifications() async throws(MethodChannelError) -> [String] {
        let result = try await call(.removeAllDeliveredNotifications)
        return try NotificationCenter.read { () throws(NotificationDecodingError) in try JSONObjectReader(result, path: "result").strings("removed") }
    }

    /// The notifications still shown, oldest first, as `getDeliveredNotifications`.
    public func deliveredNotifications() async throws(MethodChannelError) -> [DeliveredNotification] {
        let result = try await call(.getDeliveredNotifications)
        guard let list = result["notifications"]?.arrayValue else {
            throw .transport(.protocolViolation("getDeliveredNotifications result without 'notifications'"))
        }
        return try NotificationCenter.read { () throws(NotificationDecodingError) in
            var out: [DeliveredNotification] = []
            for item in list { out.append(try DeliveredNotification(json: item)) }
            return out
        }
    }

    /// The desktop's notification server and what it can do; `no_notification_server` when
    /// there is none.
    public func serverInformation() async throws(MethodChannelError) -> NotificationServerInfo {
        let result = try await call(.capabilities)
        return try NotificationCenter.read { () throws(NotificationDecodingError) in try NotificationServerInfo(json: result) }
    }
}

extension JSONObjectReader {
    /// A server's notification id (`Notify`'s `u`): an integer in 0...2^32-1, or absent.
    func optionalDesktopID(_ key: String) throws(NotificationDecodingError) -> UInt32? {
        guard let i = try optionalInteger(key) else { return nil }
        guard let id = UInt32(exactly: i) else { throw NotificationDecodingError(path: path(key), reason: "must be in 0...4294967295") }
        return id
    }

    /// An array whose every element is a string.
    func strings(_ key: String) throws(NotificationDecodingError) -> [String] {
        var list: [String] = []
        for (i, item) in try array(key).enumerated() {
            guard let s = item.stringValue else { throw NotificationDecodingError(path: path("\(key)[\(i)]"), reason: "must be a string") }
            list.append(s)
        }
        return list
    }
}
