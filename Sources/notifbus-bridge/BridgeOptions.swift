// The command line of `notifbus bridge nats`: flags, their bounds and the help text.
// It only parses; it opens nothing.

import NotifBusNATS

/// A usage mistake: one line on stderr, exit status 2.
struct BridgeUsageError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// The bridge's settings.
struct BridgeOptions {
    var urls: [String] = []
    var device = ""
    var socket: String? = nil
    var stream: String? = nil
    var createStream = false
    var replicas = 1
    var exports: [String] = []
    /// JetStream's AckWait for the durable consumer the bridge creates.
    var ackWaitMs: Int64 = 30_000
    /// Messages fetched, and in flight to the broker, at once.
    var batch = 256
    /// Messages at the broker at once: the pipeline depth.
    var inflight = 128
    var layout = NATSLayout.perDevice
    /// Limits of the shared inbound stream the bridge creates (Protocol/NATS.md §2): messages
    /// kept per subject (a publish past it is refused), and their age.
    var maxPerSubject = 1_000
    var maxAgeMs: Int64 = 7 * 86_400_000
    /// How long one fetch waits for messages at JetStream before it asks again.
    var fetchWaitMs: Int64 = 1000

    var inboundStream: String { stream ?? (layout == .shared ? "NOTIFBUS" : "NOTIFBUS_" + device) }
    var outboundStream: String { inboundStream + "_OUT" }
    var durable: String { "notifbus-bridge-" + device }
    /// The consumer's MaxAckPending: the bridge holds at most four batches (two being
    /// applied, two being published), and a restarted one gets its predecessor's again.
    var maxAckPending: Int { 6 * batch }

    static let help = """
        usage: notifbus bridge nats --url nats://HOST:PORT[,...] --device ID [options]

        Bridges this device's broker to a NATS JetStream cluster (Protocol/NATS.md):
          inbound  notifbus.<device>.post.<event>, notifbus.<device>.put.<slot>   (stream, acked once applied;
                   notifbus.<device>.in.post.<event> and .in.put.<slot> in the shared layout)
          invoke   notifbus.<device>.invoke.<channel>.<method>                    (request/reply)
          outbound notifbus.<device>.result, notifbus.<device>.event.<name>, notifbus.<device>.dead

        options:
          --url URLS           NATS servers, comma-separated (repeatable)
          --device ID          this device's subject token: 1-64 of A-Z a-z 0-9 - _
          --socket PATH        the broker's socket (default: as the notifbus client resolves it)
          --layout L           per-device (default): two streams of the device's own; shared: one
                               inbound stream for all devices, read through a filtered consumer
          --stream NAME        inbound stream (default NOTIFBUS_<device>, shared NOTIFBUS);
                               results go to NAME_OUT
          --create-stream      create both streams when missing
          --replicas N         replicas of created streams (1-5, default 1)
          --max-per-subject N  shared inbound stream created: messages kept per subject, a publish
                               past it refused (1-1000000, default 1000)
          --max-age DUR        shared streams created: messages removed after DUR (default 7d)
          --export EVENT       publish local posts of EVENT to notifbus.<device>.event.EVENT (repeatable)
          --ack-wait DUR       AckWait of the bridge's consumer (default 30s)
          --batch N            messages fetched at once (1-1024, default 256)
          --fetch-wait DUR     how long a fetch waits at JetStream when there is nothing (default 1s)
          --inflight N         messages at the broker at once (1-1024, default 128)
        """

