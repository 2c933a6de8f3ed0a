// Command-line options of mailclick-app. Parsing only: a bad flag becomes an error the
// entry point prints before exiting with status 2.

/// How the app runs.
struct AppOptions: Sendable {
    static let usage = """
        Usage: mailclick-app [--ask-first] [--ask-twice] [--ask-timeout SECONDS] [--run-for SECONDS]

        The Flutter side of the MailClick example. Registers its handler for
        current_email_id_in_notification_click_when_app_foreground_or_background on
        notification_interaction (it opens the email), and asks the native host once,
        with current_email_id_in_notification_click_when_app_terminated, which click
        launched it. --ask-first asks before registering the handler; --ask-twice asks a
        second time, which gets null. Exits after --run-for (default 60) or on SIGTERM.
        The socket comes from NOTIFBUS_SOCKET as for every notifbus client.
        """

    var askFirst = false
    var askTwice = false
    /// Bounds the launch question; it must outlast the host's wait for a launch click.
    var askTimeoutMs: Int64 = 30_000
    /// The app ends on its own after this long, so a forgotten one does not linger.
    var runForMs: Int64 = 60_000
    var help = false

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    static func parse(_ args: [String]) throws(Invalid) -> AppOptions {
        var options = AppOptions()
        var rest = args[...]
        while let flag = rest.popFirst() {
            switch flag {
            case "--help", "-h": options.help = true
            case "--ask-first": options.askFirst = true
            case "--ask-twice": options.askTwice = true
            case "--ask-timeout", "--run-for":
                guard let value = rest.popFirst() else { throw Invalid(description: "option '\(flag)' needs a value") }
                guard let seconds = Double(value), seconds > 0, seconds <= 86_400 else {
                    throw Invalid(description: "\(flag) needs a number of seconds from 0 to 86400, not '\(value)'")
                }
                let ms = Int64((seconds * 1000).rounded())
                if flag == "--ask-timeout" { options.askTimeoutMs = ms } else { options.runForMs = ms }
            default: throw Invalid(description: "unknown option '\(flag)'")
            }
        }
        return options
    }
}
