// The bridge's exactly-once machine against models of JetStream and the broker
// (Fuzz/BridgeSimulation): the checked-in programs (seeds, and what the explorer found), a
// kill of the bridge, of the broker and a broker stop before every step of the seeds, and a
// seeded random explorer. A failure prints the seed and the program that replays it.
import BridgeSimulation
import Foundation
import Testing

@Suite struct BridgeExplorerTests {
    /// Fuzz/corpus/bridge, found from this file's path (tests may run from any folder).
    static let corpus: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path + "/Fuzz/corpus/bridge"
    }()

    static func corpusFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: corpus)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
    }

    static func read(_ path: String) -> [UInt8] { FileManager.default.contents(atPath: path).map { [UInt8]($0) } ?? [] }

    @Test func theSeedProgramsAreCheckedIn() {
        let files = Set(BridgeExplorerTests.corpusFiles())
        for seed in SeedPrograms.all {
            #expect(files.contains(seed.name), "Fuzz/corpus/bridge/\(seed.name) is missing: run fuzz-bridge --write-seeds Fuzz/corpus/bridge")
            if files.contains(seed.name) {
                #expect(
                    BridgeExplorerTests.read(BridgeExplorerTests.corpus + "/" + seed.name) == seed.program, "\(seed.name) differs from SeedPrograms")
            }
        }
    }

    @Test func everyCorpusProgramHolds() {
        let files = BridgeExplorerTests.corpusFiles()
        #expect(files.count >= SeedPrograms.all.count)
        for name in files {
            let program = BridgeExplorerTests.read(BridgeExplorerTests.corpus + "/" + name)
            do { _ = try Explorer.replay(program) } catch { Issue.record("Fuzz/corpus/bridge/\(name): \(error)") }
        }
    }

    /// Each seed's first 60 steps, each with a kill of the bridge, of the broker and a broker
    /// stop before it (the run then goes on to its end); `fuzz-bridge --crash-every-step`
    /// (scripts/test.d/60-fuzz.sh) does every step of every seed in the release build.
    @Test(arguments: SeedPrograms.all.map(\.name))
    func aCrashBeforeEveryStepOfASeed(_ name: String) {
        let seed = SeedPrograms.all.first { $0.name == name }!
        do {
            let figures = try Explorer.crashAtEveryStep(Array(seed.program.prefix(8 + 60)))
            #expect(figures.totals.bridgeKills > 0 && figures.totals.brokerKills > 0)
        } catch {
            Issue.record("\(name): \(error)")
        }
    }

    /// FUZZ_SEED replays a run (as `fuzz-bridge --explore 1000 --seed S` does); FUZZ_RUNS sets
    /// how many programs.
    @Test func seededExplorer() {
        let seed = getenv("FUZZ_SEED").flatMap { UInt64(String(cString: $0)) } ?? UInt64.random(in: 1...UInt64.max)
        let runs = getenv("FUZZ_RUNS").flatMap { Int(String(cString: $0)) } ?? 1000
        do {
            let figures = try Explorer.explore(seed: seed, runs: runs)
            print("bridge explorer, seed \(seed): \(figures.description)")
            #expect(figures.totals.results > 0 && figures.totals.deadLetters > 0 && figures.totals.interrupted > 0)
        } catch {
            Issue.record("bridge explorer failed with seed \(seed) (FUZZ_SEED=\(seed) replays it): \(error)")
        }
    }
}