    /// Parses `args` (after `nats`). Durations are `250ms`, `5s`, `1m`, `2h` or `7d`.
    static func parse(_ args: [String]) throws(BridgeUsageError) -> BridgeOptions? {
        var o = BridgeOptions()
        var i = 0
        func value(_ name: String) throws(BridgeUsageError) -> String {
            guard i < args.count else { throw BridgeUsageError("option '\(name)' needs a value") }
            defer { i += 1 }
            return args[i]
        }
        func integer(_ name: String, _ range: ClosedRange<Int>) throws(BridgeUsageError) -> Int {
            let text = try value(name)
            guard let n = Int(text), range.contains(n) else {
                throw BridgeUsageError("option '\(name)' needs an integer in \(range.lowerBound)...\(range.upperBound), not '\(text)'")
            }
            return n
        }
        while i < args.count {
            var arg = args[i]
            i += 1
            if let eq = arg.firstIndex(of: "="), arg.hasPrefix("--") {
                let inline = String(arg[arg.index(after: eq)...])
                arg = String(arg[..<eq])
                var rest = Array(args[i...])
                rest.insert(inline, at: 0)
                return try parse(Array(args[..<(i - 1)]) + [arg] + rest)
            }
            switch arg {
            case "--help", "-h": return nil
            case "--url":
                o.urls += try value(arg).split(separator: ",").map { String($0) }
            case "--device": o.device = try value(arg)
            case "--socket": o.socket = try value(arg)
            case "--stream": o.stream = try value(arg)
            case "--create-stream": o.createStream = true
            case "--layout":
                o.layout = try BridgeOptions.layout(try value(arg))
            case "--max-per-subject": o.maxPerSubject = try integer(arg, 1...1_000_000)
            case "--max-age":
                let text = try value(arg)
                guard let ms = parseDuration(text), ms >= 1000, ms <= 3650 * 86_400_000 else {
                    throw BridgeUsageError("--max-age needs a duration from 1s to 3650d (30s, 12h, 7d), not '\(text)'")
                }
                o.maxAgeMs = ms
            case "--replicas": o.replicas = try integer(arg, 1...5)
            case "--export":
                let name = try value(arg)
                guard !name.isEmpty, name.utf8.count <= NATSSubjects.maxNameBytes else {
                    throw BridgeUsageError("--export needs an event name of 1 to \(NATSSubjects.maxNameBytes) bytes")
                }
                o.exports.append(name)
            case "--ack-wait":
                let text = try value(arg)
                guard let ms = parseDuration(text), ms >= 100 else {
                    throw BridgeUsageError("--ack-wait needs a duration of at least 100ms (250ms, 5s, 1m), not '\(text)'")
                }
                o.ackWaitMs = ms
            case "--batch": o.batch = try integer(arg, 1...1024)
            case "--fetch-wait":
                let text = try value(arg)
                guard let ms = parseDuration(text), ms >= 100, ms <= 300_000 else {
                    throw BridgeUsageError("--fetch-wait needs a duration from 100ms to 5m, not '\(text)'")
                }
                o.fetchWaitMs = ms
            case "--inflight": o.inflight = try integer(arg, 1...1024)
            default: throw BridgeUsageError("unknown option '\(arg)'")
            }
        }
        guard !o.urls.isEmpty else { throw BridgeUsageError("--url is required") }
        for url in o.urls where !url.hasPrefix("nats://") {
            throw BridgeUsageError("--url takes nats://HOST:PORT, not '\(url)'")
        }
        guard NATSSubjects.isValidDevice(o.device) else {
            throw BridgeUsageError("--device is required: 1-64 of A-Z a-z 0-9 - _")
        }
        if let s = o.stream, s.isEmpty || s.contains(where: { " .*>/\\".contains($0) }) {
            throw BridgeUsageError("--stream NAME may not be empty or hold spaces, '.', '*', '>', '/' or '\\'")
        }
        return o
    }

    /// The value of `--layout`, for the bridge and for `push` alike.
    static func layout(_ text: String) throws(BridgeUsageError) -> NATSLayout {
        guard let layout = NATSLayout(rawValue: text) else {
            throw BridgeUsageError("--layout takes shared or per-device, not '\(text)'")
        }
        return layout
    }

    static func parseDuration(_ text: String) -> Int64? {
        for (suffix, factor) in [("ms", Int64(1)), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)] where text.hasSuffix(suffix) {
            guard let n = Int64(text.dropLast(suffix.count)), n >= 0, n < Int64.max / factor else { return nil }
            return n * factor
        }
        return nil
    }
}
