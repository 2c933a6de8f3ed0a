// One sd-bus connection to the session bus, owned by one thread that runs its poll loop
// (sd_bus_get_fd/get_events/get_timeout/process). Other threads hand it work through a queue
// and an eventfd; replies come back through callbacks on that thread. Nothing else may
// touch the sd_bus pointer: sd-bus is not thread-safe.
import CSdBus
import Glibc
import NotifBusClient

/// Why a D-Bus call failed.
enum DBusCallError: Error, Sendable, CustomStringConvertible {
    /// The call got a D-Bus error reply (sd-bus synthesizes `org.freedesktop.DBus.Error.Timeout`
    /// when the bound passes).
    case reply(name: String, message: String)
    /// sd-bus refused to build or send the message (negative errno).
    case local(String, errno: Int32)
    /// The reply had other types than the method declares.
    case badReply(String)

    var description: String {
        switch self {
        case .reply(let name, let message): return "\(name): \(message)"
        case .local(let what, let e): return "\(what): \(String(cString: strerror(e)))"
        case .badReply(let what): return "unexpected reply: \(what)"
        }
    }
}

/// Appends arguments to an sd-bus message with the typed calls; the first failure sticks.
struct MessageWriter {
    let message: OpaquePointer
    private(set) var failure: Int32 = 0

    init(_ message: OpaquePointer) { self.message = message }

    private mutating func check(_ rc: Int32) { if rc < 0 && failure == 0 { failure = rc } }

    mutating func string(_ s: String) { check(s.withCString { sd_bus_message_append_basic(message, CChar(UInt8(ascii: "s")), $0) }) }
    mutating func uint32(_ v: UInt32) { var v = v; check(sd_bus_message_append_basic(message, CChar(UInt8(ascii: "u")), &v)) }
    mutating func int32(_ v: Int32) { var v = v; check(sd_bus_message_append_basic(message, CChar(UInt8(ascii: "i")), &v)) }
    mutating func byte(_ v: UInt8) { var v = v; check(sd_bus_message_append_basic(message, CChar(UInt8(ascii: "y")), &v)) }
    /// D-Bus booleans are 32-bit on the wire.
    mutating func bool(_ v: Bool) { var v: Int32 = v ? 1 : 0; check(sd_bus_message_append_basic(message, CChar(UInt8(ascii: "b")), &v)) }

    mutating func open(_ type: Character, _ contents: String) {
        check(contents.withCString { sd_bus_message_open_container(message, CChar(type.asciiValue!), $0) })
    }

    mutating func close() { check(sd_bus_message_close_container(message)) }

    mutating func stringArray(_ items: [String]) {
        open("a", "s")
        for item in items { string(item) }
        close()
    }
}

/// Reads a message received on the bus thread; valid only inside the callback.
struct MessageReader {
    let message: OpaquePointer

    func string() throws(DBusCallError) -> String {
        var p: UnsafePointer<CChar>? = nil
        let rc = sd_bus_message_read_basic(message, CChar(UInt8(ascii: "s")), &p)
        guard rc > 0, let p else { throw .badReply("expected a string") }
        return String(cString: p)
    }

    func uint32() throws(DBusCallError) -> UInt32 {
        var v: UInt32 = 0
        guard sd_bus_message_read_basic(message, CChar(UInt8(ascii: "u")), &v) > 0 else { throw .badReply("expected a uint32") }
        return v
    }

    func stringArray() throws(DBusCallError) -> [String] {
        guard sd_bus_message_enter_container(message, CChar(UInt8(ascii: "a")), "s") > 0 else {
            throw .badReply("expected an array of strings")
        }
        var out: [String] = []
        while true {
            var p: UnsafePointer<CChar>? = nil
            let rc = sd_bus_message_read_basic(message, CChar(UInt8(ascii: "s")), &p)
            if rc == 0 { break }
            guard rc > 0, let p else { throw .badReply("expected an array of strings") }
            out.append(String(cString: p))
        }
        _ = sd_bus_message_exit_container(message)
        return out
    }

