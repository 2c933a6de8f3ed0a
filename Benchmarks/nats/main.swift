// notifbus-nats-bench: inbound post throughput and latency through the NATS bridge (NATS →
// bridge → broker → 1 observer → result → NATS) against a raw cnats floor in the same run that
// does the bridge path's NATS work without notifbus: consume an inbound message, publish a
// result to an R3 stream and take its publish ack, ack the inbound message. It prints numbers
// and asserts nothing.
import Dispatch
import Glibc
import NotifBusClient
import NotifBusNATS
import NotifBusProtocol

/// Writes a line to stdout at once (no buffering, so a killed run still shows its progress).
func say(_ text: String) {
    var line = text + "\n"
    line.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
}

struct BenchOptions {
    var urls: [String] = []
    var socket: String? = nil
    var device = "bench"
    var count = 5000
    var latencyCount = 300
    /// Rounds of floor-then-bridge; the figures are the medians.
    var rounds = 1
    var replicas = 3
    /// `thread`: the observer answers each event on its socket's reader thread; `swift`: a
    /// NotifBusClient observer (its handler runs in a Task, one more thread hop per event).
    var observer = "thread"
}

func usage() -> Never {
    say(
        "usage: notifbus-nats-bench --url URLS --device ID [--socket PATH] [--count N] [--latency-count K] [--replicas R] [--rounds N] [--observer thread|swift]\n"
            + "  needs the broker on PATH and `notifbus bridge nats --device ID --create-stream` running")
    exit(2)
}

var options = BenchOptions()
var argv = Array(CommandLine.arguments.dropFirst())
while !argv.isEmpty {
    let flag = argv.removeFirst()
    guard !argv.isEmpty else { usage() }
    let value = argv.removeFirst()
    switch flag {
    case "--url": options.urls += value.split(separator: ",").map(String.init)
    case "--socket": options.socket = value
    case "--device": options.device = value
    case "--count": options.count = Int(value) ?? 0
    case "--latency-count": options.latencyCount = Int(value) ?? 0
    case "--replicas": options.replicas = Int(value) ?? 0
    case "--rounds": options.rounds = Int(value) ?? 0
    case "--observer": options.observer = value
    default: usage()
    }
}
guard !options.urls.isEmpty, options.count > 0, options.latencyCount > 0, (1...5).contains(options.replicas), (1...99).contains(options.rounds),
    ["thread", "swift"].contains(options.observer)
else { usage() }

func nowNs() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func percentile(_ sorted: [UInt64], _ p: Double) -> Double {
    Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000
}

func must<T>(_ what: String, _ body: () throws -> T) -> T {
    do { return try body() } catch {
        say("nats-bench: \(what): \(error)")
        exit(1)
    }
}

/// Counts arrivals by message id and wakes whoever waits for one id or for a total.
final class Arrivals: @unchecked Sendable {
    private let lock = Lock()
    private var count = 0
    private var waitingFor: String? = nil
    private var target = Int.max
    let signal = DispatchSemaphore(value: 0)

    func arrived(_ id: String) {
        let wake = lock.withLock { () -> Bool in
            count += 1
            if id == waitingFor { waitingFor = nil; return true }
            return count == target
        }
        if wake { signal.signal() }
    }

    func expect(id: String) { lock.withLock { waitingFor = id } }
    var total: Int { lock.withLock { count } }
    func expect(total: Int) -> Bool {
        lock.withLock {
            target = total; return count >= total
        }
    }
    func reset() {
        lock.withLock {
            count = 0; target = .max; waitingFor = nil
        }
    }
}

final class ResultHolder<T>: @unchecked Sendable { var value: T? }

/// CPU time of the processes named in NOTIFBUS_BENCH_PIDS (`name=pid,...`, from run.sh) and of
/// this one, plus the machine's idle time, so that each phase can say where the CPU went.
struct CPUSample {
    static let watched: [(name: String, pid: Int32)] = {
        let spec = getenv("NOTIFBUS_BENCH_PIDS").map { String(cString: $0) } ?? ""
        let named = spec.split(separator: ",").compactMap { item -> (String, Int32)? in
            let parts = item.split(separator: "=")
            guard parts.count == 2, let pid = Int32(parts[1]) else { return nil }
            return (String(parts[0]), pid)
        }
        return named + [("bench", getpid())]
    }()
    static let tick = Double(sysconf(Int32(_SC_CLK_TCK)))
    /// Seconds of CPU (user + system) per watched process, in `watched` order.
    var seconds: [Double] = []
    var idleSeconds = 0.0
    var wall = nowNs()

