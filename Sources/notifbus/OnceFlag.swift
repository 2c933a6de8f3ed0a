// `--once KEY` on the request subcommands that change the bus (post, put, take,
// categories set): the request carries an idempotency key (protocol §3.8), so that running
// the same command again, after a failure or a timeout, applies it at most once.
import NotifBusClient

extension CLI {
    /// The usage line the keyed subcommands share.
    static let onceUsage = """
        --once KEY makes the request idempotent: the same command with the same KEY, run
        again while the broker keeps the key (--once-age), prints the first outcome and
        changes nothing (a note on stderr says so); with other arguments it fails
        once_conflict.
        """

    /// Tells on stderr that the answer repeats the first outcome of `--once`'s key.
    static func noteRepeat(_ isRepeat: Bool, _ args: Arguments) {
        guard isRepeat, let key = args.value("once") else { return }
        Output.error("notifbus: a repeat: the first outcome of --once \(key), applied before; nothing changed now")
    }
}
