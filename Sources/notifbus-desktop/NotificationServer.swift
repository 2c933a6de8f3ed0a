// The calls the bridge makes on org.freedesktop.Notifications, each bounded by a timeout,
// with their D-Bus errors sorted into the channel's error codes in one place. It knows the
// message layouts; it keeps no state about notifications.
import CSdBus
import NotifBusClient
import NotifBusDesktop
import NotifBusProtocol

/// Why the bridge could not do what the server was asked.
enum DesktopError: Error, Sendable, CustomStringConvertible {
    /// Nothing owns the name and activation failed (or no service file exists).
    case noServer(String)
    /// The server did not answer within the bound.
    case timedOut(String)
    /// The server answered with an error, or with something else than the spec says.
    case server(String)

    var description: String {
        switch self {
        case .noServer(let why): return "no notification server on the session bus: \(why)"
        case .timedOut(let why): return "the notification server did not answer: \(why)"
        case .server(let why): return "the notification server failed: \(why)"
        }
    }

    /// The error a channel call is answered with.
    var platformError: PlatformError {
        switch self {
        case .noServer: return PlatformError(code: DesktopChannel.ErrorCode.noNotificationServer.rawValue, message: description)
        case .timedOut: return PlatformError(code: DesktopChannel.ErrorCode.notificationServerTimeout.rawValue, message: description)
        case .server: return PlatformError(code: DesktopChannel.ErrorCode.notificationServerError.rawValue, message: description)
        }
    }

    /// Sorts a failed call by what it means for the caller.
    init(_ error: DBusCallError, member: String) {
        switch error {
        case .reply(let name, let message):
            let what = "\(member): \(name): \(message)"
            if name == "org.freedesktop.DBus.Error.ServiceUnknown" || name == "org.freedesktop.DBus.Error.NameHasNoOwner"
                || name.hasPrefix("org.freedesktop.DBus.Error.Spawn.")
            {
                self = .noServer(what)
            } else if name == "org.freedesktop.DBus.Error.Timeout" || name == "org.freedesktop.DBus.Error.NoReply"
                || name == "org.freedesktop.DBus.Error.TimedOut"
            {
                self = .timedOut(what)
            } else {
                self = .server(what)
            }
        case .local, .badReply:
            self = .server("\(member): \(error)")
        }
    }
}

/// org.freedesktop.Notifications on one session bus connection.
struct NotificationServer: Sendable {
    static let busName = "org.freedesktop.Notifications"
    static let path = "/org/freedesktop/Notifications"
    static let interface = "org.freedesktop.Notifications"

    let bus: SessionBus
    /// Bounds every call, activation included.
    let timeoutMicros: UInt64

    private func call<T: Sendable>(
        _ member: String, arguments: @escaping @Sendable (inout MessageWriter) -> Void = { _ in },
        onBusThread: @escaping @Sendable (T) -> Void = { _ in },
        decode: @escaping @Sendable (MessageReader) throws(DBusCallError) -> T
    ) async throws(DesktopError) -> T {
        let result: Result<T, DesktopError> = await withCheckedContinuation { continuation in
            bus.call(
                destination: NotificationServer.busName, path: NotificationServer.path, interface: NotificationServer.interface,
                member: member, timeoutMicros: timeoutMicros, arguments: arguments
            ) { reply in
                switch reply {
                case .success(let reader):
                    do throws(DBusCallError) {
                        let value = try decode(reader)
                        onBusThread(value)
                        continuation.resume(returning: .success(value))
                    } catch {
                        continuation.resume(returning: .failure(DesktopError(error, member: member)))
                    }
                case .failure(let error):
                    continuation.resume(returning: .failure(DesktopError(error, member: member)))
                }
            }
        }
        return try result.get()
    }

    /// `Notify`; returns the server's id. `onDelivered` runs on the bus thread before any
    /// later signal is read, so that a click right after the reply finds the notification;
    /// it is given the id and the unique name of the connection that answered.
    func notify(_ a: NotifyArguments, onDelivered: @escaping @Sendable (_ id: UInt32, _ server: String?) -> Void) async throws(DesktopError) -> UInt32
    {
        try await call(
            "Notify",
            arguments: { w in
                w.string(a.appName)
                w.uint32(a.replacesID)
                w.string(a.appIcon)
                w.string(a.summary)
                w.string(a.body)
                w.stringArray(a.actions)
                w.open("a", "{sv}")
                for hint in a.hints {
                    w.open("e", "sv")
                    w.string(hint.name)
                    switch hint.value {
                    case .string(let s): w.open("v", "s"); w.string(s)
                    case .byte(let b): w.open("v", "y"); w.byte(b)
                    case .bool(let b): w.open("v", "b"); w.bool(b)
                    }
                    w.close()
                    w.close()
                }
                w.close()
                w.int32(a.expireTimeout)
            }, onBusThread: { (delivered: (id: UInt32, server: String?)) in onDelivered(delivered.id, delivered.server) }
        ) {
            r throws(DBusCallError) in (id: try r.uint32(), server: r.sender)
        }.id
    }

    /// `CloseNotification(id)`.
    func close(_ id: UInt32) async throws(DesktopError) {
        try await call("CloseNotification", arguments: { w in w.uint32(id) }) { _ throws(DBusCallError) in () }
    }

    /// `GetServerInformation` and `GetCapabilities`.
    func information() async throws(DesktopError) -> NotificationServerInfo {
        let info: [String] = try await call("GetServerInformation") { r throws(DBusCallError) in
            [try r.string(), try r.string(), try r.string(), try r.string()]
        }
        let capabilities: [String] = try await call("GetCapabilities") { r throws(DBusCallError) in try r.stringArray() }
        return NotificationServerInfo(name: info[0], vendor: info[1], version: info[2], specVersion: info[3], capabilities: capabilities)
    }
}
