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

    /// On a desktop, the whole app: takes the click that launched it (the bridge started it
    /// for that click), then observes didReceive under its desktop file id and opens the
    /// email of each click; the bridge hands it the clicks that came while it started.
    func runOnDesktop(appID: String) async throws(NotifBusError) {
        let start = try await bus.receiveNotificationResponses(appID: appID) { response in
            Console.line("[mail app] opening email \(MailApp.emailID(of: response)) (app in foreground/background)")
            return .handled
        }
        if let launch = start.launchResponse {
            Console.line("[mail app] launched by a click on email \(MailApp.emailID(of: launch)): opening it")
        } else {
            Console.line("[mail app] launched normally (no click)")
        }
        Console.line("[mail app] ready: observing didReceive as \(appID)")
    }

    static func emailID(of response: NotificationResponse) -> String {
        response.notification.content.userInfo["emailId"]?.stringValue ?? "?"
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
