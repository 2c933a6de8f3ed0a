// Drives the broker core with a fake clock and decoded frames: no sockets, no sleeps.
// Frames go in as JSON text; what comes out is decoded so tests can check it exactly.
import NotifBusCore
import NotifBusProtocol
import Testing

struct Sent: CustomStringConvertible {
    let to: ConnectionID
    let frame: JSONValue
    /// The body exactly as the broker wrote it.
    var raw: String = ""
    var description: String { "c\(to) <- \(frame.text)" }
}

/// Holds the broker (which is not copyable) for a harness that is: copies of a harness
/// share it.
final class BrokerBox {
    var broker: Broker
    init(_ broker: consuming Broker) { self.broker = broker }
}

struct CoreHarness {
    let box: BrokerBox
    var broker: Broker {
        _read { yield box.broker }
        nonmutating _modify { yield &box.broker }
    }
    var now: Instant = 1_000_000_000
    var nextConnection = 1
    var sent: [Sent] = []
    var closed: [ConnectionID] = []
    /// Sends and closes in the order the broker asked for them (`send cN`, `close cN`).
    var order: [String] = []
    /// Every durable write asked for, in order, with the keys its record carries.
    var persisted: [(write: WriteID, record: StateRecord, acknowledges: Acknowledgement?, once: [OnceRecord])] = []
    /// Writes not yet reported; unless `holdWrites`, each is reported written at once.
    var inFlight: [WriteID] = []
    var holdWrites = false
    /// The list the broker's inputs append their actions to; `collect` empties it.
    private var buffer: [BrokerAction] = []

    /// A broker that keeps its state "on disk" (`persistsState`): the harness plays the
    /// transport's part, reporting each write as written unless told to hold them. It starts
    /// at wall-clock time `wallClockMs`, with `once` keys restored.
    init(wallClockMs: Int64 = 1_700_000_000_000, once: [OnceRecord] = [], configure: (inout BrokerConfiguration) -> Void = { _ in }) {
        var configuration = BrokerConfiguration()
        configuration.persistsState = true
        configuration.brokerUID = 1000
        configuration.hopTimeoutMs = 1000
        configuration.callTimeoutMs = 2000
        configure(&configuration)
        box = BrokerBox(Broker(configuration: configuration, now: now, wallClockMs: wallClockMs, once: once))
    }

    /// Accepts a connection from `uid` and, unless told not to, greets it.
    mutating func connect(uid: UInt32 = 1000, greet: Bool = true, name: String? = nil) -> ConnectionID {
        let id = nextConnection
        nextConnection += 1
        broker.connect(id, credentials: PeerCredentials(pid: Int32(100 + id), uid: uid, gid: uid), now: now, into: &buffer)
        collect()
        if greet {
            let nameField = name.map { ",\"name\":\"\($0)\"" } ?? ""
            send(id, "{\"op\":\"hello\",\"id\":0,\"protocol\":1\(nameField)}")
            let reply = take(id)
            precondition(reply.frame["result"]?["client"]?.stringValue == "c\(id)", "hello failed: \(reply)")
        }
        return id
    }

    mutating func send(_ c: ConnectionID, _ text: String) {
        receive(Array(text.utf8), from: c)
    }

    /// Feeds a frame body as it is (not necessarily JSON) from `c`.
    mutating func receive(_ body: [UInt8], from c: ConnectionID) {
        body.withUnsafeBytes { broker.receive($0, from: c, now: now, into: &buffer) }
        collect()
    }

    /// `c`'s length prefix was out of range.
    mutating func receiveOversizedFrame(from c: ConnectionID, length: UInt32) {
        broker.receiveOversizedFrame(from: c, length: length, now: now, into: &buffer)
        collect()
    }

    mutating func overBudget(_ c: ConnectionID, held: Int, limit: Int) {
        broker.overBudget(c, held: held, limit: limit, now: now, into: &buffer)
        collect()
    }

    mutating func disconnect(_ c: ConnectionID) {
        broker.disconnected(c, now: now, into: &buffer)
        collect()
    }

