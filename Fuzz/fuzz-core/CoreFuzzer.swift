// fuzz-core: programs of client inputs against the broker's state machine (Session.swift),
// checking after every step what the protocol promises. Built with -sanitize=fuzzer it is a
// libFuzzer target; otherwise it replays corpus files, so the corpus runs in every build.
// `fuzz-core --write-seeds DIR` writes the seed programs of SeedPrograms.swift;
// `fuzz-core --explore N [--seed S]` runs N programs of the seeded explorer (Explorer.swift).
import CFuzzerSupport
import FuzzDriver

#if canImport(Glibc)
import Glibc
#endif

@main
enum CoreFuzzer {
    static let name = "fuzz-core"
    static let defaultCorpus = "Fuzz/corpus/core"

    /// Peak live heap during one program may be this many times its size: every instruction
    /// may add an observer, and a status lists them all (a program of nothing but
    /// subscribes, the worst found, measured at about 300)...
    static let bytesPerInputByte = 1024
    /// ...plus this much for the broker, the model and their tables.
    static let allocationAllowance = 256 * 1024

    static func main() {
        let target: notifbus_fuzz_target = { data, size in
            CoreFuzzer.check(UnsafeRawBufferPointer(start: data, count: size))
            return 0
        }
        let arguments = CommandLine.arguments
        if arguments.count == 3 && arguments[1] == "--write-seeds" {
            exit(SeedPrograms.write(to: arguments[2]) ? 0 : 1)
        }
        if arguments.count >= 3 && arguments[1] == "--explore", let count = Int(arguments[2]) {
            let seed = arguments.count == 5 && arguments[3] == "--seed" ? UInt64(arguments[4]) : nil
            Explorer.run(count: count, seed: seed ?? UInt64(time(nil)))
        }
        // A few seeds first, so that the runtime's one-time caches (type metadata, protocol
        // conformances) are not charged to the first measured input; not while tracing.
        if !Session.tracing {
            for seed in SeedPrograms.all.prefix(3) { Session.run(seed.program) }
        }
        FuzzDriver.run(name, defaultCorpus: defaultCorpus, inputs: "programs", target: target)
    }

    static func check(_ input: UnsafeRawBufferPointer) {
        FuzzDriver.boundingPeakHeap(
            size: input.count, bytesPerInputByte: bytesPerInputByte, allowance: allocationAllowance, input: "program"
        ) {
            Session.run([UInt8](input))
        }
    }
}
