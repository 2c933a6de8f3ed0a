// The names the MailClick host and app agree on, as a mail app's native and Flutter sides
// share their channel and method names: written once for both Swift programs (the Python
// app, python/mailclick_app.py, spells them again). Names only, no behaviour.

/// The channel between the native host and the app, its two methods and the launch slot.
public enum MailChannel {
    /// The method channel's name.
    public static let name = "notification_interaction"
    /// Host → app: a click arrived while the app runs. Arguments: the notification's userInfo.
    public static let openClickedEmail = "current_email_id_in_notification_click_when_app_foreground_or_background"
    /// App → host: the id of the email whose click launched the app, or null.
    public static let launchEmailID = "current_email_id_in_notification_click_when_app_terminated"
    /// The broker keeps an unhandled click here for the app to take at launch (protocol §3.6).
    public static let launchSlot = "launch"
    /// The observed event: a tap on a notification, `userNotificationCenter(_:didReceive:)`.
    public static let clickEvent = "didReceive"
}
