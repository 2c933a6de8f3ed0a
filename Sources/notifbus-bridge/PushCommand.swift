// `notifbus push`: the servers' side of Protocol/NATS.md as one command. It publishes a post or
// a put to a device's inbound subjects with a `Nats-Msg-Id`, or sends an invoke request, and
// with `--wait` prints what the device did. It lives here, beside the bridge, because it links
// cnats, which the `notifbus` executable never does; `notifbus push ...` runs `notifbus-bridge push ...`.
import Dispatch
import Glibc
import NotifBusClient
import NotifBusNATS
import NotifBusProtocol

/// A push's settings and what it asks the device to do.
struct PushOptions {
    enum Verb: Equatable {
        case post(event: String, body: [UInt8])
        case put(slot: String, body: [UInt8])
        case invoke(channel: String, method: String, body: [UInt8])
    }

    var urls: [String] = []
    var device = ""
    var msgID: String? = nil
    var wait = false
    var timeoutMs: Int64 = 30_000
    var consumer: String? = nil
    var layout = NATSLayout.perDevice
    var verb = Verb.post(event: "", body: [])

    /// The largest body taken: NATS's default `max_payload`.
    static let maxBody = 1 << 20

    static let help = """
        usage: notifbus push --nats URLS --device ID [options] post EVENT [JSON]
               notifbus push --nats URLS --device ID [options] put SLOT JSON
               notifbus push --nats URLS --device ID [options] invoke CHANNEL METHOD [JSON]

        Sends to a device's bridge over NATS (Protocol/NATS.md), as a server does:
          post    publishes JSON to notifbus.<device>.post.EVENT; the device runs EVENT's chain once
          put     publishes JSON to notifbus.<device>.put.SLOT; the device writes the slot once
          invoke  requests notifbus.<device>.invoke.CHANNEL.METHOD and prints the handler's reply
        In the shared layout posts and puts go to notifbus.<device>.in.post.EVENT and .in.put.SLOT.

        A post or put carries a Nats-Msg-Id (--msg-id, or push-<random>): published again with the
        same id, within the stream's duplicate window, it is stored and applied once. Without
        --wait the command prints {"msgId","stream","seq"} once JetStream has stored the message.

        options:
          --nats URLS     NATS servers, nats://HOST:PORT, comma-separated (repeatable);
                          --url URLS is the same, as the bridge spells it
          --layout L      the layout the device's bridge runs: per-device (default) or shared
          --device ID     the device: 1-64 of A-Z a-z 0-9 - _
          --msg-id ID     the message's Nats-Msg-Id (post, put)
          --wait          post: print the device's result (notifbus.<device>.result);
                          put: wait until the device's bridge has applied and acked it
          --consumer NAME the bridge's consumer, for put --wait (default notifbus-bridge-<device>)
          --timeout DUR   bound on connecting, the publish, --wait and an invoke (default 30s)

        JSON may be - (standard input) or @FILE, of at most 1 MiB. EVENT, SLOT and CHANNEL are
        subject tokens joined by dots (no spaces, '*' or '>'); METHOD is one token.
        Exit status: 0 done, 1 refused, failed or timed out (said on stderr), 2 bad usage.
        """

