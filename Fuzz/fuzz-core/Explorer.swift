import FuzzDriver
import NotifBusProtocol

// fuzz-core's seeded explorer: random programs from a seeded generator, run one after the
// other against the model, without libFuzzer (`fuzz-core --explore N [--seed S]`). Its
// programs lean on what coverage-guided mutation reaches slowly: requests with idempotency
// keys drawn from a few, repeated with the same or another body, writes held, failed and
// reported late, and restarts on what is on disk. A broken invariant stops it with the seed
// and the program's bytes, to be kept as a corpus seed.
#if canImport(Glibc)
import Glibc
#endif

/// SplitMix64: small, seeded, the same on every machine.
struct ExplorerRandom {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return ContentHash.finish(state)
    }

    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    mutating func byte() -> UInt8 { UInt8(truncatingIfNeeded: next()) }
}

enum Explorer {
    /// The program being run, printed when an invariant breaks.
    nonisolated(unsafe) static var current: (seed: UInt64, index: Int, program: [UInt8])? = nil

    /// Runs `count` programs from `seed`.
    static func run(count: Int, seed: UInt64) -> Never {
        FuzzDriver.beforeViolation = {
            guard let current = Explorer.current else { return }
            let hex = current.program.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
            let text = Array(
                "fuzz-core --explore: seed \(current.seed), program \(current.index) broke an invariant; its bytes (hex):\n\(hex)\n".utf8)
            _ = text.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        }
        var random = ExplorerRandom(state: seed)
        for index in 0..<count {
            let program = Explorer.program(&random)
            current = (seed, index, program)
            Session.run(program)
        }
        print("fuzz-core --explore: \(count) programs from seed \(seed), all invariants held")
        exit(0)
    }

    /// One program: a configuration byte, a few greeted connections, an observer, then
    /// traffic in which a third of the requests carry a key.
    static func program(_ r: inout ExplorerRandom) -> [UInt8] {
        var p = ProgramBuilder(configuration: r.byte())
        for _ in 0..<(2 + r.below(3)) { p.connect() }
        // Observers of "a" and "b" mostly, which the keyed posts below name, so that posts run
        // long enough for a restart to cut them.
        p.send(UInt8(r.below(4)), .subscribe, UInt8(r.below(3) == 0 ? 1 + r.below(31) : 3), UInt8(r.below(8)), UInt8(r.below(4)))
        let keyed: [Template] = [.post, .put, .take, .setCategories]
        for _ in 0..<(10 + r.below(70)) {
            let c = UInt8(r.below(6))
            switch r.below(20) {
            case 0..<8:
                // The key's nibble: 8 to 14 name one of three keys, 15 an empty one.
                let nibble = UInt8(r.below(3) == 0 ? r.below(8) : 8 + r.below(r.below(10) == 0 ? 8 : 7))
                // Mostly the one op and body a key's requests share (a repeat), else another
                // op or few operands (a conflict, or no key).
                let same = r.below(10) < 7
                let t = same ? [Template.post, .put, .take][Int(nibble % 3)] : keyed[r.below(keyed.count)]
                let (a, b, d) = same ? (nibble % 2, UInt8(2), nibble % 3) : (UInt8(r.below(3)), UInt8(r.below(6)), UInt8(r.below(3)))
                p.add(.send(connection: c, template: t.rawValue | nibble << 4, id: UInt8(r.below(200)), a: a, b: b, c: d))
            case 8..<11: p.send(c, Template(rawValue: UInt8(r.below(16)))!, id: UInt8(r.below(250)), r.byte(), r.byte(), r.byte())
            case 11, 12: p.answer(c, kind: UInt8(r.below(8)), pick: r.byte())
            case 13: p.add(.storage(flags: UInt8(r.below(8))))
            case 14: p.advance(ms: UInt8(r.below(80)), tick: r.below(2) == 0)
            case 15: p.connect(uid: UInt8(r.below(4) == 0 ? r.below(4) : 0))
            case 16: p.disconnect(c)
            case 17: p.add(.restart(flags: UInt8(r.below(2))))
            case 18: p.add(.tickAtDeadline)
            default: p.send(c, .status)
            }
        }
        return p.bytes
    }
}
