// A seeded random number generator for the tests that explore at random: SplitMix64, so
// that a run, and the seed a failure prints, replays exactly. No state besides the seed.

/// SplitMix64 as a `RandomNumberGenerator`.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<n` by remainder: a little uneven for a large `n`, which exploring
    /// does not mind, and the same sequence for a seed on every platform and toolchain
    /// (unlike `Int.random(in:using:)`, whose algorithm is the standard library's to change).
    public mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}