    /// Parses the arguments after `push`; nil for `--help`.
    static func parse(_ args: [String]) throws(BridgeUsageError) -> PushOptions? {
        var o = PushOptions()
        var words: [String] = []
        var i = 0
        func value(_ name: String) throws(BridgeUsageError) -> String {
            guard i < args.count else { throw BridgeUsageError("option '\(name)' needs a value") }
            defer { i += 1 }
            return args[i]
        }
        while i < args.count {
            let arg = args[i]
            i += 1
            switch arg {
            case "--help", "-h": return nil
            case "--nats", "--url": o.urls += try value(arg).split(separator: ",").map { String($0) }
            case "--device": o.device = try value(arg)
            case "--msg-id": o.msgID = try value(arg)
            case "--consumer": o.consumer = try value(arg)
            case "--wait": o.wait = true
            case "--layout":
                o.layout = try BridgeOptions.layout(try value(arg))
            case "--timeout":
                let text = try value(arg)
                guard let ms = BridgeOptions.parseDuration(text), ms >= 1, ms <= 3_600_000 else {
                    throw BridgeUsageError("--timeout needs a duration from 1ms to 60m (250ms, 5s, 1m), not '\(text)'")
                }
                o.timeoutMs = ms
            default:
                guard !arg.hasPrefix("--") else { throw BridgeUsageError("unknown option '\(arg)'") }
                words.append(arg)
            }
        }
        guard !o.urls.isEmpty else { throw BridgeUsageError("--nats URLS is required") }
        for url in o.urls where !url.hasPrefix("nats://") {
            throw BridgeUsageError("--nats takes nats://HOST:PORT, not '\(url)'")
        }
        guard NATSSubjects.isValidDevice(o.device) else {
            throw BridgeUsageError("--device needs 1-64 of A-Z a-z 0-9 - _ (it is one subject token), not '\(o.device)'")
        }
        let subjects = NATSSubjects(device: o.device, layout: o.layout)
        if let id = o.msgID {
            guard !id.isEmpty, id.utf8.count <= subjects.maxMsgIDBytes, id.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F }) else {
                throw BridgeUsageError("--msg-id needs 1 to \(subjects.maxMsgIDBytes) printable bytes for this device")
            }
        }
        if let name = o.consumer, name.isEmpty || name.contains(where: { " .*>/\\".contains($0) }) {
            throw BridgeUsageError("--consumer NAME may not be empty or hold spaces, '.', '*', '>', '/' or '\\'")
        }
        guard let verb = words.first else { throw BridgeUsageError("expected post, put or invoke") }
        let rest = Array(words.dropFirst())
        switch verb {
        case "post":
            guard (1...2).contains(rest.count) else { throw BridgeUsageError("expected post EVENT [JSON]") }
            try checkName(rest[0], what: "EVENT")
            o.verb = .post(event: rest[0], body: rest.count == 2 ? try json(rest[1]) : [])
        case "put":
            guard rest.count == 2 else { throw BridgeUsageError("expected put SLOT JSON") }
            try checkName(rest[0], what: "SLOT")
            o.verb = .put(slot: rest[0], body: try json(rest[1]))
        case "invoke":
            guard (2...3).contains(rest.count) else { throw BridgeUsageError("expected invoke CHANNEL METHOD [JSON]") }
            try checkName(rest[0], what: "CHANNEL")
            try checkName(rest[1], what: "METHOD")
            guard !rest[1].contains(".") else { throw BridgeUsageError("METHOD is one subject token: it cannot hold a dot") }
            o.verb = .invoke(channel: rest[0], method: rest[1], body: rest.count == 3 ? try json(rest[2]) : [])
        default:
            throw BridgeUsageError("unknown action '\(verb)' (known: post, put, invoke)")
        }
        if o.wait, case .invoke = o.verb { o.wait = false }
        return o
    }

    /// A name becomes the tail of a subject: 1-256 bytes of tokens joined by dots, with no
    /// empty token, space, control character or wildcard.
    static func checkName(_ name: String, what: String) throws(BridgeUsageError) {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= NATSSubjects.maxNameBytes else {
            throw BridgeUsageError("\(what) needs 1 to \(NATSSubjects.maxNameBytes) bytes")
        }
        let bad = bytes.contains { $0 <= 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "*") || $0 == UInt8(ascii: ">") }
        let emptyToken = bytes.first == UInt8(ascii: ".") || bytes.last == UInt8(ascii: ".") || name.contains("..")
        guard !bad, !emptyToken else {
            throw BridgeUsageError(
                "\(what) '\(name)' is not a subject tail: tokens joined by '.', none empty, without spaces, control characters, '*' or '>'")
        }
    }

    /// A JSON argument: the text itself, `-` for standard input, or `@FILE`; one JSON value.
    static func json(_ argument: String) throws(BridgeUsageError) -> [UInt8] {
        let bytes: [UInt8]
        if argument == "-" {
            bytes = try readAll(fd: 0, what: "standard input")
        } else if argument.hasPrefix("@") {
            let path = String(argument.dropFirst())
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw BridgeUsageError("cannot read \(path): \(String(cString: strerror(errno)))") }
            defer { close(fd) }
            bytes = try readAll(fd: fd, what: path)
        } else {
            bytes = Array(argument.utf8)
        }
        guard JSONScanner.isValidDocument(bytes) else {
            throw BridgeUsageError("not JSON: '\(String(decoding: bytes.prefix(80), as: UTF8.self))' is not one JSON value")
        }
        return bytes
    }

    /// Everything `fd` holds, refused as soon as it passes `maxBody`.
    private static func readAll(fd: Int32, what: String) throws(BridgeUsageError) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw BridgeUsageError("cannot read \(what): \(String(cString: strerror(errno)))") }
            if n == 0 { return bytes }
            guard bytes.count + n <= maxBody else { throw BridgeUsageError("\(what) holds more than \(maxBody) bytes") }
            bytes += chunk[0..<n]
        }
    }
}