    /// The member (method or signal name).
    var member: String? { sd_bus_message_get_member(message).map { String(cString: $0) } }

    /// The sending connection's unique name.
    var sender: String? { sd_bus_message_get_sender(message).map { String(cString: $0) } }

    /// The connection it is addressed to; nil for a broadcast signal.
    var destination: String? { sd_bus_message_get_destination(message).map { String(cString: $0) } }

    /// Whether it is a signal (and not a call, a reply or an error).
    var isSignal: Bool {
        var type: UInt8 = 0
        return sd_bus_message_get_type(message, &type) >= 0 && type == UInt8(SD_BUS_MESSAGE_SIGNAL)
    }

    /// The interface it names.
    var interface: String? { sd_bus_message_get_interface(message).map { String(cString: $0) } }
}

/// The owner of one sd-bus connection and of the thread that drives it.
final class SessionBus: @unchecked Sendable {
    /// A callback run on the bus thread with the message it received (nil: none came).
    final class Callback {
        let body: (MessageReader?) -> Void
        init(_ body: @escaping (MessageReader?) -> Void) { self.body = body }
    }

    /// The bus daemon's own name: the sender of the signals the bus itself emits.
    static let busName = "org.freedesktop.DBus"

    /// Messages handled before the queued work gets its turn again.
    static let messagesPerTurn = 64

    private let bus: OpaquePointer
    private let wakeFD: Int32
    /// This connection's unique name (`:1.42`), read when it connected.
    private(set) var uniqueName: String? = nil
    private let lock = Lock()
    private var queue: [() -> Void] = []
    /// Matches live as long as the connection; their callbacks are kept here.
    private var matches: [Callback] = []
    /// Called once, on the bus thread, when the connection to the session bus fails.
    let onLost: @Sendable (String) -> Void

    private init(bus: OpaquePointer, wakeFD: Int32, onLost: @escaping @Sendable (String) -> Void) {
        self.bus = bus
        self.wakeFD = wakeFD
        self.onLost = onLost
    }

    /// Connects to `address` as a bus client. `callTimeoutMicros` also bounds the calls sd-bus
    /// makes for itself (Hello, AddMatch).
    static func connect(
        address: String, callTimeoutMicros: UInt64,
        onLost: @escaping @Sendable (String) -> Void
    ) throws(DBusCallError) -> SessionBus {
        let bus = try open(address: address, monitor: false, callTimeoutMicros: callTimeoutMicros)
        let connection = try SessionBus(owning: bus, onLost: onLost)
        var name: UnsafePointer<CChar>? = nil
        if sd_bus_get_unique_name(bus, &name) >= 0, let name { connection.uniqueName = String(cString: name) }
        return connection
    }

    /// Connects to `address` as a monitor (org.freedesktop.DBus.Monitoring.BecomeMonitor):
    /// the connection then receives every message that `rules` match, whoever it is
    /// addressed to, and can send nothing. `handler` runs on its own thread once `start()`
    /// is called. The bus refuses monitors to other users; the error says so.
    static func monitor(
        address: String, rules: [String], callTimeoutMicros: UInt64,
        onLost: @escaping @Sendable (String) -> Void, handler: @escaping (MessageReader) -> Void
    ) throws(DBusCallError) -> SessionBus {
        let bus = try open(address: address, monitor: true, callTimeoutMicros: callTimeoutMicros)
        var call: OpaquePointer? = nil
        var rc = sd_bus_message_new_method_call(
            bus, &call, busName, "/org/freedesktop/DBus", "org.freedesktop.DBus.Monitoring", "BecomeMonitor")
        guard rc >= 0, let call else {
            sd_bus_flush_close_unref(bus)
            throw .local("building BecomeMonitor", errno: -rc)
        }
        defer { sd_bus_message_unref(call) }
        var writer = MessageWriter(call)
        writer.stringArray(rules)
        writer.uint32(0)
        var error = notifbus_sd_bus_error_null()
        defer { sd_bus_error_free(&error) }
        rc = writer.failure < 0 ? writer.failure : sd_bus_call(bus, call, callTimeoutMicros, &error, nil)
        guard rc >= 0 else {
            let name = error.name.map { String(cString: $0) }
            let message = error.message.map { String(cString: $0) } ?? String(cString: strerror(-rc))
            sd_bus_flush_close_unref(bus)
            if let name { throw .reply(name: name, message: message) }
            throw .local("BecomeMonitor", errno: -rc)
        }
        let monitor = try SessionBus(owning: bus, onLost: onLost)
        let callback = Callback { if let m = $0 { handler(m) } }
        monitor.matches.append(callback)
        rc = sd_bus_add_filter(
            bus, nil,
            { m, userdata, _ in
                guard let m, let userdata else { return 0 }
                Unmanaged<Callback>.fromOpaque(userdata).takeUnretainedValue().body(MessageReader(message: m))
                return 0
            }, Unmanaged.passUnretained(callback).toOpaque())
        guard rc >= 0 else { throw .local("adding the monitor's filter", errno: -rc) }
        return monitor
    }

