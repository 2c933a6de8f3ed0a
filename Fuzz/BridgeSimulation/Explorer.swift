// Runs many simulated bridge runs: random programs from a seed (the seeded explorer that CI
// runs, printing its seed), every single crash position of a program (a kill of the bridge,
// of the broker, and a broker stop before each step), and the checked-in seed programs.
// Every run is deterministic: a seed or a program file replays it exactly.
import TestSupport

/// The program bytes of faults, as `Simulation.step` reads them.
public enum Fault {
    public static let killBridge: UInt8 = 204
    public static let killBroker: UInt8 = 212
    public static let stopBroker: UInt8 = 216
    public static let toggleDisk: UInt8 = 220
    public static let loseAck: UInt8 = 228
    public static let redeliver: UInt8 = 236
    public static let waitAckWait: UInt8 = 196
    /// Every fault byte range starts at one of these (see `Simulation.step`).
    static let all: [UInt8] = [176, 196, 204, 212, 216, 220, 228, 236]
    static let ends: [UInt8] = [196, 204, 212, 216, 220, 228, 236, 244]
}

public struct ExplorerFigures: Sendable {
    public var runs = 0
    public var totals = SimulationSummary()

    public init() {}

    /// Adds another set of runs' figures.
    public mutating func merge(_ other: ExplorerFigures) {
        add(other.totals)
        runs += other.runs - 1
    }

    mutating func add(_ s: SimulationSummary) {
        runs += 1
        totals.steps += s.steps
        totals.bridgeKills += s.bridgeKills
        totals.brokerKills += s.brokerKills
        totals.brokerStops += s.brokerStops
        totals.lostAcks += s.lostAcks
        totals.requests += s.requests
        totals.repeats += s.repeats
        totals.interrupted += s.interrupted
        totals.deadLetters += s.deadLetters
        totals.results += s.results
    }

    public var description: String {
        let t = totals
        return "\(runs) runs, \(t.steps) steps: \(t.bridgeKills) bridge kills, \(t.brokerKills) broker kills, \(t.brokerStops) broker stops, "
            + "\(t.lostAcks) lost acks; \(t.requests) requests (\(t.repeats) sent again), \(t.results) results (\(t.interrupted) interrupted), \(t.deadLetters) dead letters"
    }
}

/// A run that broke a promise: the program that replays it, and what broke.
public struct ExplorerFinding: Error, CustomStringConvertible {
    public let program: [UInt8]
    public let failure: SimulationFailure
    public var description: String {
        let hex = program.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        return failure.description + "\n  program (hex): " + hex
    }
}

public enum Explorer {
    /// A random program: 8 workload bytes, then `length` steps, a share `faultRate` of them faults.
    public static func program(_ random: inout SeededGenerator, length: Int, faultRate: Double) -> [UInt8] {
        var bytes = (0..<8).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let threshold = UInt64(faultRate * Double(UInt64.max >> 11)) << 11
        for _ in 0..<length {
            if random.next() < threshold {
                let kind = random.below(Fault.all.count)
                let low = Int(Fault.all[kind]), high = Int(Fault.ends[kind])
                bytes.append(UInt8(low + random.below(high - low)))
            } else {
                let b = random.below(176 + 12)
                bytes.append(UInt8(b < 176 ? b : b + 68))
            }
        }
        return bytes
    }

    /// Runs `runs` random programs derived from `seed`; throws the first one that fails.
    public static func explore(seed: UInt64, runs: Int) throws(ExplorerFinding) -> ExplorerFigures {
        var random = SeededGenerator(seed: seed)
        var figures = ExplorerFigures()
        let rates = [0.01, 0.04, 0.12, 0.3]
        for run in 0..<runs {
            let length = 20 + random.below(run % 3 == 0 ? 400 : 120)
            let program = program(&random, length: length, faultRate: rates[run % rates.count])
            figures.add(try replay(program))
        }
        return figures
    }

    /// Runs one program; a failure comes back with the program.
    public static func replay(_ program: [UInt8]) throws(ExplorerFinding) -> SimulationSummary {
        do { return try Simulation.run(program) } catch { throw ExplorerFinding(program: program, failure: error) }
    }

    /// Runs `program` once with each of `faults` inserted before each of its steps, and once
    /// after the last: a crash at every step.
    public static func crashAtEveryStep(_ program: [UInt8], faults: [UInt8] = [Fault.killBridge, Fault.killBroker, Fault.stopBroker])
        throws(ExplorerFinding) -> ExplorerFigures
    {
        var figures = ExplorerFigures()
        let head = Array(program.prefix(8)), steps = Array(program.dropFirst(8))
        for position in 0...steps.count {
            for fault in faults {
                figures.add(try replay(head + steps[..<position] + [fault] + steps[position...]))
            }
        }
        return figures
    }
}
