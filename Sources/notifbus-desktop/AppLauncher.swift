// Starts the app named by `--app-id` for a click kept for launch: through
// org.freedesktop.Application on the session bus when its desktop file says
// DBusActivatable=true (the bus daemon starts it from its service file), otherwise by
// running the desktop file's Exec line, detached, its output in the bridge's log. The
// command only ever comes from a desktop file in the XDG folders, read again at each start.
// It reports a failed start; whether the app then observes is the bridge's to check.
import CSdBus
import Glibc
import NotifBusClient
import NotifBusDesktop

final class AppLauncher: @unchecked Sendable {
    static let applicationInterface = "org.freedesktop.Application"

    let appID: String
    let bus: SessionBus
    /// Bounds the D-Bus call that activates the app (the start's own bound).
    let timeoutMicros: UInt64
    private let lock = Lock()
    /// Why the start in flight failed, once it did; taken by `takeFailure`.
    private var failure: String? = nil
    /// Counts starts, so that a late report of an earlier one is not taken for this one's.
    private var attempt = 0

    init(appID: String, bus: SessionBus, timeoutMicros: UInt64) {
        self.appID = appID
        self.bus = bus
        self.timeoutMicros = timeoutMicros
    }

    // MARK: The desktop file

    /// The app's desktop file: the first `ID.desktop` in `$XDG_DATA_HOME/applications`,
    /// then `$XDG_DATA_DIRS/*/applications` (a file in a subfolder counts with its folder
    /// names joined by `-`). A Hidden one hides the others: the app counts as removed.
    static func desktopEntry(_ id: String) -> Result<DesktopEntry, DesktopEntryError> {
        let env = { (name: String) in getenv(name).map { String(cString: $0) } }
        let folders = DesktopEntry.applicationFolders(dataHome: env("XDG_DATA_HOME"), dataDirs: env("XDG_DATA_DIRS"), home: env("HOME"))
        let locale = [env("LC_ALL"), env("LC_MESSAGES"), env("LANG")].compactMap { $0 }.first { !$0.isEmpty }
        for folder in folders {
            let candidates = DesktopEntry.relativePaths(for: id) { isFolder(folder + "/" + $0) }
            for relative in candidates {
                let path = folder + "/" + relative
                var st = stat()
                guard stat(path, &st) == 0 else { continue }
                guard st.st_mode & S_IFMT == S_IFREG else { return .failure(DesktopEntryError("\(path) is not a regular file")) }
                guard st.st_size <= DesktopEntry.maxBytes else {
                    return .failure(DesktopEntryError("\(path) is larger than \(DesktopEntry.maxBytes) bytes"))
                }
                guard let bytes = readFile(path) else { return .failure(DesktopEntryError("cannot read \(path): \(StateFolder.errorText())")) }
                guard let text = String(validating: bytes, as: UTF8.self) else {
                    return .failure(DesktopEntryError("\(path) is not UTF-8"))
                }
                do throws(DesktopEntryError) {
                    let entry = try DesktopEntry(parsing: text, id: id, path: path, locale: locale)
                    if entry.hidden { return .failure(DesktopEntryError("\(path) says Hidden=true: the app counts as removed")) }
                    return .success(entry)
                } catch {
                    return .failure(DesktopEntryError("\(path): \(error)"))
                }
            }
        }
        return .failure(DesktopEntryError("no \(id).desktop in \(folders.joined(separator: ", "))"))
    }

    static func isFolder(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR
    }

