// Exports local events to NATS: it monitors the broker, pairs each post of an exported event
// with the broker's reply to it, and publishes accepted ones to notifbus.<device>.event.<name>.
// It must not slow the bus: the monitor callback only queues; a thread of its own publishes.
import Dispatch
import Glibc
import NotifBusClient
import NotifBusNATS
import NotifBusProtocol

/// Publishes the device's own posts of chosen events (clicks: `didReceive`) to JetStream.
final class EventExporter: @unchecked Sendable {
    private unowned let bridge: NATSBridge
    private let events: Set<String>
    private let lock = Lock()
    /// Posts seen and not yet answered, by client and request id; bounded, oldest dropped.
    private var pending: [String: (name: String, payload: JSONValue)] = [:]
    private var pendingOrder: [String] = []
    private var queue: [OutboundMessage] = []
    private let wake = DispatchSemaphore(value: 0)
    private var sequence: Int64 = 0
    /// Distinguishes this run's message ids from an earlier run's.
    private let runID: String

    /// Posts remembered while their chains run, and exports waiting for NATS.
    static let maxPending = 4096
    static let maxQueued = 10_000

    init(bridge: NATSBridge, events: Set<String>) {
        self.bridge = bridge
        self.events = events
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        runID = String(getpid()) + "-" + String(ts.tv_sec) + "-" + String(ts.tv_nsec / 1000)
        _ = DetachedThread.start { [self] in publishLoop() }
    }

    /// Starts monitoring on `connection`; false when the broker refused.
    func attach(_ connection: NotifBusConnection) -> Bool {
        let ok: Bool = blocking { [self] in
            do {
                try await connection.monitor { [self] seen in observe(seen) }
                return true
            } catch {
                log("cannot monitor the broker for --export: \(error)")
                return false
            }
        }
        return ok
    }

    private func observe(_ seen: SeenFrame) {
        let frame = seen.frame
        guard let op = frame["op"]?.stringValue, let id = frame["id"] else { return }
        let key = seen.client + " " + id.text
        if seen.direction == "in", op == Op.post, let name = frame["name"]?.stringValue, events.contains(name) {
            lock.withLock {
                if pending[key] == nil { pendingOrder.append(key) }
                pending[key] = (name, frame["payload"] ?? .null)
                while pendingOrder.count > EventExporter.maxPending { pending[pendingOrder.removeFirst()] = nil }
            }
        } else if seen.direction == "out", op == Op.reply {
            let accepted = frame["result"] != nil
            let entry = lock.withLock { () -> (name: String, payload: JSONValue)? in
                guard let entry = pending.removeValue(forKey: key) else { return nil }
                pendingOrder.removeAll { $0 == key }
                return entry
            }
            guard let entry, accepted else { return }
            let outcome = frame["result"]?["outcome"]?.stringValue ?? ""
            let queued = lock.withLock { () -> Bool in
                guard queue.count < EventExporter.maxQueued else { return false }
                sequence += 1
                queue.append(
                    OutboundMessage(
                        subject: bridge.subjects.event(entry.name), body: entry.payload.encoded,
                        headers: [
                            (NATSLink.msgIDHeader, "event:" + bridge.options.device + ":" + runID + ":" + String(sequence)),
                            (NATSSubjects.eventHeader, entry.name),
                            (NATSSubjects.clientHeader, seen.client),
                            ("Notifbus-Outcome", outcome),
                        ]))
                return true
            }
            if queued { wake.signal() } else { log("export queue full: a \(entry.name) from \(seen.client) was not exported") }
        }
    }

    private func publishLoop() {
        while true {
            wake.wait()
            let batch = lock.withLock { () -> [OutboundMessage] in
                defer { queue.removeAll() }
                return queue
            }
            bridge.publishAll(batch)
        }
    }
}
