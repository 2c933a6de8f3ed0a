// Fixture for scripts/lib/layering.py --self-test: the protocol layer opening a socket and
// reading clocks. Never compiled.
import Glibc

func connectSomewhere() -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    let start = ContinuousClock.now
    _ = start
    return memcmp(nil, nil, 0) == 0 ? fd : -1
}

struct Writer {
    // A method of the file's own named like a syscall is not the syscall.
    mutating func write(_ bytes: [UInt8]) {}
    mutating func flush() { write([1]) }
}
