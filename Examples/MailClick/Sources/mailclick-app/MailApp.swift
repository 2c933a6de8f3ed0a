// The app's side of notification clicks: open the email the native host relays while the
// app runs, and ask the host at start which click, if any, launched the app. It never
// reads the broker's 'launch' slot itself; that is the host's business.
import MailClickSupport
import NotifBusClient
import NotifBusProtocol

/// The Flutter side of the mail app, on one broker connection.
struct MailApp: Sendable {
    let bus: NotifBusConnection
    let options: AppOptions

    private var channel: MethodChannel { bus.methodChannel(MailChannel.name) }

    /// From now on, clicks relayed by the host open their email here.
    func handleClicks() async throws(NotifBusError) {
        try await channel.setMethodCallHandler(
            { call in
                guard let emailID = call.arguments["emailId"]?.stringValue else {
                    throw PlatformError(code: "bad_arguments", message: "no emailId in \(call.arguments.text)")
                }
                Console.line("opening email \(emailID) (app in foreground/background)")
                return ["opened": .string(emailID)]
            }, method: MailChannel.openClickedEmail)
        Console.line("ready: handling \(MailChannel.openClickedEmail)")
    }

    /// Asks the host which click launched the app and prints the answer. A second ask gets
    /// null: the host hands a launch click out once.
    func askLaunchClick(again: Bool) async {
        Console.line("asking the native host \(MailChannel.launchEmailID)")
        do {
            let answer = try await channel.invokeMethod(MailChannel.launchEmailID, timeout: .milliseconds(options.askTimeoutMs))
            switch (answer.stringValue, again) {
            case (let emailID?, false): Console.line("launched by a click on email \(emailID)")
            case (nil, false): Console.line("launched normally (no click)")
            case (let emailID?, true): Console.line("asked again: email \(emailID)")
            case (nil, true): Console.line("asked again: nil (a launch click is handed out once)")
            }
        } catch .notImplemented {
            Console.line("no native host answers \(MailChannel.launchEmailID): launched normally")
        } catch {
            Console.line("asking for the launch click failed: \(error)")
        }
    }
}
