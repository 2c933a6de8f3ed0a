// Command-line options of mailclick-host. Parsing only: a bad flag becomes an error the
// entry point prints before exiting with status 2.
import MailClickSupport

/// How the native host runs.
struct HostOptions: ExampleOptions {
    static let usage = """
        Usage: mailclick-host [--launch-wait SECONDS] [--invoke-timeout SECONDS]
                              [--priority N] [--key KEY] [--run-for SECONDS]

        The native side of the MailClick example. Observes didReceive (key mail-native-host)
        and relays each click to the app over notification_interaction; a click the app
        cannot take is passed on, so the broker keeps it in slot 'launch'. Answers the
        app's current_email_id_in_notification_click_when_app_terminated with the emailId
        of that kept click, waiting up to --launch-wait (default 2) for one, or null.
        The socket comes from NOTIFBUS_SOCKET as for every notifbus client.
        """

    /// How long the app's launch question waits for a click that is not there yet.
    var launchWaitMs: Int64 = 2000
    /// How long a relayed click waits for the app; bounded well below the broker's hop timeout.
    var invokeTimeoutMs: Int64 = 5000
    var priority: Int32 = 10
    var key = "mail-native-host"
    /// The host ends on its own after this long, so a forgotten one does not linger.
    var runForMs: Int64 = 600_000
    var help = false

    static func parse(_ args: [String]) throws(OptionError) -> HostOptions {
        var options = HostOptions()
        var rest = args[...]
        while let flag = rest.popFirst() {
            if flag == "--help" || flag == "-h" {
                options.help = true
                continue
            }
            guard let value = rest.popFirst() else { throw OptionError("option '\(flag)' needs a value") }
            switch flag {
            case "--launch-wait": options.launchWaitMs = try seconds(value, flag, maxMs: 600_000)
            case "--invoke-timeout": options.invokeTimeoutMs = try seconds(value, flag, maxMs: 600_000)
            case "--run-for": options.runForMs = try seconds(value, flag, maxMs: 86_400_000)
            case "--key": options.key = value
            case "--priority":
                guard let n = Int32(value) else { throw OptionError("--priority needs an integer, not '\(value)'") }
                options.priority = n
            default: throw OptionError("unknown option '\(flag)'")
            }
        }
        return options
    }

    private static func seconds(_ text: String, _ flag: String, maxMs: Int64) throws(OptionError) -> Int64 {
        try OptionError.milliseconds(text, for: flag, zeroAllowed: true, maxMs: maxMs)
    }
}