    /// A started connection to `address`: a bus client, in monitor mode or not.
    private static func open(address: String, monitor: Bool, callTimeoutMicros: UInt64) throws(DBusCallError) -> OpaquePointer {
        var bus: OpaquePointer? = nil
        var rc = sd_bus_new(&bus)
        guard rc >= 0, let bus else { throw .local("sd_bus_new", errno: -rc) }
        rc = address.withCString { sd_bus_set_address(bus, $0) }
        if rc >= 0 { rc = sd_bus_set_bus_client(bus, 1) }
        if rc >= 0 && monitor { rc = sd_bus_set_monitor(bus, 1) }
        if rc >= 0 { rc = sd_bus_set_method_call_timeout(bus, callTimeoutMicros) }
        if rc >= 0 { rc = sd_bus_start(bus) }
        guard rc >= 0 else {
            sd_bus_unref(bus)
            throw .local("connecting \(monitor ? "a monitor " : "")to the session bus at \(address)", errno: -rc)
        }
        return bus
    }

    /// Takes over `bus` with an eventfd to wake its thread; closes `bus` when that fails.
    private convenience init(owning bus: OpaquePointer, onLost: @escaping @Sendable (String) -> Void) throws(DBusCallError) {
        let wake = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
        guard wake >= 0 else {
            let e = errno
            sd_bus_flush_close_unref(bus)
            throw .local("eventfd", errno: e)
        }
        self.init(bus: bus, wakeFD: wake, onLost: onLost)
    }

    /// Adds a match rule. Call before `start()`, from the thread that connected.
    func addMatch(_ rule: String, _ handler: @escaping (MessageReader) -> Void) throws(DBusCallError) {
        let callback = Callback { if let m = $0 { handler(m) } }
        matches.append(callback)
        let rc = rule.withCString {
            sd_bus_add_match(
                bus, nil, $0,
                { m, userdata, _ in
                    guard let m, let userdata else { return 0 }
                    Unmanaged<Callback>.fromOpaque(userdata).takeUnretainedValue().body(MessageReader(message: m))
                    return 0
                }, Unmanaged.passUnretained(callback).toOpaque())
        }
        guard rc >= 0 else { throw .local("adding the match \(rule)", errno: -rc) }
    }

    /// Starts the bus thread; from now on only `perform` reaches the connection.
    func start() -> Bool {
        DetachedThread.start { [self] in loop() }
    }

