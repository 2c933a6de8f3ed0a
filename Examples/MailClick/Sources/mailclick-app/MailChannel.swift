// The names the MailClick app and host agree on, as a mail app's Flutter and native sides
// share their channel and method names. mailclick-host declares the same names; the two
// programs share no code, only the wire.

/// The channel between the app and the native host, and its two methods.
enum MailChannel {
    static let name = "notification_interaction"
    /// Host → app: a click arrived while the app runs. Arguments: the notification's userInfo.
    static let openClickedEmail = "current_email_id_in_notification_click_when_app_foreground_or_background"
    /// App → host: the id of the email whose click launched the app, or null.
    static let launchEmailID = "current_email_id_in_notification_click_when_app_terminated"
}
