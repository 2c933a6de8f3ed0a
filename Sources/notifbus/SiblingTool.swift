// Subcommands that live in executables of their own beside `notifbus` (the bridges, which link
// sd-bus or cnats): `notifbus desktop ...` replaces this process with `notifbus-desktop ...`.
// The broker binary links nothing for them; it only finds and execs them.
import Glibc

enum SiblingTool {
    /// Subcommand name, the executable that implements it, and its one-line summary.
    static let tools: [(command: String, executable: String, summary: String)] = [
        ("desktop", "notifbus-desktop", "be the delegate of the desktop's notification server (D-Bus)"),
        ("bridge", "notifbus-bridge", "bridge the bus to a remote engine (bridge nats ...)"),
    ]

    /// The folder of the running executable, from /proc/self/exe.
    static func ownFolder() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let path = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = path.lastIndex(of: "/") else { return nil }
        return String(path[..<slash])
    }

    /// Replaces this process with `executable` from the same folder, passing `arguments` on.
    /// Returns only on failure, with the exit status to use after the message was printed.
    static func exec(_ executable: String, command: String, arguments: [String]) -> Int32 {
        guard let folder = ownFolder() else {
            Output.error("notifbus \(command): cannot find the folder of this executable")
            return 1
        }
        let path = folder + "/" + executable
        guard access(path, X_OK) == 0 else {
            Output.error("notifbus \(command): \(path) is not installed (build or install the '\(executable)' target)")
            return 1
        }
        var argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) }
        argv.append(nil)
        execv(path, argv)
        let reason = String(cString: strerror(errno))
        Output.error("notifbus \(command): cannot run \(path): \(reason)")
        return 1
    }
}