    /// Runs `work` on the bus thread, with the connection.
    func perform(_ work: @escaping @Sendable (OpaquePointer) -> Void) {
        lock.withLock { queue.append({ [bus] in work(bus) }) }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Calls `member` and hands the reply (or the error) to `done` on the bus thread. The
    /// call fails with `org.freedesktop.DBus.Error.Timeout` after `timeoutMicros`. Without
    /// `autoStart`, the bus does not activate a service for it.
    func call(
        destination: String, path: String, interface: String, member: String, timeoutMicros: UInt64,
        autoStart: Bool = true, arguments: @escaping @Sendable (inout MessageWriter) -> Void,
        done: @escaping @Sendable (Result<MessageReader, DBusCallError>) -> Void
    ) {
        perform { bus in
            let box = Callback { reader in
                guard let reader else {
                    return done(.failure(.local("waiting for the reply to \(member)", errno: EPROTO)))
                }
                if let error = sd_bus_message_get_error(reader.message) {
                    let name = error.pointee.name.map { String(cString: $0) } ?? "unknown"
                    let message = error.pointee.message.map { String(cString: $0) } ?? ""
                    done(.failure(.reply(name: name, message: message)))
                } else {
                    done(.success(reader))
                }
            }
            var m: OpaquePointer? = nil
            var rc = sd_bus_message_new_method_call(bus, &m, destination, path, interface, member)
            guard rc >= 0, let m else {
                done(.failure(.local("building \(member)", errno: -rc)))
                return
            }
            defer { sd_bus_message_unref(m) }
            if !autoStart { _ = sd_bus_message_set_auto_start(m, 0) }
            var writer = MessageWriter(m)
            arguments(&writer)
            guard writer.failure == 0 else {
                done(.failure(.local("appending the arguments of \(member)", errno: -writer.failure)))
                return
            }
            let context = Unmanaged.passRetained(box).toOpaque()
            rc = sd_bus_call_async(
                bus, nil, m,
                { reply, userdata, _ in
                    guard let userdata else { return 0 }
                    let box = Unmanaged<Callback>.fromOpaque(userdata).takeRetainedValue()
                    // sd-bus always passes a reply (a synthesized error on timeout or disconnect);
                    // should it not, the caller still gets exactly one answer.
                    box.body(reply.map { MessageReader(message: $0) })
                    return 0
                }, context, timeoutMicros)
            if rc < 0 {
                Unmanaged<Callback>.fromOpaque(context).release()
                done(.failure(.local("sending \(member)", errno: -rc)))
            }
        }
    }

    private func loop() {
        let fd = sd_bus_get_fd(bus)
        guard fd >= 0 else {
            onLost("sd_bus_get_fd: \(String(cString: strerror(-fd)))")
            return
        }
        while true {
            // What sd-bus can do without waiting (replies, signals, queued writes), but at most
            // a turn's worth: any process on the bus may send matching signals without pause,
            // and that must not keep the queued calls from being sent.
            var more = false
            for _ in 0..<SessionBus.messagesPerTurn {
                let rc = sd_bus_process(bus, nil)
                if rc < 0 {
                    onLost("the session bus connection failed: \(String(cString: strerror(-rc)))")
                    return
                }
                more = rc > 0
                if !more { break }
            }
            let work = lock.withLock { () -> [() -> Void] in
                defer { queue.removeAll() }
                return queue
            }
            if !work.isEmpty || more {
                for item in work { item() }
                continue
            }
            let events = sd_bus_get_events(bus)
            if events < 0 {
                onLost("the session bus connection closed: \(String(cString: strerror(-events)))")
                return
            }
            var deadline: UInt64 = 0
            var timeoutMs: Int32 = -1
            if sd_bus_get_timeout(bus, &deadline) > 0 && deadline != UInt64.max {
                var now = timespec()
                clock_gettime(CLOCK_MONOTONIC, &now)
                let nowMicros = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
                timeoutMs = deadline <= nowMicros ? 0 : Int32(min((deadline - nowMicros + 999) / 1000, UInt64(Int32.max)))
            }
            var fds = [pollfd(fd: fd, events: Int16(events), revents: 0), pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 2, timeoutMs)
            if n < 0 && errno != EINTR {
                onLost("poll: \(String(cString: strerror(errno)))")
                return
            }
            if fds[1].revents & Int16(POLLIN) != 0 {
                var value: UInt64 = 0
                _ = read(wakeFD, &value, 8)
            }
        }
    }
}