    init() {
        for (_, pid) in CPUSample.watched {
            let fields = CPUSample.read("/proc/\(pid)/stat").split(separator: ")").last?.split(separator: " ") ?? []
            let ticks = fields.count > 12 ? (Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0) : 0
            seconds.append(ticks / CPUSample.tick)
        }
        let cpu = CPUSample.read("/proc/stat").split(separator: "\n").first?.split(separator: " ") ?? []
        if cpu.count > 5 { idleSeconds = ((Double(cpu[4]) ?? 0) + (Double(cpu[5]) ?? 0)) / CPUSample.tick }
    }

    static func read(_ path: String) -> String {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
        return n > 0 ? String(decoding: bytes[0..<n], as: UTF8.self) : ""
    }

    /// One line: CPU µs per message of each watched process between `start` and now, and the
    /// share of the machine's CPU that was idle; and the sum over the processes.
    static func report(since start: CPUSample, messages: Int) -> (line: String, total: Double) {
        let end = CPUSample()
        var parts: [String] = []
        var nats = 0.0, total = 0.0
        for (index, entry) in watched.enumerated() {
            let us = (end.seconds[index] - start.seconds[index]) * 1e6 / Double(messages)
            total += us
            if entry.name.hasPrefix("nats") { nats += us } else { parts.append("\(entry.name) \(Int(us))") }
        }
        let wall = Double(end.wall - start.wall) / 1e9
        let idle = (end.idleSeconds - start.idleSeconds) / (wall * Double(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        let line =
            "  CPU µs per message: nats-servers \(Int(nats)), " + parts.joined(separator: ", ") + "; machine idle \(Int((idle * 100).rounded()))%"
        return (line, total)
    }
}

/// The floor's consumer: what a bridge does on NATS and nothing else, in cnats calls on a
/// connection of its own. It fetches inbound messages in batches of 256 (the bridge's
/// `--batch`), publishes one result per message to the R3 result stream without waiting, and
/// acks each inbound message from the result's publish ack; fetching goes on meanwhile, bounded
/// by the consumer's MaxAckPending (6 × 256, as the bridge's) and 4,096 pending publishes.
final class FloorConsumer: @unchecked Sendable {
    static let resultSubject = "notifbus-bench-floor.result"
    private var connection: OpaquePointer? = nil
    private var jetStream: OpaquePointer? = nil
    private var subscription: OpaquePointer? = nil
    private let lock = Lock()
    /// Inbound messages whose result is being published, by inbound msg id.
    private var held: [String: OpaquePointer] = [:]
    /// Messages and batches fetched so far.
    private(set) var fetched = (messages: 0, batches: 0)

    init(urls: [String], stream: String, durable: String) {
        var s = natsConnection_ConnectTo(&connection, urls.joined(separator: ","))
        guard s == NATS_OK else { fail("connect", s) }
        var options = jsOptions()
        jsOptions_Init(&options)
        options.PublishAsync.MaxPending = 4096
        options.PublishAsync.AckHandler = { _, msg, ack, failure, closure in
            guard let msg, let closure else { return }
            Unmanaged<FloorConsumer>.fromOpaque(closure).takeUnretainedValue().published(msg, ok: ack != nil && failure == nil)
        }
        options.PublishAsync.AckHandlerClosure = Unmanaged.passUnretained(self).toOpaque()
        s = natsConnection_JetStream(&jetStream, connection, &options)
        guard s == NATS_OK else { fail("jetstream", s) }
        do { subscription = try NATSLink.pullSubscribe(jetStream!, stream: stream, durable: durable) } catch {
            fail("pull subscribe", error.status)
        }
        _ = DetachedThread.start { [self] in run() }
    }

    private func fail(_ what: String, _ s: natsStatus) -> Never {
        say("nats-bench: floor consumer: \(what): \(String(cString: natsStatus_GetText(s)))")
        exit(1)
    }

    private func run() {
        var results: [OpaquePointer?] = []
        while true {
            var list = natsMsgList()
            var code = jsErrCode(rawValue: 0)
            let s = natsSubscription_Fetch(&list, subscription, 256, 1000, &code)
            if s == NATS_TIMEOUT { continue }
            guard s == NATS_OK else { fail("fetch", s) }
            lock.withLock { fetched = (fetched.messages + Int(list.Count), fetched.batches + 1) }
            results.removeAll(keepingCapacity: true)
            for i in 0..<Int(list.Count) {
                guard let inbound = list.Msgs[i] else { continue }
                list.Msgs[i] = nil
                var id: UnsafePointer<CChar>? = nil
                guard natsMsgHeader_Get(inbound, NATSLink.msgIDHeader, &id) == NATS_OK, let id else { fail("inbound msg id", NATS_ERR) }
                let msgID = String(cString: id)
                // A result of the bridge's shape and about its size.
                let body = Array(
                    (#"{"msgId":""# + msgID
                        + #"","event":"bench","result":{"event":1,"outcome":"completed","by":"o1","value":{"shown":true},"retained":null,"trace":[{"observer":"o1","reply":"complete"}]}}"#)
                        .utf8)
                var result: OpaquePointer? = nil
                let created = body.withUnsafeBufferPointer {
                    natsMsg_Create(
                        &result, FloorConsumer.resultSubject, nil, UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self),
                        Int32($0.count))
                }
                guard created == NATS_OK, let result else { fail("result message", created) }
                natsMsgHeader_Set(result, NATSLink.msgIDHeader, "result:" + msgID)
                natsMsgHeader_Set(result, NATSSubjects.inboundIDHeader, msgID)
                lock.withLock { held[msgID] = inbound }
                results.append(result)
            }
            natsMsgList_Destroy(&list)
            for i in results.indices {
                let s = js_PublishMsgAsync(jetStream, &results[i], nil)
                if let left = results[i] { natsMsg_Destroy(left) }
                guard s == NATS_OK else { fail("publish result", s) }
            }
        }
    }

    var fetchedSoFar: (messages: Int, batches: Int) { lock.withLock { fetched } }

    /// The result's publish ack came: the inbound message is done, so it is acked.
    private func published(_ result: OpaquePointer, ok: Bool) {
        defer { natsMsg_Destroy(result) }
        guard ok else { fail("a result's publish failed", NATS_ERR) }
        var id: UnsafePointer<CChar>? = nil
        guard natsMsgHeader_Get(result, NATSSubjects.inboundIDHeader, &id) == NATS_OK, let id else { return }
        let key = String(cString: id)
        guard let inbound = lock.withLock({ held.removeValue(forKey: key) }) else { return }
        _ = natsMsg_Ack(inbound, nil)
        natsMsg_Destroy(inbound)
    }
}

/// The benchmark's connections and both measured paths.
final class Bench: @unchecked Sendable {
    let runID = String(getpid()) + "-" + String(nowNs() / 1_000_000)
    let link: NATSLink
    let subjects: NATSSubjects
    let arrivals = Arrivals()
    let floorArrivals = Arrivals()
    let floorStream = "NOTIFBUS_BENCH_FLOOR"
    var floorConsumer: FloorConsumer? = nil

    init(_ options: BenchOptions) {
        let link = must("connect to NATS") { try NATSLink(urls: options.urls, name: "notifbus-nats-bench", log: { say("nats-bench: " + $0) }) }
        self.link = link
        subjects = NATSSubjects(device: options.device)
        let stream = floorStream, durable = "floor-" + runID
        must("floor streams") {
            try link.createStream(
                stream, subjects: ["notifbus-bench-floor.post.>"], replicas: options.replicas, duplicateWindowMs: 10 * 60 * 1000)
            try link.createStream(
                stream + "_OUT", subjects: [FloorConsumer.resultSubject], replicas: options.replicas,
                duplicateWindowMs: 10 * 60 * 1000)
        }
        must("floor consumer") {
            _ = try link.ensureConsumer(stream: stream, durable: durable, ackWaitMs: { _ in 30_000 }, maxAckPending: 6 * 256)
        }
        floorConsumer = FloorConsumer(urls: options.urls, stream: stream, durable: durable)
        let arrivals = self.arrivals, floorArrivals = self.floorArrivals
        must("subscribe to results") {
            try link.subscribe(subjects.result) { msg in
                arrivals.arrived(msg.header(NATSSubjects.inboundIDHeader) ?? "")
                msg.destroy()
            }
            try link.subscribe(FloorConsumer.resultSubject) { msg in
                floorArrivals.arrived(msg.header(NATSSubjects.inboundIDHeader) ?? "")
                msg.destroy()
            }
        }
    }

    /// Publishes `n` messages made by `message` and waits until `into` counted `n` results.
    /// A publish refused or left without its ack (the machine is loaded) is made again with
    /// the same msg id, which the stream stores once.
    func throughput(_ n: Int, _ into: Arrivals, _ what: String, _ message: @escaping @Sendable (Int) -> OutboundMessage) -> Double {
        into.reset()
        let start = nowNs()
        _ = DetachedThread.start { [self] in
            for i in 0..<n {
                var tries = 0
                while (try? link.publishAsync(message(i), maxWaitMs: 10_000)) == nil, tries < 100 {
                    tries += 1
                    usleep(100_000)
                }
            }
            try? link.publishComplete(timeoutMs: 60_000)
            let failed = link.takeFailed()
            for i in 0..<n where failed.contains(message(i).msgID!) { _ = try? link.publish(message(i), timeoutMs: 30_000) }
        }
        if !into.expect(total: n) {
            if into.signal.wait(timeout: .now() + .seconds(300)) == .timedOut {
                say("nats-bench: \(what): \(into.total) of \(n) results came within 300 s")
                exit(1)
            }
        }
        return Double(n) / (Double(nowNs() - start) / 1e9)
    }

    /// One message at a time: publish, wait for its result.
    func latency(_ k: Int, _ into: Arrivals, _ message: (Int) -> OutboundMessage) -> [UInt64] {
        into.reset()
        var samples: [UInt64] = []
        for i in 0..<k {
            let m = message(i)
            into.expect(id: m.msgID!)
            let t0 = nowNs()
            try? link.publishAsync(m, maxWaitMs: 10_000)
            if into.signal.wait(timeout: .now() + .seconds(60)) == .timedOut {
                say("nats-bench: no result for \(m.msgID!) within 60 s")
                exit(1)
            }
            samples.append(nowNs() - t0)
        }
        return samples.sorted()
    }

    // MARK: The floor: consume → publish the result to R3 with its ack → ack, in cnats

    func floorMessage(_ i: Int, _ tag: String) -> OutboundMessage {
        OutboundMessage(
            subject: "notifbus-bench-floor.post.bench", body: Array("{\"n\":\(i)}".utf8),
            headers: [(NATSLink.msgIDHeader, "floor-\(runID)-\(tag)-\(i)")])
    }

    func floorThroughput(_ n: Int, tag: String) -> Double { throughput(n, floorArrivals, "floor") { [self] in floorMessage($0, tag) } }

    func floorLatency(_ k: Int) -> [UInt64] { latency(k, floorArrivals) { self.floorMessage($0, "lat") } }

    // MARK: Through the bridge: NATS → bridge → broker → observer → result → NATS

    func postMessage(_ i: Int, _ tag: String) -> OutboundMessage {
        OutboundMessage(
            subject: subjects.post + ".bench", body: Array("{\"n\":\(i)}".utf8),
            headers: [(NATSLink.msgIDHeader, "bench-\(runID)-\(tag)-\(i)")])
    }

    func bridgeThroughput(_ n: Int, tag: String) -> Double { throughput(n, arrivals, "bridge") { [self] in postMessage($0, tag) } }

    func bridgeLatency(_ k: Int) -> [UInt64] { latency(k, arrivals) { self.postMessage($0, "lat") } }
}

/// The benchmark's one observer of `bench`, written against the wire directly: a blocking
/// reader thread that answers every event with `complete` as soon as it has read it, so the
/// chain costs the broker one socket round trip and the observer no thread hop.
final class ThreadObserver: @unchecked Sendable {
    let fd: Int32
    let ready = DispatchSemaphore(value: 0)

    init(socket: String?) {
        let path = SocketPath.resolve(explicit: socket)
        fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard fd >= 0, connected == 0 else {
            say("nats-bench: observer: cannot connect to \(path)")
            exit(1)
        }
        send(["op": "hello", "id": 1, "protocol": .integer(protocolVersion), "name": "nats-bench-observer"])
        send(["op": "subscribe", "id": 2, "events": ["bench"], "priority": 0])
        _ = DetachedThread.start { [self] in readLoop() }
        if ready.wait(timeout: .now() + .seconds(30)) == .timedOut {
            say("nats-bench: observer: no reply to subscribe within 30 s")
            exit(1)
        }
    }

    func send(_ message: JSONValue) {
        let body = message.encoded
        let frame = FrameHeader.encode(length: body.count) + body
        var offset = 0
        while offset < frame.count {
            let n = frame.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            offset += n
        }
    }

    private func readLoop() {
        var decoder = FrameDecoder()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            decoder.append(buffer[0..<n])
            while let body = try? decoder.next(), let message = try? JSONValue(parsing: body) {
                switch message["op"]?.stringValue {
                case "event"?:
                    send(["op": "complete", "event": message["event"] ?? .null, "value": ["shown": true]])
                case "reply"? where message["id"]?.intValue == 2:
                    if message["error"] != nil {
                        say("nats-bench: observer: subscribe refused: \(message)")
                        exit(1)
                    }
                    ready.signal()
                default: break
                }
            }
        }
    }
}

let bench = Bench(options)
let socket = options.socket
let observerKind = options.observer
let keepAlive: AnyObject = {
    if observerKind == "thread" { return ThreadObserver(socket: socket) }
    let box = ResultHolder<NotifBusConnection>()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do {
            let connection = try await NotifBusConnection.connect(socket: socket, name: "nats-bench-observer")
            try await connection.addObserver(events: ["bench"], priority: 0) { _ in .complete(["shown": true]) }
            box.value = connection
        } catch {
            say("nats-bench: broker: \(error)")
            exit(1)
        }
        done.signal()
    }
    done.wait()
    return box.value!
}()