/// Prints `notifbus push: LINE` to stderr.
func pushError(_ line: String) {
    var text = "notifbus push: " + line + "\n"
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// A failure after the command line was read: one line on stderr, exit status 1.
struct PushFailure: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// The first message on the result or dead-letter subject that names the pushed message.
private final class Outcome: @unchecked Sendable {
    private let lock = Lock()
    private var found: (dead: Bool, message: NATSMessage)? = nil
    let arrived = DispatchSemaphore(value: 0)

    func offer(_ message: NATSMessage, id: String, dead: Bool) {
        let taken = lock.withLock { () -> Bool in
            guard found == nil, message.header(NATSSubjects.inboundIDHeader) == id else { return false }
            found = (dead, message)
            return true
        }
        if taken { arrived.signal() } else { message.destroy() }
    }

    var value: (dead: Bool, message: NATSMessage)? { lock.withLock { found } }
}

enum PushCommand {
    /// The connection lives until the process exits: closing it calls back into it from a
    /// cnats thread, which must not find it freed.
    nonisolated(unsafe) static var link: NATSLink? = nil

    static func run(_ o: PushOptions) throws(PushFailure) -> Int32 {
        let subjects = NATSSubjects(device: o.device, layout: o.layout)
        let link: NATSLink
        do {
            link = try NATSLink(urls: o.urls, name: "notifbus-push", retryFirstConnect: false, log: { _ in })
        } catch {
            throw PushFailure("cannot reach NATS at \(o.urls.joined(separator: ",")): \(error.detail)")
        }
        PushCommand.link = link
        let deadline = DispatchTime.now() + .milliseconds(Int(o.timeoutMs))
        switch o.verb {
        case .invoke(let channel, let method, let body):
            let request = OutboundMessage(
                subject: subjects.prefix + "invoke." + channel + "." + method, body: body,
                headers: [(NATSSubjects.timeoutHeader, String(o.timeoutMs))])
            let reply: NATSMessage
            do { reply = try link.request(request, timeoutMs: o.timeoutMs) } catch {
                if error.status == NATS_TIMEOUT || error.status == NATS_NO_RESPONDERS {
                    throw PushFailure(
                        "no reply from device \(o.device) within \(o.timeoutMs) ms (is its bridge running?): \(error.detail)")
                }
                throw PushFailure("\(error)")
            }
            defer { reply.destroy() }
            let data = reply.data
            print(String(decoding: data, as: UTF8.self))
            return isError(data) ? 1 : 0
        case .post(let name, let body), .put(let name, let body):
            let isPost: Bool = { if case .post = o.verb { return true } else { return false } }()
            let msgID = o.msgID ?? "push-" + String(UInt64.random(in: 1...UInt64.max), radix: 16)
            let outcome = Outcome()
            if o.wait {
                do {
                    if isPost { try link.subscribe(subjects.result) { outcome.offer($0, id: msgID, dead: false) } }
                    try link.subscribe(subjects.dead) { outcome.offer($0, id: msgID, dead: true) }
                    guard link.flush(timeoutMs: o.timeoutMs) else { throw PushFailure("NATS did not confirm the subscriptions in time") }
                } catch let error as NATSError {
                    throw PushFailure("\(error)")
                } catch let error as PushFailure {
                    throw error
                } catch {
                    throw PushFailure("\(error)")
                }
            }
            let message = OutboundMessage(
                subject: (isPost ? subjects.post : subjects.put) + "." + name, body: body, headers: [(NATSLink.msgIDHeader, msgID)])
            let ack: (stream: String, sequence: UInt64, duplicate: Bool)
            do { ack = try link.publishAcked(message, timeoutMs: o.timeoutMs) } catch {
                if error.status == NATS_NO_RESPONDERS {
                    throw PushFailure(
                        "no JetStream stream takes \(message.subject): is device \(o.device)'s bridge set up (--create-stream), and does it run this --layout?"
                    )
                }
                throw PushFailure("\(error)")
            }
            let stored =
                #"{"msgId":"\#(jsonEscaped(msgID))","stream":"\#(jsonEscaped(ack.stream))","seq":\#(ack.sequence)"#
                + (ack.duplicate ? #","duplicate":true"# : "")
            guard o.wait else {
                print(stored + "}")
                return 0
            }
            if isPost {
                if ack.duplicate, let found = try earlierOutcome(link, subjects, msgID: msgID, ack: ack, timeoutMs: o.timeoutMs) {
                    return report(found)
                }
                return try waitForResult(outcome, msgID: msgID, device: o.device, duplicate: ack.duplicate, deadline: deadline)
            }
            let consumer = o.consumer ?? "notifbus-bridge-" + o.device
            while DispatchTime.now() < deadline {
                if let found = outcome.value { return dead(found.message, msgID: msgID) }
                let floor: UInt64
                do { floor = try link.ackFloor(stream: ack.stream, durable: consumer) } catch {
                    throw PushFailure("cannot read consumer \(consumer) of stream \(ack.stream): \(error.detail)")
                }
                if floor >= ack.sequence {
                    // The bridge publishes a dead letter before it acks: anything on its way has come.
                    _ = link.flush(timeoutMs: 1000)
                    if let found = outcome.value { return dead(found.message, msgID: msgID) }
                    print(stored + #","applied":true}"#)
                    return 0
                }
                usleep(50_000)
            }
            throw PushFailure(
                "device \(o.device) has not applied put \(msgID) within \(o.timeoutMs) ms; it stays in stream \(ack.stream) (seq \(ack.sequence)) until the device's bridge takes it"
            )
        }
    }

    private static func waitForResult(_ outcome: Outcome, msgID: String, device: String, duplicate: Bool, deadline: DispatchTime) throws(PushFailure)
        -> Int32
    {
        guard outcome.arrived.wait(timeout: deadline) == .success, let found = outcome.value else {
            let again =
                duplicate
                ? "; the stream already held a message with this id, and has no result for it yet"
                : "; the post stays in the stream until the device's bridge takes it"
            throw PushFailure("no result from device \(device) for \(msgID) in time\(again)")
        }
        if found.dead { return dead(found.message, msgID: msgID) }
        let data = found.message.data
        found.message.destroy()
        return report((dead: false, data: data, reason: "", detail: ""))
    }

    /// A post the stream already held (the same msg id sent before) may have its result, or
    /// its dead letter, stored already: they are read from the stream of the result subject,
    /// from the time the post was first stored on. When the inbound stream no longer holds
    /// the first copy (the shared layout's work queue removes what the bridge acked), that
    /// copy was stored within the stream's duplicate window, which sets the start instead.
    private static func earlierOutcome(
        _ link: NATSLink, _ subjects: NATSSubjects, msgID: String, ack: (stream: String, sequence: UInt64, duplicate: Bool), timeoutMs: Int64
    ) throws(PushFailure) -> (dead: Bool, data: [UInt8], reason: String, detail: String)? {
        var found: (dead: Bool, data: [UInt8], reason: String, detail: String)? = nil
        do {
            // A few seconds before the post was stored: the result stream's search by time
            // need not start exactly at the first message stored after that time.
            let since: Int64
            do {
                since = try link.storedTime(stream: ack.stream, sequence: ack.sequence) - 5_000_000_000
            } catch  where error.jsCode == JSNoMessageFoundErr || error.status == NATS_NOT_FOUND {
                // The first copy was stored within the window before the server's now, which
                // is at or after the stream's last store, on the server's clock: from the
                // window before that (or before this machine's now, when that is earlier,
                // which only reads more), whatever this machine's clock says.
                var now = timespec()
                clock_gettime(CLOCK_REALTIME, &now)
                let nowNs = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
                let stream = try link.duplicateWindow(stream: ack.stream)
                since = min(nowNs, stream.lastStoredNs) - stream.windowNs - 5_000_000_000
            }
            for subject in [subjects.result, subjects.dead] where found == nil {
                _ = try link.scan(subject: subject, fromNs: since, timeoutMs: timeoutMs) { message in
                    guard message.header(NATSSubjects.inboundIDHeader) == msgID else { return false }
                    found = (
                        subject == subjects.dead, message.data, message.header(NATSSubjects.reasonHeader) ?? "?",
                        message.header(NATSSubjects.detailHeader) ?? ""
                    )
                    return true
                }
            }
        } catch {
            throw PushFailure("reading the earlier outcome of \(msgID): \(error)")
        }
        return found
    }

    /// Prints a result (status 1 when it holds `error`), or says why the device refused the post.
    private static func report(_ found: (dead: Bool, data: [UInt8], reason: String, detail: String)) -> Int32 {
        if found.dead {
            pushError("the device refused the post (dead letter): \(found.reason): \(found.detail)")
            return 1
        }
        print(String(decoding: found.data, as: UTF8.self))
        return isError(found.data) ? 1 : 0
    }

    /// Says why the device refused the message (its dead letter's headers); status 1.
    private static func dead(_ message: NATSMessage, msgID: String) -> Int32 {
        let reason = message.header(NATSSubjects.reasonHeader) ?? "?"
        let detail = message.header(NATSSubjects.detailHeader) ?? ""
        message.destroy()
        pushError("the device refused \(msgID) (dead letter): \(reason): \(detail)")
        return 1
    }

    /// Whether a reply or result is `{"error":...}` at its top level.
    private static func isError(_ data: [UInt8]) -> Bool {
        guard let value = try? JSONValue(parsing: data) else { return false }
        return value["error"] != nil
    }

    private static func jsonEscaped(_ text: String) -> String {
        let encoded = JSONValue.string(text).encoded
        return String(decoding: encoded.dropFirst().dropLast(), as: UTF8.self)
    }
}
