// How the CLI words a failure to reach the broker: the broker's own refusal (`forbidden`,
// `too_many_clients`) with what to do about it, a socket file no broker listens on, else
// the client's message. Words only.
import Glibc
import NotifBusClient

enum ConnectFailure {
    /// One line for `error`, naming the fix where there is one.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? NotifBusError else { return "\(error)" }
        if case .broker(let refusal) = error, refusal.code == ErrorCode.forbidden.rawValue {
            return "\(refusal.code): \(refusal.message) (the broker's owner can admit it: notifbus broker --allow-uid \(getuid()))"
        }
        if case .broker(let refusal) = error, refusal.code == ErrorCode.tooManyClients.rawValue {
            return "\(refusal.code): \(refusal.message) (try again once a client has left, or start the broker with a larger --max-clients)"
        }
        // The file of a broker that did not remove it (killed, or its machine restarted).
        if case .connectFailed(let why) = error, why.hasSuffix(String(cString: strerror(ECONNREFUSED))) {
            return "\(error.description) (no broker is running on this socket: the file is left from one that stopped; "
                + "start one with 'notifbus broker')"
        }
        return error.description
    }
}
