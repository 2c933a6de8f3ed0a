// fuzz-bridge: programs of steps and faults run by the NATS bridge's InboundMachine against
// models of JetStream and the broker (BridgeSimulation), checking at the end that every
// message took effect exactly once with its real result. Built with -sanitize=fuzzer it is a
// libFuzzer target; otherwise it replays corpus files, so the corpus runs in every build.
//
//     fuzz-bridge [FILE|DIR]...              replay programs (default Fuzz/corpus/bridge)
//     fuzz-bridge --explore N [--seed S]     run N random programs from seed S (else the time)
//     fuzz-bridge --crash-every-step         each seed program with a crash before each step
//     fuzz-bridge --write-seeds DIR          write the seed programs
import BridgeSimulation
import CFuzzerSupport
import FuzzDriver

#if canImport(Glibc)
import Glibc
#endif

@main
enum BridgeFuzzer {
    static let name = "fuzz-bridge"
    static let defaultCorpus = "Fuzz/corpus/bridge"
    /// A run's models and machine hold its messages, requests and results: a few hundred
    /// bytes per step at most, measured at under 1 MiB for a 4 KiB program.
    static let bytesPerInputByte = 1024
    static let allocationAllowance = 4 << 20

    static func main() {
        let arguments = CommandLine.arguments
        if arguments.count == 3 && arguments[1] == "--write-seeds" {
            exit(write(to: arguments[2]) ? 0 : 1)
        }
        if arguments.count >= 3 && arguments[1] == "--explore", let runs = Int(arguments[2]) {
            let seed = (arguments.count == 5 && arguments[3] == "--seed" ? UInt64(arguments[4]) : nil) ?? UInt64(time(nil))
            do {
                print("\(name): seed \(seed): " + (try Explorer.explore(seed: seed, runs: runs)).description)
                exit(0)
            } catch {
                print("\(name): seed \(seed): " + error.description)
                exit(1)
            }
        }
        if arguments.count == 2 && arguments[1] == "--crash-every-step" {
            var figures = ExplorerFigures()
            for seed in SeedPrograms.all {
                do { figures.merge(try Explorer.crashAtEveryStep(seed.program)) } catch {
                    print("\(name): \(seed.name), a crash before each step: " + error.description)
                    exit(1)
                }
            }
            print("\(name): every seed with a crash before each step: " + figures.description)
            exit(0)
        }
        let target: notifbus_fuzz_target = { data, size in
            BridgeFuzzer.check(UnsafeRawBufferPointer(start: data, count: size))
            return 0
        }
        FuzzDriver.run(name, defaultCorpus: defaultCorpus, inputs: "programs", target: target)
    }

    static func check(_ input: UnsafeRawBufferPointer) {
        // Longer programs add nothing a shorter one cannot reach, and cost time.
        let program = [UInt8](input.prefix(4096))
        FuzzDriver.boundingPeakHeap(
            size: program.count, bytesPerInputByte: bytesPerInputByte, allowance: allocationAllowance, input: "program"
        ) {
            do { _ = try Simulation.run(program) } catch { violation("\(error)") }
        }
    }

    static func write(to folder: String) -> Bool {
        mkdir(folder, 0o755)
        for seed in SeedPrograms.all {
            let path = folder + "/" + seed.name
            guard let file = fopen(path, "wb") else {
                print("\(name): cannot write \(path)")
                return false
            }
            _ = seed.program.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
            fclose(file)
        }
        print("\(name): wrote \(SeedPrograms.all.count) seed programs to \(folder)")
        return true
    }
}
