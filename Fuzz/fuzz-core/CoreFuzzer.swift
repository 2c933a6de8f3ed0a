// fuzz-core: programs of client inputs against the broker's state machine (Session.swift),
// checking after every step what the protocol promises. Built with -sanitize=fuzzer it is a
// libFuzzer target; otherwise it replays corpus files, so the corpus runs in every build.
// `fuzz-core --write-seeds DIR` writes the seed programs of SeedPrograms.swift.
import CFuzzerSupport
import NotifBusProtocol

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
        // A few seeds first, so that the runtime's one-time caches (type metadata, protocol
        // conformances) are not charged to the first measured input; not while tracing.
        if !Session.tracing {
            for seed in SeedPrograms.all.prefix(3) { Session.run(seed.program) }
        }
        if notifbus_fuzzer_linked() == 1 {
            var argc = CommandLine.argc
            var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
            exit(notifbus_fuzzer_run(&argc, &argv, target))
        }
        var paths = arguments.dropFirst().filter { !$0.hasPrefix("-") }
        if paths.isEmpty { paths = [defaultCorpus] }
        var cPaths = paths.map { strdup($0) }
        let ran = notifbus_replay_paths(Int32(cPaths.count), &cPaths, target)
        cPaths.forEach { free($0) }
        guard ran >= 0 else { exit(1) }
        print("\(name): libFuzzer not linked in; replayed \(ran) programs from \(paths.joined(separator: " ")), all invariants held")
        exit(0)
    }

    static func check(_ input: UnsafeRawBufferPointer) {
        let measuring = notifbus_alloc_tracking_available() == 1
        if measuring { notifbus_alloc_tracking_reset() }
        Session.run([UInt8](input))
        if measuring {
            let peak = notifbus_alloc_peak_bytes()
            let bound = allocationAllowance + bytesPerInputByte * input.count
            if peak > bound { violation("\(peak) bytes live at the peak for a \(input.count)-byte program (bound \(bound))") }
        }
    }
}
