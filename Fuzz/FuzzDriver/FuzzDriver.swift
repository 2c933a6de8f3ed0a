// What both fuzz programs do around their checks: hand the target to libFuzzer when it is
// linked in, otherwise replay corpus files; bound the peak heap of one input; stop on a
// broken invariant. It knows nothing of what an input means: each program's target decides.
import CFuzzerSupport

#if canImport(Glibc)
import Glibc
#endif

/// The main loop and the per-input heap bound shared by fuzz-decoder and fuzz-core.
public enum FuzzDriver {
    /// Runs `target` under libFuzzer when it is linked in (with the program's own
    /// arguments); otherwise once on every corpus file named in the arguments, or found in
    /// `defaultCorpus` when none is named, then prints how many `inputs` ran. Exits 0 when all
    /// ran and 1 when a path could not be read; a broken invariant stops it before that.
    public static func run(_ name: String, defaultCorpus: String, inputs: String, target: notifbus_fuzz_target) -> Never {
        if notifbus_fuzzer_linked() == 1 {
            var argc = CommandLine.argc
            var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
            exit(notifbus_fuzzer_run(&argc, &argv, target))
        }
        var paths = CommandLine.arguments.dropFirst().filter { !$0.hasPrefix("-") }
        if paths.isEmpty { paths = [defaultCorpus] }
        var cPaths = paths.map { strdup($0) }
        let ran = notifbus_replay_paths(Int32(cPaths.count), &cPaths, target)
        cPaths.forEach { free($0) }
        guard ran >= 0 else { exit(1) }
        print("\(name): libFuzzer not linked in; replayed \(ran) \(inputs) from \(paths.joined(separator: " ")), all invariants held")
        exit(0)
    }

    /// Runs `body` on one `size`-byte input (an `input`, for the message) and, where a
    /// sanitizer lets allocations be measured, stops when the peak live heap during it passed
    /// `allowance + bytesPerInputByte * size`.
    public static func boundingPeakHeap(
        size: Int, bytesPerInputByte: Int, allowance: Int, input: String, _ body: () -> Void
    ) {
        let measuring = notifbus_alloc_tracking_available() == 1
        if measuring { notifbus_alloc_tracking_reset() }
        body()
        if measuring {
            let peak = notifbus_alloc_peak_bytes()
            let bound = allowance + bytesPerInputByte * size
            if peak > bound { violation("\(peak) bytes live at the peak for a \(size)-byte \(input) (bound \(bound))") }
        }
    }
}

/// Reports a broken invariant and stops; libFuzzer keeps the input as a crash artifact.
public func violation(_ message: String, file: StaticString = #fileID, line: UInt = #line) -> Never {
    FuzzDriver.beforeViolation?()
    fatalError("invariant broken: \(message)", file: file, line: line)
}

extension FuzzDriver {
    /// Called before a broken invariant stops the program: a driver of its own (a seeded
    /// explorer) says there which input it was.
    nonisolated(unsafe) public static var beforeViolation: (() -> Void)? = nil
}