/// The broker's own ceiling for this path, without NATS: posts sent the way the bridge sends
/// them (groups of 64, two groups at the broker, each with its idempotency key), each run
/// through the one observer.
func brokerCeiling(_ n: Int, _ poster: NotifBusConnection, tag: String) -> Double {
    let start = nowNs()
    var groups: [PipelinedReplies] = []
    var sent = 0
    while sent < n || !groups.isEmpty {
        while sent < n && groups.count < 2 {
            let size = min(64, n - sent)
            let requests = (0..<size).map { i -> EncodedRequest in
                let key = "bench/\(bench.runID)/\(tag)/\(sent + i)"
                return EncodedRequest(op: Op.post, members: Array(#","name":"bench","once":"\#(key)","payload":{"n":\#(sent + i)}"#.utf8))
            }
            groups.append(poster.pipeline(encoded: requests, timeout: .seconds(300)))
            sent += size
        }
        guard let replies = groups.removeFirst().waitAll(until: .now() + .seconds(300)) else {
            say("nats-bench: the broker did not answer a group of posts within 300 s")
            exit(1)
        }
        for case .failure(let error) in replies {
            say("nats-bench: a post to the broker failed: \(error)")
            exit(1)
        }
    }
    return Double(n) / (Double(nowNs() - start) / 1e9)
}

let poster: NotifBusConnection = {
    let box = ResultHolder<NotifBusConnection>()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do { box.value = try await NotifBusConnection.connect(socket: socket, name: "nats-bench-poster") } catch {
            say("nats-bench: broker: \(error)")
            exit(1)
        }
        done.signal()
    }
    done.wait()
    return box.value!
}()

// Warm-up, then `--rounds` rounds of the floor and the bridge one after the other (the
// machine's other load changes from one run to the next: the ratio is the medians'), the
// broker's ceiling once, then latency.
say("warming up")
_ = bench.floorThroughput(300, tag: "warm")
_ = bench.bridgeThroughput(300, tag: "warm")
var floorRates: [Double] = [], bridgeRates: [Double] = [], floorTotals: [Double] = [], bridgeTotals: [Double] = []
var roundLines: [String] = []
for round in 1...options.rounds {
    var mark = CPUSample()
    let fetchedBefore = bench.floorConsumer!.fetchedSoFar
    let floorRate = bench.floorThroughput(options.count, tag: "run\(round)")
    let floorCPU = CPUSample.report(since: mark, messages: options.count)
    let fetchedAfter = bench.floorConsumer!.fetchedSoFar
    let floorBatch = Double(fetchedAfter.messages - fetchedBefore.messages) / Double(max(1, fetchedAfter.batches - fetchedBefore.batches))
    mark = CPUSample()
    let bridgeRate = bench.bridgeThroughput(options.count, tag: "run\(round)")
    let bridgeCPU = CPUSample.report(since: mark, messages: options.count)
    floorRates.append(floorRate)
    bridgeRates.append(bridgeRate)
    floorTotals.append(floorCPU.total)
    bridgeTotals.append(bridgeCPU.total)
    roundLines += [
        "round \(round): floor \(Int(floorRate.rounded())) msg/s, bridge \(Int(bridgeRate.rounded())) msg/s, ratio \(hundredths(bridgeRate / floorRate))",
        "  floor " + floorCPU.line.dropFirst(2) + "; \(Int(floorBatch.rounded())) messages per fetch",
        "  bridge path " + bridgeCPU.line.dropFirst(2),
    ]
    say("round \(round) of \(options.rounds) done")
}
_ = brokerCeiling(300, poster, tag: "warm")
let mark = CPUSample()
let brokerRate = brokerCeiling(options.count, poster, tag: "run")
let brokerCPU = CPUSample.report(since: mark, messages: options.count)
let floorLat = bench.floorLatency(options.latencyCount)
let bridgeLat = bench.bridgeLatency(options.latencyCount)

func hundredths(_ x: Double) -> String { String(Double(Int((x * 100).rounded())) / 100) }

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

func line(_ name: String, _ rate: Double, _ lat: [UInt64]) -> String {
    let r = String(Int(rate.rounded()))
    return "\(name)  \(r) msg/s   latency p50 \(Int(percentile(lat, 0.5))) µs  p99 \(Int(percentile(lat, 0.99))) µs"
}
let floorRate = median(floorRates), bridgeRate = median(bridgeRates)
say(
    "NATS inbound posts, \(options.count) messages × \(options.rounds) rounds, streams with \(options.replicas) replicas, \(options.latencyCount) one-at-a-time for latency, "
        + "observer: " + (options.observer == "thread" ? "answers on its reader thread" : "NotifBusClient (handler in a Task)"))
roundLines.forEach(say)
say(line("floor  (publish → consume → result to R3, its ack → ack; raw cnats): ", floorRate, floorLat))
say(line("bridge (NATS → bridge → broker → 1 observer → result → NATS):      ", bridgeRate, bridgeLat))
say("broker (posts pipelined as the bridge does → broker → 1 observer, no NATS): \(Int(brokerRate.rounded())) msg/s")
say(brokerCPU.line)
say(
    "throughput ratio bridge/floor (medians): \(hundredths(bridgeRate / floorRate)) (target ≥ 0.8); broker ceiling/floor: \(hundredths(brokerRate / floorRate))"
)
say(
    "CPU µs per message, every process above (medians): floor \(Int(median(floorTotals).rounded())), bridge path \(Int(median(bridgeTotals).rounded())); "
        + "their ratio, the bound on a saturated machine: \(hundredths(median(floorTotals) / median(bridgeTotals)))")
say(
    "latency overhead per message: p50 \(Int(percentile(bridgeLat, 0.5) - percentile(floorLat, 0.5))) µs, "
        + "p99 \(Int(percentile(bridgeLat, 0.99) - percentile(floorLat, 0.99))) µs")
exit(0)
