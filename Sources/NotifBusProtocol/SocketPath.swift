// Where the broker's socket lives (§1): the explicit path, else NOTIFBUS_SOCKET, else
// $XDG_RUNTIME_DIR/notifbus.sock, else /tmp/notifbus-$UID/notifbus.sock. Pure lookup:
// it reads the environment and creates nothing.
import Glibc

public enum SocketPath {
    /// `sun_path` holds 108 bytes including the terminating NUL.
    public static let maxBytes = 107

    /// The folder the broker creates (mode 0700) when no other choice applies.
    public static func defaultFolder(uid: UInt32 = getuid()) -> String {
        "/tmp/notifbus-\(uid)"
    }

    /// Resolves the socket path, first that applies.
    public static func resolve(explicit: String? = nil) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let env = environment("NOTIFBUS_SOCKET"), !env.isEmpty { return env }
        if let runtime = environment("XDG_RUNTIME_DIR"), !runtime.isEmpty { return runtime + "/notifbus.sock" }
        return defaultFolder() + "/notifbus.sock"
    }

    /// Whether `path` is the last-resort default, whose folder the broker creates.
    public static func isDefault(_ path: String) -> Bool {
        path == defaultFolder() + "/notifbus.sock"
    }

    static func environment(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        return String(cString: value)
    }
}
