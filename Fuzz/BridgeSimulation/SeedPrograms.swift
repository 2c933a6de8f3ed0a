// Seed programs for the bridge's simulation: one scenario per way the bridge has lost or
// doubled messages, or could, written with the same bytes the simulation reads, so that the
// checked-in corpus (Fuzz/corpus/bridge, written by `fuzz-bridge --write-seeds`) never drifts
// from the reader. Programs the explorer found failing are kept in the corpus beside them.

public struct SeedProgram: Sendable {
    public let name: String
    public let program: [UInt8]
}

public enum SeedPrograms {
    /// The 8 seed bytes of the first workload that `wanted` accepts.
    static func workload(_ wanted: (Workload) -> Bool) -> [UInt8] {
        var seed: UInt64 = 1
        while !wanted(Workload(seed: seed)) { seed += 1 }
        return (0..<8).map { UInt8(truncatingIfNeeded: seed >> (8 * UInt64($0))) }
    }

    static func count(_ w: Workload, _ e: Expectation) -> Int { w.messages.filter { $0.expectation == e }.count }

    /// `n` progress steps that take the possible steps in a spread of orders.
    static func progress(_ n: Int, stride: Int = 37) -> [UInt8] { (0..<n).map { UInt8(($0 * stride + 11) % 176) } }

    static let many = workload { $0.messages.count >= 16 && count($0, .applied) >= 10 && $0.inflight >= 4 && $0.batch >= 3 }
    static let withDead = workload {
        count($0, .dead("too_large")) >= 1 && count($0, .dead("invalid_payload")) >= 1 && count($0, .dead("bad_json")) >= 1
    }
    static let withPuts = workload { w in
        w.messages.filter { $0.subject.contains(".put.slot") }.count >= 2 && count(w, .applied) >= 8 && w.inflight >= 4
    }
    static let withConflict = workload { count($0, .conflicting) >= 2 && count($0, .applied) >= 4 }

    public static let all: [SeedProgram] = [
        SeedProgram(name: "plain-run", program: many + progress(300)),
        SeedProgram(name: "bridge-killed-with-groups-at-the-broker", program: many + progress(60) + [Fault.killBridge] + progress(200)),
        SeedProgram(
            name: "bridge-killed-ten-times",
            program: many + (0..<10).flatMap { i in progress(12 + i, stride: 53) + [Fault.killBridge] } + progress(100)),
        SeedProgram(name: "broker-killed-mid-chain", program: many + progress(45, stride: 19) + [Fault.killBroker] + progress(200)),
        SeedProgram(name: "broker-stopped-with-posts-queued", program: many + progress(50, stride: 23) + [Fault.stopBroker] + progress(200)),
        SeedProgram(
            name: "disk-full-in-the-middle-of-a-group",
            program: withPuts + progress(30) + [Fault.toggleDisk] + progress(40) + [Fault.waitAckWait] + progress(20) + [Fault.toggleDisk]
                + progress(100)),
        SeedProgram(
            name: "disk-full-and-bridge-kills",
            program: withPuts + progress(20) + [Fault.toggleDisk] + progress(15) + [Fault.killBridge] + progress(25) + [Fault.killBridge]
                + progress(10) + [Fault.toggleDisk] + progress(30) + [Fault.killBridge] + progress(100)),
        SeedProgram(
            name: "lost-acks-then-redelivery",
            program: many + progress(40) + [Fault.loseAck] + progress(10) + [Fault.loseAck, Fault.waitAckWait] + progress(60)
                + [Fault.killBridge] + progress(60)),
        SeedProgram(
            name: "redelivered-while-held",
            program: many + progress(25) + [Fault.redeliver, Fault.redeliver] + progress(15) + [Fault.redeliver] + progress(120)),
        SeedProgram(name: "oversized-and-refused", program: withDead + progress(200)),
        SeedProgram(name: "same-id-other-body", program: withConflict + progress(80) + [Fault.killBroker] + progress(100)),
    ]
}
