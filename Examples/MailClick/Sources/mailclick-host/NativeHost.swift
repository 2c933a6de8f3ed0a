// The native host's two duties: relay a notification click to the running app, and tell an
// app that was launched by a click which email it was for. It holds no UI and no mail
// state of its own: the broker's chain and its 'launch' slot carry everything.
import MailClickSupport
import NotifBusClient
import NotifBusProtocol

/// The native side of the mail app, on one broker connection.
struct NativeHost: Sendable {
    let bus: NotifBusConnection
    let options: HostOptions

    private var channel: MethodChannel { bus.methodChannel(MailChannel.name) }

    /// Serves the app's launch question, then observes clicks. Returns the observer.
    func start() async throws(NotifBusError) -> ObserverRegistration {
        try await channel.setMethodCallHandler({ [self] _ in try await launchEmailID() }, method: MailChannel.launchEmailID)
        return try await bus.addObserver(events: [MailChannel.clickEvent], priority: options.priority, key: options.key) { [self] event in
            await relay(event)
        }
    }

    /// One click: the app opens the email if it is running and completes the event with its
    /// answer; otherwise the event is passed on, ends unhandled, and the broker keeps it for
    /// the app's launch.
    func relay(_ event: ObserverEvent) async -> ObserverReply {
        let notification = event.payload["notification"]
        let identifier = notification?["identifier"]?.stringValue ?? "?"
        let userInfo = notification?["content"]?["userInfo"] ?? .null
        Console.line("click on \(identifier) (event \(event.event), userInfo \(userInfo.text)): asking the app to open it")
        do {
            let answer = try await channel.invokeMethod(
                MailChannel.openClickedEmail, arguments: userInfo,
                timeout: .milliseconds(options.invokeTimeoutMs))
            Console.line("the app opened it (answer \(answer.text)): completing event \(event.event)")
            return .complete(answer)
        } catch .notImplemented {
            Console.line(
                "the app has no handler for it (not_implemented: not running, or not ready yet): "
                    + "answering next, so the click is kept for launch")
            return .next
        } catch {
            Console.line("the app did not take the click (\(error)): answering next, so the click is kept for launch")
            return .next
        }
    }

    /// The app asks which click launched it: take the kept click once, waiting a little for
    /// one that is still on its way, and answer its emailId or null.
    func launchEmailID() async throws -> JSONValue {
        Console.line(
            "the app asks which click launched it: taking slot '\(MailChannel.launchSlot)', "
                + "waiting up to \(Console.seconds(options.launchWaitMs))")
        let payload: JSONValue?
        do {
            payload = try await bus.take(MailChannel.launchSlot, wait: .milliseconds(options.launchWaitMs))
        } catch {
            throw PlatformError(code: "launch_unavailable", message: "cannot take slot '\(MailChannel.launchSlot)': \(error)")
        }
        guard let payload else {
            Console.line("no click launched the app: answering null")
            return .null
        }
        guard let emailID = payload["notification"]?["content"]?["userInfo"]?["emailId"]?.stringValue else {
            Console.line("the launch click names no email (\(payload.text)): answering null")
            return .null
        }
        Console.line("the app was launched by a click on email \(emailID): answering \"\(emailID)\"")
        return .string(emailID)
    }
}
