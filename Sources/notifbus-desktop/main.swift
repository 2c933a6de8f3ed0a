// `notifbus-desktop` (run as `notifbus desktop`): makes the broker's notification delegate
// the delegate of the desktop's notification server on the D-Bus session bus. It parses
// options and wires the broker, the bus thread and the bridge; the rules live elsewhere.
import Glibc
import NotifBusClient
import NotifBusDesktop
import NotifBusProtocol

let usage = """
    Usage: notifbus desktop [--socket PATH] [--app-id ID] [--app-name NAME] [--state-dir DIR]
                            [--unhandled banner|none] [--dbus-timeout DUR] [--start-timeout DUR]
                            [--max-delivered N] [--verbose]

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

    --app-id ID         the app's desktop file id (org.example.Mail for org.example.Mail.desktop,
                        found in $XDG_DATA_HOME/applications and $XDG_DATA_DIRS/*/applications):
                        its Name and Icon are shown, the desktop-entry hint names it, and a click
                        that nothing handles and that would launch the app starts it (D-Bus
                        activation when the file says DBusActivatable=true, else its Exec line).
                        The app counts as running while it observes didReceive with the key ID.
    --app-name NAME     the app_name the server shows (default: the desktop file's Name, the
                        id, or notifbus)
    --state-dir DIR     keep the delivered notifications in DIR, so that a click on one still
                        on the screen is posted after the bridge restarted or crashed
    --dbus-timeout DUR  bound of every D-Bus call, such as 5s or 500ms (default 5s)
    --start-timeout DUR how long a start of the app may take until it observes didReceive
                        (default 10s); clicks that come meanwhile go to it once it does
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
        case "--app-id":
            let id = value(arg)
            guard DesktopEntry.isValidID(id) else {
                fail("--app-id needs a desktop file id (letters, digits, '.', '-', '_'; such as org.example.Mail), not '\(id)'", status: 2)
            }
            options.appID = id
        case "--state-dir": options.stateDir = value(arg)
        case "--start-timeout":
            let text = value(arg)
            guard let ms = parseDuration(text) else { fail("--start-timeout needs a duration such as 10s or 500ms, not '\(text)'", status: 2) }
            options.startTimeoutMs = ms
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

/// The name and icon shown, from `--app-name` and the desktop file of `--app-id`.
func appIdentity(_ options: BridgeOptions) -> AppIdentity {
    var identity = AppIdentity(id: options.appID, name: options.appName ?? options.appID ?? "notifbus")
    guard let id = options.appID else { return identity }
    switch AppLauncher.desktopEntry(id) {
    case .success(let entry):
        if options.appName == nil { identity.name = entry.name }
        identity.icon = entry.icon ?? ""
        log("app \(id): \(entry.path) (\(entry.dbusActivatable ? "DBusActivatable" : "Exec"))")
    case .failure(let error):
        log("app \(id): \(error); shown as '\(identity.name)', and a click cannot start it until its desktop file is there")
    }
    return identity
}

/// The delivered table: read from `--state-dir`, or in memory only. The folder is opened
/// here and nowhere else.
func openStore(_ options: BridgeOptions) -> (store: DeliveredStore, evicted: [UInt32]) {
    guard let folder = options.stateDir else { return (DeliveredStore(capacity: options.maxDelivered), []) }
    do {
        _ = try StateFolderLock.claim(folder, name: "desktop", for: "desktop bridge")  // one bridge per folder, before it is read
        let (bytes, file) = try StateFolder.open(folder)
        let loaded = try DeliveredStore.open(bytes, file: file, capacity: options.maxDelivered)
        if let problem = loaded.problem {
            log("\(file.path): \(problem); kept the \(loaded.store.table.count) notification(s) recorded before it")
        }
        return (loaded.store, loaded.evicted)
    } catch {
        fail("--state-dir \(folder): \(error)", status: 1)
    }
}

/// After a restart with `--state-dir`: the server sends the signals of the notifications an
/// earlier bridge showed to that bridge's connection (dunst, GNOME Shell), which is gone.
/// A monitor connection sees them on their way; nil when there is nothing to watch or the
/// bus refuses (then only servers that broadcast their signals reach the bridge for those).
func watchEarlierConnections(_ earlier: Set<String>, bridge: DesktopBridge, address: String, timeoutMicros: UInt64) -> SessionBus? {
    guard !earlier.isEmpty else { return nil }
    let names = earlier.sorted()
    let rules = names.map {
        "type='signal',interface='\(NotificationServer.interface)',path='\(NotificationServer.path)',destination='\($0)'"
    }
    do {
        let monitor = try SessionBus.monitor(
            address: address, rules: rules, callTimeoutMicros: timeoutMicros, onLost: { why in log("the monitor connection ended: \(why)") }
        ) { bridge.earlierConnectionSignal($0, earlier: earlier) }
        guard monitor.start() else { return nil }
        log("watching the signals the server sends to the bridge's earlier connection(s) \(names.joined(separator: " "))")
        return monitor
    } catch {
        log(
            "cannot watch the signals sent to the bridge's earlier connection(s) \(names.joined(separator: " ")) (\(error)); "
                + "clicks on the notifications they showed reach the bridge only from a server that broadcasts them")
        return nil
    }
}

let options = parseOptions(Array(CommandLine.arguments.dropFirst()))
guard let address = getenv("DBUS_SESSION_BUS_ADDRESS").map({ String(cString: $0) }), !address.isEmpty else {
    fail("DBUS_SESSION_BUS_ADDRESS is not set: there is no session bus to find a notification server on", status: 1)
}
let identity = appIdentity(options)
let (store, evictedOnLoad) = openStore(options)

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
let launcher = options.appID.map { AppLauncher(appID: $0, bus: sessionBus, timeoutMicros: UInt64(options.startTimeoutMs) * 1000) }
let bridge = DesktopBridge(
    broker: broker, server: NotificationServer(bus: sessionBus, timeoutMicros: timeoutMicros), options: options,
    identity: identity, store: store, launcher: launcher)
let brokerStates = broker.connectionStates()
let watching = Task { await bridge.watchBroker(brokerStates) }
do {
    try watchServer(bridge, on: sessionBus)
} catch {
    fail("\(error)", status: 1)
}
let posting = Task { await bridge.postResponses() }
guard sessionBus.start() else { fail("cannot start the D-Bus thread", status: 1) }
let earlierConnections = await bridge.restore(evicted: evictedOnLoad)
let earlierMonitor = watchEarlierConnections(earlierConnections, bridge: bridge, address: address, timeoutMicros: timeoutMicros)

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
log(
    "serving channel '\(DesktopChannel.name)' on \(broker.clientID) as \(sessionBus.uniqueName ?? "?") on the session bus; "
        + "notification server: \(serverLine)")

// The server's clicks and replies already taken exist nowhere else: SIGINT and SIGTERM
// post them before the bridge exits.
let stopSignals = bridge.stopOnSignals([SIGINT, SIGTERM], posting: posting)

while true {
    try? await Task.sleep(for: .seconds(3600))
}
