// Times the broker's per-frame work in one process, without sockets: decoding typical
// frames and running them through the core. Prints nanoseconds per frame; asserts nothing.
// Use it with callgrind to count instructions: valgrind --tool=callgrind notifbus-microbench
import Glibc
import NotifBusCore
import NotifBusProtocol

func now() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

let arguments = #"{"emailId":"e-123456","thread":"t-99","title":"Lunch tomorrow?","n":[1,2,3,4,5]}"#
let frames: [(String, [UInt8])] = [
    ("ping", Array(#"{"op":"ping","id":12345}"#.utf8)),
    ("invoke", Array("{\"op\":\"invoke\",\"id\":12345,\"channel\":\"bench\",\"method\":\"echo\",\"arguments\":\(arguments)}".utf8)),
    ("return", Array("{\"op\":\"return\",\"call\":12345,\"result\":\(arguments)}".utf8)),
    ("post", Array("{\"op\":\"post\",\"id\":12345,\"name\":\"bench\",\"payload\":\(arguments)}".utf8)),
    ("next", Array(#"{"op":"next","event":12345}"#.utf8)),
]
let rounds = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 200_000

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

/// A whole invoke through the core: invoker -> call -> return -> reply.
struct CoreBench {
    var broker: Broker
    var actions: [BrokerAction] = []

    init() {
        var configuration = BrokerConfiguration()
        configuration.brokerUID = 0
        broker = Broker(configuration: configuration, now: 1)
    }

    mutating func feed(_ text: [UInt8], _ c: ConnectionID) {
        text.withUnsafeBytes { broker.receive($0, from: c, now: 2) }
        broker.takeActions(swappingWith: &actions)
    }

    mutating func run(rounds: Int) -> Double {
        for c in 1...2 {
            broker.connect(c, credentials: PeerCredentials(pid: 1, uid: 0, gid: 0), now: 1)
            feed(Array(#"{"op":"hello","id":0,"protocol":1}"#.utf8), c)
        }
        feed(Array(#"{"op":"handle","id":1,"channel":"bench","method":"echo"}"#.utf8), 1)
        let invoke = frames[1].1
        let returns = (0..<rounds).map { Array("{\"op\":\"return\",\"call\":\($0 + 1),\"result\":\(arguments)}".utf8) }
        let start = now()
        for i in 0..<rounds {
            feed(invoke, 2)
            feed(returns[i], 1)
        }
        return Double(now() - start) / Double(rounds)
    }
}
var bench = CoreBench()
print("core   invoke round trip (2 frames in, 2 out): \(Int(bench.run(rounds: rounds))) ns")

extension String {
    func padding(_ n: Int) -> String { count >= n ? self : self + String(repeating: " ", count: n - count) }
}
