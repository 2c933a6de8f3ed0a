// Wire names of the `notifications` method channel that the desktop bridge serves
// (Protocol/DESKTOP.md): its methods, result members and error codes. Names only; the
// bridge and the clients decide nothing here.

/// The method channel on which `notifbus desktop` plays `UNUserNotificationCenter`.
public enum DesktopChannel {
    /// The channel's name.
    public static let name = "notifications"

    /// The methods the bridge serves.
    public enum Method: String, Sendable, CaseIterable {
        /// Present a notification as the `willPresent` chain decides.
        case add
        /// Close delivered notifications by request identifier.
        case removeDeliveredNotifications
        /// Close every notification the bridge delivered.
        case removeAllDeliveredNotifications
        /// The notifications still shown, oldest first.
        case getDeliveredNotifications
        /// The server's name, version and capabilities.
        case capabilities
    }

    /// Error codes the bridge answers with, beyond the broker's.
    public enum ErrorCode: String, Sendable, CaseIterable {
        /// Nothing owns `org.freedesktop.Notifications`, and activating it failed.
        case noNotificationServer = "no_notification_server"
        /// The server did not answer within the bridge's D-Bus timeout.
        case notificationServerTimeout = "notification_server_timeout"
        /// The server answered with a D-Bus error.
        case notificationServerError = "notification_server_error"
        /// The arguments are not what the method takes.
        case badArguments = "bad_arguments"
        /// With `--state-dir`: the notification could not be written down before the answer,
        /// so it was closed again.
        case storageFailed = "storage_failed"
    }
}