    static func readFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while out.count <= DesktopEntry.maxBytes {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { return out }
            out += chunk[0..<n]
        }
        return nil
    }

    // MARK: Starting

    /// Starts the app for `response`; returns how, for the log, or nil when it failed at
    /// once (`takeFailure` says why). A later failure (a D-Bus error, the program exiting
    /// with an error) is reported through `takeFailure` too.
    func start(for response: NotificationResponse, activationToken: String?) -> String? {
        let number = lock.withLock { () -> Int in
            attempt += 1
            failure = nil
            return attempt
        }
        let entry: DesktopEntry
        switch AppLauncher.desktopEntry(appID) {
        case .success(let found): entry = found
        case .failure(let error):
            report(number, error.description)
            return nil
        }
        if entry.dbusActivatable {
            return activate(entry, for: response, token: activationToken, attempt: number)
        }
        return run(entry, token: activationToken, attempt: number)
    }

    /// Why the start in flight failed, if it did.
    func takeFailure() -> String? {
        lock.withLock {
            defer { failure = nil }
            return failure
        }
    }

    private func report(_ number: Int, _ why: String) {
        lock.withLock { if number == attempt && failure == nil { failure = why } }
    }

    /// `Activate` for the default action, `ActivateAction(ACTION, [<notification
    /// identifier>], …)` for an action whose identifier is an action name GApplication
    /// accepts (as the GTK portal does for `app.` actions); the bus starts the app.
    private func activate(_ entry: DesktopEntry, for response: NotificationResponse, token: String?, attempt number: Int) -> String? {
        guard DesktopEntry.isBusName(appID) else {
            report(number, "\(entry.path) says DBusActivatable=true, but \(appID) is not a D-Bus name")
            return nil
        }
        let path = DesktopEntry.objectPath(forBusName: appID)
        let action = AppLauncher.activationAction(for: response)
        let platformData = token.map { ["desktop-startup-id": $0, "activation-token": $0] } ?? [:]
        let identifier = response.notification.identifier
        bus.call(
            destination: appID, path: path, interface: AppLauncher.applicationInterface,
            member: action == nil ? "Activate" : "ActivateAction", timeoutMicros: timeoutMicros,
            arguments: { w in
                if let action {
                    w.string(action)
                    w.open("a", "v")
                    w.open("v", "s")
                    w.string(identifier)
                    w.close()
                    w.close()
                }
                w.open("a", "{sv}")
                for (key, value) in platformData.sorted(by: { $0.key < $1.key }) {
                    w.open("e", "sv")
                    w.string(key)
                    w.open("v", "s")
                    w.string(value)
                    w.close()
                    w.close()
                }
                w.close()
            }
        ) { [self] reply in
            if case .failure(let error) = reply { report(number, "D-Bus activation of \(appID) failed: \(error)") }
        }
        let call = action.map { "ActivateAction(\"\($0)\", [\"\(identifier)\"])" } ?? "Activate()"
        return "D-Bus activation: \(appID) \(path) \(AppLauncher.applicationInterface).\(call)"
    }

    /// The action name the app receives, or nil for `Activate`.
    static func activationAction(for response: NotificationResponse) -> String? {
        let id = response.actionIdentifier
        guard id != NotificationResponse.defaultActionIdentifier, isActionName(id) else { return nil }
        return id
    }

    /// GApplication's rule for action names: letters, digits, `-` and `.`, not empty.
    static func isActionName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x2D || $0 == 0x2E }
    }

    /// Runs the Exec line: no shell, stdin from /dev/null, stdout and stderr into the
    /// bridge's stderr, a session of its own (the bridge's signals and terminal are not its),
    /// no descriptor of the bridge's but those three. The exit status is watched on a thread.
    private func run(_ entry: DesktopEntry, token: String?, attempt number: Int) -> String? {
        guard !entry.terminal else {
            report(number, "\(entry.path) says Terminal=true, and the bridge has no terminal to run it in")
            return nil
        }
        guard let exec = entry.exec else {
            report(number, "\(entry.path) has no Exec line and is not DBusActivatable")
            return nil
        }
        let command: ExecCommand
        do throws(DesktopEntryError) {
            command = try ExecCommand(exec: exec, name: entry.name, icon: entry.icon, location: entry.path)
        } catch {
            report(number, "\(entry.path): \(error)")
            return nil
        }
        if let tryExec = entry.tryExec, !AppLauncher.isInstalled(tryExec) {
            report(number, "\(entry.path): TryExec \(tryExec) is not installed")
            return nil
        }
        var environment = AppLauncher.environment(without: ["DESKTOP_STARTUP_ID", "XDG_ACTIVATION_TOKEN"])
        if let token { environment += ["DESKTOP_STARTUP_ID=\(token)", "XDG_ACTIVATION_TOKEN=\(token)"] }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, 2, 1)
        posix_spawn_file_actions_addclosefrom_np(&actions, 3)
        if let folder = entry.workingDirectory { posix_spawn_file_actions_addchdir_np(&actions, folder) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigfillset(&defaults)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | NOTIFBUS_POSIX_SPAWN_SETSID))
        let argv: [UnsafeMutablePointer<CChar>?] = command.arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer { for p in argv + envp { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, command.program, &actions, &attributes, argv, envp)
        guard rc == 0 else {
            let why = rc == ENOENT ? "not found" : String(cString: strerror(rc))
            report(number, "Exec of \(entry.path): \(command.program): \(why)")
            return nil
        }
        let child = pid
        _ = DetachedThread.start { [self] in
            var status: Int32 = 0
            while waitpid(child, &status, 0) < 0 && errno == EINTR {}
            // WIFEXITED / WEXITSTATUS / WTERMSIG, spelled out: the macros do not import.
            let signal = status & 0x7F
            let how = signal == 0 ? "exited with status \((status >> 8) & 0xFF)" : "was killed by signal \(signal)"
            log("\(appID) (pid \(child)) \(how)")
            if signal != 0 || (status >> 8) & 0xFF != 0 { report(number, "\(command.program) (pid \(child)) \(how)") }
        }
        return "Exec \(command.arguments.map { $0.contains(" ") ? "\"\($0)\"" : $0 }.joined(separator: " ")) (pid \(pid))"
    }

    /// TryExec: an absolute path that is executable, or a name found so in `$PATH`.
    static func isInstalled(_ program: String) -> Bool {
        if program.hasPrefix("/") { return access(program, X_OK) == 0 }
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").contains { access("\($0)/\(program)", X_OK) == 0 }
    }

    /// The bridge's environment, less the variables named.
    static func environment(without names: [String]) -> [String] {
        var out: [String] = []
        var p = environ
        while let entry = p.pointee {
            let text = String(cString: entry)
            if !names.contains(where: { text.hasPrefix($0 + "=") }) { out.append(text) }
            p += 1
        }
        return out
    }
}