    mutating func shutdown() {
        broker.shutdown(now: now, into: &buffer)
        collect()
    }

    mutating func advance(ms: Int64) {
        now += UInt64(ms) * 1_000_000
        broker.tick(now: now, into: &buffer)
        collect()
    }

    /// Reports the oldest write in flight as written or failed.
    mutating func finishWrite(written: Bool = true) {
        precondition(!inFlight.isEmpty, "no write in flight")
        broker.persisted(inFlight.removeFirst(), written: written, now: now, into: &buffer)
        collect()
    }

    mutating func collect() {
        let actions = buffer
        buffer.removeAll(keepingCapacity: true)
        for action in actions {
            switch action {
            case .send(let c, let range):
                let frame = broker.outputBytes(range)
                let length = Int(frame[0]) << 24 | Int(frame[1]) << 16 | Int(frame[2]) << 8 | Int(frame[3])
                precondition(length == frame.count - 4, "length prefix does not match the body")
                let json = try! JSONValue(parsing: frame[4...])
                sent.append(Sent(to: c, frame: json, raw: String(decoding: frame[4...], as: UTF8.self)))
                order.append("send c\(c)")
            case .close(let c):
                closed.append(c)
                order.append("close c\(c)")
            case .persist(let write):
                let pending = broker.pendingWrite(write)!
                persisted.append((write, pending.record, pending.acknowledges, pending.once))
                inFlight.append(write)
            }
        }
        broker.outputTaken()
        while !holdWrites, !inFlight.isEmpty { finishWrite() }
    }

    /// Removes and returns the oldest frame sent to `c`; fails the test if there is none.
    mutating func take(_ c: ConnectionID, sourceLocation: SourceLocation = #_sourceLocation) -> Sent {
        guard let index = sent.firstIndex(where: { $0.to == c }) else {
            Issue.record("no frame was sent to c\(c); sent: \(sent)", sourceLocation: sourceLocation)
            return Sent(to: c, frame: .null)
        }
        return sent.remove(at: index)
    }

    /// All frames sent to `c`, removed.
    mutating func takeAll(_ c: ConnectionID) -> [JSONValue] {
        let mine = sent.filter { $0.to == c }.map(\.frame)
        sent.removeAll { $0.to == c }
        return mine
    }

    func nothingSent(to c: ConnectionID) -> Bool { !sent.contains { $0.to == c } }

    /// Sends a request and returns its reply frame.
    mutating func request(_ c: ConnectionID, _ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> JSONValue {
        send(c, text)
        return take(c, sourceLocation: sourceLocation).frame
    }

    mutating func subscribe(_ c: ConnectionID, _ events: [String], priority: Int? = nil, key: String? = nil) -> String {
        var text = "{\"op\":\"subscribe\",\"id\":1,\"events\":[\(events.map { "\"\($0)\"" }.joined(separator: ","))]"
        if let priority { text += ",\"priority\":\(priority)" }
        if let key { text += ",\"key\":\"\(key)\"" }
        text += "}"
        let reply = request(c, text)
        return reply["result"]?["observer"]?.stringValue ?? "?"
    }

    /// Returns the `event` frame sent to `c` (removing it).
    mutating func expectEvent(_ c: ConnectionID, sourceLocation: SourceLocation = #_sourceLocation) -> (event: Int64, observer: String) {
        let f = take(c, sourceLocation: sourceLocation).frame
        #expect(f["op"] == "event", "expected an event, got \(f)", sourceLocation: sourceLocation)
        return (f["event"]?.intValue ?? -1, f["observer"]?.stringValue ?? "")
    }
}

func errorCode(_ frame: JSONValue) -> String? {
    frame["error"]?["code"]?.stringValue
}

func traceReplies(_ reply: JSONValue) -> [String] {
    (reply["result"]?["trace"]?.arrayValue ?? []).map { "\($0["observer"]?.stringValue ?? "")=\($0["reply"]?.stringValue ?? "")" }
}
