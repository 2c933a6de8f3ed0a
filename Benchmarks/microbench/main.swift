// Times the broker's per-frame work in one process, without sockets: decoding typical frames and
// running them through the core. Prints measurements and asserts nothing; it never opens a socket.
// A mode runs one operation N times, for instruction counts: see Benchmarks/callgrind.sh.
import Glibc
import NotifBusCore
import NotifBusProtocol

func now() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func fail(_ message: String) -> Never {
    let line = Array("notifbus-microbench: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(1)
}

let usage = """
    usage: notifbus-microbench [ROUNDS]
           notifbus-microbench MODE N

    Without a mode: decode time of typical frames and one invoke round trip through the core,
    ROUNDS times each (default 200000), in ns.
    Modes run one operation N times after a fixed warm-up, so that under
    `valgrind --tool=callgrind` (total(N) - total(0)) / N is the instructions per operation:
      core-invoke N   an invoke round trip through decode and core: invoke in, call out,
                      return in, reply out
      core-invoke-monitored N
                      core-invoke with a monitor attached: each frame also shown to it
      ping N          a ping in, its reply out
      chain3 N        a post through a chain of 3 observers: post in, event out, next in,
                      event out, next in, event out, complete in, result out
      chain3-once N   chain3 with an idempotency key of its own on every post (`once`),
                      the broker keeping 1024 keys, so that each post also forgets one
      validate64k N   decode (validate) a post frame with a 64 KiB payload; prints GiB/s
      tree-build N    build JSONValue trees of arrays of 5,000, 20,000 and 40,000 numbers,
                      N times each; prints the best time of each (Trees.swift)
      tree-growth N   build, copy, compare, hash, encode and free trees 10^3 to 10^5 wide
                      and 10^2 to 10^5 deep, N times each; prints the times and exits 1 if
                      one grows faster than linearly (Trees.swift)
    """

let arguments = #"{"emailId":"e-123456","thread":"t-99","title":"Lunch tomorrow?","n":[1,2,3,4,5]}"#
let frames: [(String, [UInt8])] = [
    ("ping", Array(#"{"op":"ping","id":12345}"#.utf8)),
    ("invoke", Array("{\"op\":\"invoke\",\"id\":12345,\"channel\":\"bench\",\"method\":\"echo\",\"arguments\":\(arguments)}".utf8)),
    ("return", Array("{\"op\":\"return\",\"call\":12345,\"result\":\(arguments)}".utf8)),
    ("post", Array("{\"op\":\"post\",\"id\":12345,\"name\":\"bench\",\"payload\":\(arguments)}".utf8)),
    ("next", Array(#"{"op":"next","event":12345}"#.utf8)),
]

/// Round trips every mode runs before the measured ones, the same for every N, so that they
/// cancel out of total(N) - total(0) and the measured ones see a warmed broker.
let warmupRounds = 1000

// MARK: Frames with a patchable integer

/// A frame body holding one decimal integer that is advanced in place, so that the measured
/// loop builds no frames: an increment touches the last digit or two, and only a carry past the
/// leading digit rebuilds the frame.
struct CountingFrame {
    let prefix: String
    let suffix: String
    private(set) var value: Int
    private(set) var bytes: [UInt8]
    private var digitsEnd: Int
    /// Where the digits start (the prefix's length).
    private let digitsStart: Int

    init(_ prefix: String, _ value: Int, _ suffix: String) {
        self.prefix = prefix
        self.suffix = suffix
        self.value = value
        bytes = Array("\(prefix)\(value)\(suffix)".utf8)
        digitsStart = prefix.utf8.count
        digitsEnd = digitsStart + String(value).utf8.count
    }

    /// Adds one to the number in place: through the array's buffer, so that the driver's own
    /// share of the measured instructions stays small (a dozen for a last digit below 9).
    mutating func increment() {
        value += 1
        let (first, end) = (digitsStart, digitsEnd)
        let done = bytes.withUnsafeMutableBufferPointer { b in
            var i = end &- 1
            while i >= first {
                if b[i] != UInt8(ascii: "9") {
                    b[i] &+= 1
                    return true
                }
                b[i] = UInt8(ascii: "0")
                i &-= 1
            }
            return false
        }
        if !done { self = CountingFrame(prefix, value, suffix) }
    }
}

// MARK: The core, fed frames as the transport would

/// One broker with greeted connections, fed frame bodies; counts the actions each feed produced.
struct CoreDriver: ~Copyable {
    var broker: Broker
    var actions: [BrokerAction] = []
    /// Feeds whose action count was not the expected one.
    var mismatches = 0

    init(connections: Int, configure: (inout BrokerConfiguration) -> Void = { _ in }) {
        var configuration = BrokerConfiguration()
        configuration.brokerUID = 0
        configure(&configuration)
        broker = Broker(configuration: configuration, now: 1)
        for c in 1...connections {
            broker.connect(c, credentials: PeerCredentials(pid: 1, uid: 0, gid: 0), now: 1, into: &actions)
            feed(Array(#"{"op":"hello","id":0,"protocol":1}"#.utf8), c, expecting: 1)
        }
    }

    /// Feeds one frame body from `c` and takes the actions it caused. The last feed's
    /// actions and frames are dropped first, as the transport does after writing them: each
    /// action taken from the end (as `BrokerServer.settle` takes them), which is cheaper
    /// than `removeAll(keepingCapacity:)` and its generic `replaceSubrange`.
    @inline(__always)
    mutating func feed(_ body: [UInt8], _ c: ConnectionID, expecting count: Int) {
        while actions.popLast() != nil {}
        broker.outputTaken()
        body.withUnsafeBytes { broker.receive($0, from: c, now: 2, into: &actions) }
        if actions.count != count { mismatches += 1 }
    }

    /// The text of the `index`th frame sent by the last feed, without its length prefix.
    func sentText(_ index: Int = 0) -> String {
        guard index < actions.count, case .send(_, let range) = actions[index] else { return "" }
        return String(decoding: broker.outputBytes(range).dropFirst(4), as: UTF8.self)
    }

    /// The integer after `"field":` in the `index`th frame sent by the last feed.
    func sentInteger(_ field: String, _ index: Int = 0) -> Int? {
        let text = Array(sentText(index).utf8)
        let key = Array("\"\(field)\":".utf8)
        guard text.count >= key.count else { return nil }
        for start in 0...(text.count - key.count) where Array(text[start..<(start + key.count)]) == key {
            let digits = text[(start + key.count)...].prefix(while: { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
            return Int(String(decoding: digits, as: UTF8.self))
        }
        return nil
    }

    /// Ends the run: every feed must have produced what it should, and the last reply must be
    /// `expected`'s kind; otherwise the figures would describe error paths.
    func verify(_ mode: String, lastSent expected: String, index: Int = 0) {
        if mismatches != 0 { fail("\(mode): \(mismatches) feeds produced an unexpected number of frames") }
        let text = sentText(index)
        if !text.contains(expected) { fail("\(mode): unexpected last frame: \(text.prefix(200))") }
    }
}

func runCoreInvoke(_ n: Int) { runCoreInvoke(n, monitored: false) }
func runCoreInvokeMonitored(_ n: Int) { runCoreInvoke(n, monitored: true) }

/// With `monitored`, a third connection is a monitor: each frame in and out is also shown
/// to it (`seen`), so each feed sends three frames.
func runCoreInvoke(_ n: Int, monitored: Bool) {
    var core = CoreDriver(connections: monitored ? 3 : 2)
    if monitored { core.feed(Array(#"{"op":"monitor","id":1}"#.utf8), 3, expecting: 1) }
    let perFeed = monitored ? 3 : 1
    let mode = monitored ? "core-invoke-monitored" : "core-invoke"
    core.feed(Array(#"{"op":"handle","id":1,"channel":"bench","method":"echo"}"#.utf8), 1, expecting: perFeed)
    let invoke = frames[1].1
    // Warm-up: learn the broker's call ids from the call frames.
    var call = 0
    // The call and the reply come after the `seen` of the frame that caused them.
    let own = monitored ? 1 : 0
    for _ in 0..<warmupRounds {
        core.feed(invoke, 2, expecting: perFeed)
        guard let id = core.sentInteger("call", own) else { fail("\(mode): no call id in \(core.sentText(own))") }
        call = id
        core.feed(Array("{\"op\":\"return\",\"call\":\(id),\"result\":\(arguments)}".utf8), 1, expecting: perFeed)
    }
    var ret = CountingFrame("{\"op\":\"return\",\"call\":", call + 1, ",\"result\":\(arguments)}")
    let start = now()
    for _ in 0..<n {
        core.feed(invoke, 2, expecting: perFeed)
        core.feed(ret.bytes, 1, expecting: perFeed)
        ret.increment()
    }
    let elapsed = now() - start
    core.verify(mode, lastSent: #""op":"reply""#, index: own)
    report(mode, n, elapsed, monitored ? "invoke round trips with a monitor (2 frames in, 6 out)" : "invoke round trips (2 frames in, 2 out)")
}

func runPing(_ n: Int) {
    var core = CoreDriver(connections: 1)
    let ping = frames[0].1
    for _ in 0..<warmupRounds { core.feed(ping, 1, expecting: 1) }
    let start = now()
    for _ in 0..<n { core.feed(ping, 1, expecting: 1) }
    let elapsed = now() - start
    core.verify("ping", lastSent: #""op":"reply""#)
    report("ping", n, elapsed, "pings (1 frame in, 1 out)")
}

func runChain3(_ n: Int) { runChain3(n, keyed: false) }
func runChain3Once(_ n: Int) { runChain3(n, keyed: true) }

func runChain3(_ n: Int, keyed: Bool) {
    // Connections 1-3 observe in priority order; 4 posts. With keys, the window holds 1024:
    // past it every post forgets the oldest key, as a broker in its steady state does.
    var core = CoreDriver(connections: 4) { $0.once.maxKeys = 1024 }
    for c in 1...3 {
        core.feed(Array("{\"op\":\"subscribe\",\"id\":1,\"events\":[\"bench\"],\"priority\":\(c)}".utf8), c, expecting: 1)
    }
    // A post with a key of its own: the key's number is advanced in place like an answer's.
    var post = CountingFrame(
        keyed ? "{\"op\":\"post\",\"id\":12345,\"name\":\"bench\",\"once\":\"bench-" : "{\"op\":\"post\",\"id\":", keyed ? 1 : 12345,
        keyed ? "\",\"payload\":\(arguments)}" : ",\"name\":\"bench\",\"payload\":\(arguments)}")
    func answers(_ event: Int) -> [CountingFrame] {
        [
            CountingFrame("{\"op\":\"next\",\"event\":", event, "}"),
            CountingFrame("{\"op\":\"next\",\"event\":", event, "}"),
            CountingFrame("{\"op\":\"complete\",\"event\":", event, ",\"value\":null}"),
        ]
    }
    var event = 0
    for _ in 0..<warmupRounds {
        core.feed(post.bytes, 4, expecting: 1)
        if keyed { post.increment() }
        guard let id = core.sentInteger("event") else { fail("chain3: no event id in \(core.sentText())") }
        event = id
        let a = answers(id)
        core.feed(a[0].bytes, 1, expecting: 1)
        core.feed(a[1].bytes, 2, expecting: 1)
        core.feed(a[2].bytes, 3, expecting: 1)
    }
    var a = answers(event + 1)
    let start = now()
    for _ in 0..<n {
        core.feed(post.bytes, 4, expecting: 1)
        if keyed { post.increment() }
        core.feed(a[0].bytes, 1, expecting: 1)
        core.feed(a[1].bytes, 2, expecting: 1)
        core.feed(a[2].bytes, 3, expecting: 1)
        a[0].increment()
        a[1].increment()
        a[2].increment()
    }
    let elapsed = now() - start
    core.verify(keyed ? "chain3-once" : "chain3", lastSent: #""outcome":"completed""#)
    report(keyed ? "chain3-once" : "chain3", n, elapsed, "posts through a chain of 3 (4 frames in, 4 out)")
}

/// A post whose payload is 64 KiB of varied JSON (objects, strings with escapes, numbers, arrays).
func payloadFrame64k() -> [UInt8] {
    var items: [String] = []
    var size = 0
    var i = 0
    while size < 64 * 1024 - 200 {
        let item =
            "{\"id\":\(i),\"subject\":\"Re: meeting \\\"\(i)\\\" \\u00e9t\u{e9}\",\"to\":[\"a\(i)@example.org\",\"b@example.org\"],\"size\":\(i * 37 % 100_000),\"score\":-\(i % 7).25e1,\"read\":\(i % 2 == 0),\"tag\":null}"
        items.append(item)
        size += item.utf8.count + 1
        i += 1
    }
    let payload = "{\"messages\":[\(items.joined(separator: ","))]}"
    return Array("{\"op\":\"post\",\"id\":1,\"name\":\"bench\",\"payload\":\(payload)}".utf8)
}

func runValidate64k(_ n: Int) {
    let frame = payloadFrame64k()
    var accepted = 0
    for _ in 0..<10 {
        frame.withUnsafeBytes { if case .decoded = MessageDecoder.decode($0) { accepted += 1 } }
    }
    if accepted != 10 { fail("validate64k: the 64 KiB frame was rejected") }
    let start = now()
    for _ in 0..<n {
        frame.withUnsafeBytes { if case .decoded = MessageDecoder.decode($0) { accepted += 1 } }
    }
    let elapsed = now() - start
    if accepted != 10 + n { fail("validate64k: the 64 KiB frame was rejected") }
    let gib = n == 0 || elapsed == 0 ? 0 : Double(frame.count) * Double(n) / Double(elapsed) * 1e9 / Double(1 << 30)
    let perFrame = n == 0 ? 0 : Double(elapsed) / Double(n) / 1000
    print("validate64k: \(n) decodes of a \(frame.count)-byte post frame: \(formatted(perFrame, 1)) us/frame, \(formatted(gib, 3)) GiB/s")
}

func report(_ mode: String, _ n: Int, _ elapsed: UInt64, _ what: String) {
    let ns = n == 0 ? 0 : Double(elapsed) / Double(n)
    print("\(mode): \(n) \(what): \(Int(ns)) ns each")
}

func formatted(_ v: Double, _ decimals: Int) -> String {
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let r = (v * scale).rounded() / scale
    return String(r)
}

// MARK: The default run: decode table and core invoke

func runDefault(rounds: Int) {
    for (name, frame) in frames {
        var sink = 0
        let start = now()
        for _ in 0..<rounds {
            frame.withUnsafeBytes { bytes in
                if case .decoded = MessageDecoder.decode(bytes) { sink &+= 1 }
            }
        }
        let ns = Double(now() - start) / Double(rounds)
        print("decode \(name.padding(8)) \(frame.count) bytes: \(Int(ns)) ns/frame (\(sink == rounds ? "ok" : "REJECTED"))")
    }
    var core = CoreDriver(connections: 2)
    core.feed(Array(#"{"op":"handle","id":1,"channel":"bench","method":"echo"}"#.utf8), 1, expecting: 1)
    let invoke = frames[1].1
    let returns = (0..<rounds).map { Array("{\"op\":\"return\",\"call\":\($0 + 1),\"result\":\(arguments)}".utf8) }
    let start = now()
    for i in 0..<rounds {
        core.feed(invoke, 2, expecting: 1)
        core.feed(returns[i], 1, expecting: 1)
    }
    let ns = Double(now() - start) / Double(rounds)
    print("core   invoke round trip (2 frames in, 2 out): \(Int(ns)) ns")
}

extension String {
    func padding(_ n: Int) -> String { count >= n ? self : self + String(repeating: " ", count: n - count) }
}

let argv = Array(CommandLine.arguments.dropFirst())
let modes: [String: (Int) -> Void] = [
    "core-invoke": runCoreInvoke, "core-invoke-monitored": runCoreInvokeMonitored, "ping": runPing, "chain3": runChain3, "chain3-once": runChain3Once,
    "validate64k": runValidate64k, "tree-build": runTreeBuild, "tree-growth": runTreeGrowth,
]
if argv.first == "-h" || argv.first == "--help" {
    print(usage)
} else if let mode = argv.first, let run = modes[mode] {
    guard argv.count == 2, let n = Int(argv[1]), n >= 0 else { fail("\(mode) wants one count N >= 0\n\(usage)") }
    run(n)
} else if argv.count <= 1, let rounds = argv.isEmpty ? 200_000 : Int(argv[0]), rounds > 0 {
    runDefault(rounds: rounds)
} else {
    fail("unknown arguments: \(argv.joined(separator: " "))\n\(usage)")
}
