// `notifbus-desktop` (run as `notifbus desktop`): makes the broker's notification delegate
// the delegate of the desktop's notification server on the D-Bus session bus. It parses
// options and wires the broker, the bus thread and the bridge; the rules live elsewhere.
import Glibc
import NotifBusClient
import NotifBusProtocol

let usage = """
    Usage: notifbus desktop [--socket PATH] [--app-name NAME] [--unhandled banner|none]
                            [--dbus-timeout DUR] [--max-delivered N] [--verbose]

    Serves the method channel 'notifications' as UNUserNotificationCenter does, for the
    notification server on the D-Bus session bus ($DBUS_SESSION_BUS_ADDRESS):
      add                              {Notification} -> {"presented","options","desktopId"}
      removeDeliveredNotifications     {"identifiers":[...]} -> {"removed":[...]}
      removeAllDeliveredNotifications  -> {"removed":[...]}
      getDeliveredNotifications        -> {"notifications":[{"notification","desktopId"}]}
      capabilities                     -> {"name","vendor","version","specVersion","capabilities"}
    'add' posts willPresent and shows the notification when the chain completes with banner,
    list or alert; an unhandled willPresent follows --unhandled (default banner). Clicks,
    replies and dismissals come back as one didReceive per notification.

    --app-name NAME     the app_name the server shows (default notifbus)
    --dbus-timeout DUR  bound of every D-Bus call, such as 5s or 500ms (default 5s)
    --max-delivered N   notifications remembered for their answers; one more closes the
                        oldest on the desktop (default 4096, 1 to 1000000)
    --verbose           log the arguments of every Notify call on stderr
    When the broker goes away the bridge reconnects by itself (retrying at least once a
    second) and serves the channel again; the clicks, replies and dismissals it takes
    meanwhile are posted, in order, once the broker is back and has an observer of
    didReceive (or after 3 s), and a post the stopping broker answered shutting_down is
    posted again. It exits 1 when no broker answers at start, when the session bus goes
    away, or when another process takes over the channel. On SIGINT or SIGTERM it posts
    the responses it already has, waiting for a reconnecting broker, and exits 0; what is
    left after 5 s is logged and it exits 1.
    See Protocol/DESKTOP.md for the mapping.
    """

func fail(_ message: String, status: Int32) -> Never {
    log(message)
    exit(status)
}

func parseDuration(_ text: String) -> Int64? {
    for (suffix, factor) in [("ms", Int64(1)), ("s", 1000), ("m", 60_000)] where text.hasSuffix(suffix) {
        guard let n = Int64(text.dropLast(suffix.count)), n > 0, n <= 3_600_000 / factor else { return nil }
        return n * factor
    }
    return nil
}

func parseOptions(_ args: [String]) -> BridgeOptions {
    var options = BridgeOptions()
    var i = 0
    func value(_ flag: String) -> String {
        i += 1
        guard i < args.count else { fail("option '\(flag)' needs a value", status: 2) }
        return args[i]
    }
    while i < args.count {
        let arg = args[i]
        switch arg {
        case "--help", "-h":
            print(usage)
            exit(0)
        case "--socket": options.socket = value(arg)
        case "--app-name": options.appName = value(arg)
        case "--unhandled":
            switch value(arg) {
            case "banner": options.unhandled = .banner
            case "none": options.unhandled = []
            case let other: fail("--unhandled must be banner or none, not '\(other)'", status: 2)
            }
        case "--dbus-timeout":
            let text = value(arg)
            guard let ms = parseDuration(text) else { fail("--dbus-timeout needs a duration such as 5s or 500ms, not '\(text)'", status: 2) }
            options.dbusTimeoutMs = ms
        case "--max-delivered":
            let text = value(arg)
            guard let n = Int(text), n >= 1, n <= 1_000_000 else { fail("--max-delivered needs a count from 1 to 1000000, not '\(text)'", status: 2) }
            options.maxDelivered = n
        case "--verbose": options.verbose = true
        default: fail("unknown option '\(arg)'; see 'notifbus desktop --help'", status: 2)
        }
        i += 1
    }
    return options
}

/// Hands the bridge the server's signals and the changes of who owns its name. A function of
/// its own, so that the match rules' strings are freed when it returns instead of living in
/// the top-level task's frame until exit.
func watchServer(_ bridge: DesktopBridge, on bus: SessionBus) throws(DBusCallError) {
    try bus.addMatch("type='signal',interface='\(NotificationServer.interface)',path='\(NotificationServer.path)'") {
        bridge.serverSignal($0)
    }
    try bus.addMatch(
        "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
            + "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(NotificationServer.busName)'"
    ) {
        bridge.ownerChanged($0)
    }
}

let options = parseOptions(Array(CommandLine.arguments.dropFirst()))
guard let address = getenv("DBUS_SESSION_BUS_ADDRESS").map({ String(cString: $0) }), !address.isEmpty else {
    fail("DBUS_SESSION_BUS_ADDRESS is not set: there is no session bus to find a notification server on", status: 1)
}

let broker: NotifBusConnection
do {
    // A broker restart does not restart the desktop's server: the delivered table stays
    // true, so the bridge reconnects (and serves the channel again) rather than exit.
    broker = try await NotifBusConnection.connect(socket: options.socket, name: "notifbus-desktop", reconnect: .always)
} catch {
    fail("\(error)", status: 1)
}

let timeoutMicros = UInt64(options.dbusTimeoutMs) * 1000
let sessionBus: SessionBus
do {
    sessionBus = try SessionBus.connect(address: address, callTimeoutMicros: timeoutMicros) { why in
        fail(why, status: 1)
    }
} catch {
    fail("\(error)", status: 1)
}
let bridge = DesktopBridge(broker: broker, server: NotificationServer(bus: sessionBus, timeoutMicros: timeoutMicros), options: options)
let brokerStates = broker.connectionStates()
let watching = Task { await bridge.watchBroker(brokerStates) }
do {
    try watchServer(bridge, on: sessionBus)
} catch {
    fail("\(error)", status: 1)
}
let posting = Task { await bridge.postResponses() }
guard sessionBus.start() else { fail("cannot start the D-Bus thread", status: 1) }
bridge.lookUpOwner()

// The connection reconnects for as long as it is not closed; closed, it ends the bridge.
_ = DetachedThread.start {
    while !broker.waitUntilClosed(timeout: .seconds(3600)) {}
    bridge.logUnposted()
    fail("the broker connection ended", status: 1)
}
broker.onEvicted = { eviction in
    bridge.logUnposted()
    fail("another process took over the '\(DesktopChannel.name)' channel (\(eviction)); exiting", status: 1)
}

let serverLine: String
do {
    let info = try await bridge.currentInfo()
    serverLine = "\(info.name) \(info.version), capabilities: \(info.capabilities.joined(separator: " "))"
} catch {
    serverLine = "none yet (\(error))"
}
do {
    try await broker.methodChannel(DesktopChannel.name).setMethodCallHandler { call in try await bridge.handle(call) }
} catch {
    fail("cannot serve the '\(DesktopChannel.name)' channel: \(error)", status: 1)
}
log("serving channel '\(DesktopChannel.name)' on \(broker.clientID); notification server: \(serverLine)")

// The server's clicks and replies already taken exist nowhere else: SIGINT and SIGTERM
// post them before the bridge exits.
let stopSignals = bridge.stopOnSignals([SIGINT, SIGTERM], posting: posting)

while true {
    try? await Task.sleep(for: .seconds(3600))
}
