// `notifbus broker`: parses the flags of protocol §5 and runs the broker until SIGINT or
// SIGTERM. Flag mistakes exit 2; a socket or state folder that cannot be used exits 1.
// It only reads flags: what signals do is the server's to carry out.
import Glibc
import NotifBusClient
import NotifBusProtocol
import NotifBusTransport

enum BrokerCommand {
    static let serverName = "notifbus/0.1.0"

    static let command = Subcommand(
        name: "broker",
        summary: "run the broker",
        usage: """
            Usage: notifbus broker [--socket PATH] [--hop-timeout DUR] [--call-timeout DUR]
                                   [--max-frame BYTES] [--max-queue N] [--max-clients N]
                                   [--state-dir DIR] [--socket-mode OCTAL] [--allow-uid UID]...
                                   [--max-queue-bytes BYTES] [--max-output BYTES]
                                   [--max-buffered-bytes BYTES] [--max-queue-per-client N]
                                   [--once-keys N] [--once-age DUR] [--once-bytes BYTES]

            Runs the broker on a Unix socket until SIGINT or SIGTERM.

              --socket PATH        socket to listen on (see 'notifbus --help' for the default)
              --hop-timeout DUR    how long one observer may take to answer (default 30s)
              --call-timeout DUR   how long a method handler may take to return (default 30s)
              --max-frame BYTES    largest frame read from a client (default 1048576)
              --max-queue N        posts that may wait behind the running one (default 10000)
              --max-queue-bytes B  payload bytes those posts may hold (default 67108864)
              --max-queue-per-client N
                                   posts of one connection that may wait (default an
                                   eighth of --max-queue, at least 1); its waiting posts
                                   may also hold an eighth of --max-queue-bytes at most
              --max-clients N      connections served at once (default 1024)
              --state-dir DIR      keep slots and categories durably in DIR (mode 0700);
                                   one broker per folder (it holds DIR/broker.lock)
              --socket-mode OCTAL  permission bits of the socket file (default 0600)
              --allow-uid UID      also accept clients of this uid (repeatable)
              --max-output BYTES   output queued for a client that does not read before it
                                   is cut off (default 16777216)
              --max-buffered-bytes B
                                   input and output buffered across all clients; beyond
                                   it the biggest holders are cut off (default 268435456,
                                   or --max-frame when that is larger; at least --max-frame)
              --once-keys N        idempotency keys ('once') remembered at most, oldest
                                   forgotten first (default 100000)
              --once-age DUR       how long a key's outcome is remembered, in wall-clock
                                   time, across restarts with --state-dir (default 24h;
                                   hours are written with h)
              --once-bytes BYTES   bytes of keys and outcomes remembered (default 67108864)

            DUR is a number followed by ms, s or m (250ms, 2s, 1m), or plain seconds (1.5).

            Signals: SIGINT and SIGTERM answer everything pending with shutting_down and
            stop the broker within 2 s. SIGUSR1 writes one status line to stderr. SIGHUP,
            SIGUSR2 and SIGALRM are logged and otherwise ignored: the broker keeps running
            (its settings come only from the command line, so there is nothing to reload).
            """,
        valueFlags: [
            "hop-timeout", "call-timeout", "max-frame", "max-queue", "max-clients", "state-dir",
            "socket-mode", "allow-uid", "max-output", "max-queue-bytes", "max-buffered-bytes",
            "max-queue-per-client", "once-keys", "once-age", "once-bytes",
        ],
        switchFlags: [],
        run: { args in try run(args) },
        runOnMainThread: { args in try run(args) }
    )

    static func run(_ args: Arguments) throws -> Int32 {
        guard args.positionals.isEmpty else { throw UsageError("unexpected argument '\(args.positionals[0])'") }
        var options = ServerOptions(socketPath: SocketPath.resolve(explicit: args.value("socket")))
        options.core.serverName = serverName
        options.core.brokerUID = getuid()
        if let ms = try args.duration("hop-timeout") { options.core.hopTimeoutMs = ms }
        if let ms = try args.duration("call-timeout") { options.core.callTimeoutMs = ms }
        if let n = try args.integer("max-frame", min: 1, max: Int64(UInt32.max)) { options.core.maxFrame = Int(n) }
        if let n = try args.integer("max-queue", min: 0, max: Int64(Int32.max)) { options.core.maxQueue = Int(n) }
        if let n = try args.integer("max-clients", min: 1, max: Int64(Int32.max)) { options.core.maxClients = Int(n) }
        if let n = try args.integer("max-output", min: 1, max: Int64(Int32.max)) { options.maxOutputBytes = Int(n) }
        if let n = try args.integer("max-buffered-bytes", min: 1, max: Int64.max / 2) {
            // Below one frame, a client sending a frame the broker allows would be cut off.
            guard n >= options.core.maxFrame else {
                throw UsageError("--max-buffered-bytes must be at least --max-frame (\(options.core.maxFrame)), not \(n)")
            }
            options.maxBufferedBytes = Int(n)
        } else {
            options.maxBufferedBytes = max(options.maxBufferedBytes, options.core.maxFrame)
        }
        if let n = try args.integer("max-queue-bytes", min: 0, max: Int64.max / 2) { options.core.maxQueueBytes = Int(n) }
        if let n = try args.integer("max-queue-per-client", min: 1, max: Int64(Int32.max)) { options.core.maxQueuePerClient = Int(n) }
        if let n = try args.integer("once-keys", min: 0, max: Int64(Int32.max)) { options.core.once.maxKeys = Int(n) }
        if let ms = try args.duration("once-age", hours: true) {
            // A hundred years: an age beyond any clock the broker will see.
            guard ms <= 3_155_760_000_000 else { throw UsageError("--once-age must be at most 876000h, not \(ms) ms") }
            options.core.once.maxAgeMs = ms
        }
        if let n = try args.integer("once-bytes", min: 0, max: Int64.max / 2) { options.core.once.maxBytes = Int(n) }
        if let dir = args.value("state-dir") {
            guard !dir.isEmpty else { throw UsageError("--state-dir needs a folder") }
            options.stateDirectory = dir
        }
        if let text = args.value("socket-mode") {
            guard (1...4).contains(text.count), text.allSatisfy({ ("0"..."7").contains($0) }), let mode = mode_t(text, radix: 8) else {
                throw UsageError("--socket-mode needs octal permission bits such as 0660, not '\(text)'")
            }
            options.socketMode = mode
        }
        for text in args.all("allow-uid") {
            guard let uid = UInt32(text) else { throw UsageError("--allow-uid needs a numeric uid, not '\(text)'") }
            options.core.allowedUIDs.insert(uid)
        }
        if let dir = options.stateDirectory {
            // Before the journal is read: a second broker must not even compact it.
            do {
                _ = try StateFolderLock.claim(dir, name: "broker", for: "broker")
            } catch {
                throw CommandError(error.description)
            }
        }
        let server: BrokerServer
        do {
            server = try BrokerServer(options: options)
        } catch {
            throw CommandError("\(error)")
        }
        return server.run()
    }
}
