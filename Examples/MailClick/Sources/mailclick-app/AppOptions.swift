// Command-line options of mailclick-app. Parsing only: a bad flag becomes an error the
// entry point prints before exiting with status 2.
import MailClickSupport

/// How the app runs.
struct AppOptions: ExampleOptions {
    static let usage = """
        Usage: mailclick-app [--ask-first] [--ask-twice] [--ask-timeout SECONDS] [--run-for SECONDS]
               mailclick-app --desktop ID [--run-for SECONDS]

        The Flutter side of the MailClick example. Registers its handler for
        current_email_id_in_notification_click_when_app_foreground_or_background on
        notification_interaction (it opens the email), and asks the native host once,
        with current_email_id_in_notification_click_when_app_terminated, which click
        launched it. --ask-first asks before registering the handler; --ask-twice asks a
        second time, which gets null. Exits after --run-for (default 60) or on SIGTERM.

        --desktop ID: the whole mail app on a desktop, where `notifbus desktop --app-id ID`
        starts it for a click (its desktop file's Exec line): it takes the click that
        launched it and then observes didReceive under the key ID, opening each email.
        The socket comes from NOTIFBUS_SOCKET as for every notifbus client.
        """

    /// The desktop file id, when the app runs on a desktop on its own (no native host).
    var desktopID: String? = nil
    var askFirst = false
    var askTwice = false
    /// Bounds the launch question; it must outlast the host's wait for a launch click.
    var askTimeoutMs: Int64 = 30_000
    /// The app ends on its own after this long, so a forgotten one does not linger.
    var runForMs: Int64 = 60_000
    var help = false

    static func parse(_ args: [String]) throws(OptionError) -> AppOptions {
        var options = AppOptions()
        var rest = args[...]
        while let flag = rest.popFirst() {
            switch flag {
            case "--help", "-h": options.help = true
            case "--ask-first": options.askFirst = true
            case "--ask-twice": options.askTwice = true
            case "--desktop":
                guard let value = rest.popFirst() else { throw OptionError("option '\(flag)' needs a value") }
                options.desktopID = value
            case "--ask-timeout", "--run-for":
                guard let value = rest.popFirst() else { throw OptionError("option '\(flag)' needs a value") }
                let ms = try OptionError.milliseconds(value, for: flag, zeroAllowed: false, maxMs: 86_400_000)
                if flag == "--ask-timeout" { options.askTimeoutMs = ms } else { options.runForMs = ms }
            default: throw OptionError("unknown option '\(flag)'")
            }
        }
        return options
    }
}
