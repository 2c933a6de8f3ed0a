import NotifBusProtocol
import TestSupport
import Testing

// ContentHash is a keyed request's fingerprint on disk (§3.8): the same on every machine and
// in every run. Held to a plain reference (a byte at a time into zero-padded little-endian
// words) at every length up to 80 bytes, and to values written down, so that a change of
// the function, which would turn every journal's repeats into conflicts, cannot pass.
struct ContentHashTests {
    /// The definition: the count mixed into the seed, each 8-byte little-endian word (the
    /// last one zero-padded) mixed in with one multiplication, SplitMix64's finalizer.
    static func reference(_ bytes: [UInt8], seed: UInt64 = 0) -> UInt64 {
        func mix(_ h: UInt64, _ w: UInt64) -> UInt64 {
            let m = (h ^ w) &* 0x9E37_79B9_7F4A_7C15
            return m ^ (m >> 29)
        }
        func finish(_ x: UInt64) -> UInt64 {
            var z = x
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        var h = seed ^ (UInt64(bytes.count) &* 0xBF58_476D_1CE4_E5B9)
        var i = 0
        while i < bytes.count {
            var w: UInt64 = 0
            for k in 0..<8 where i + k < bytes.count { w |= UInt64(bytes[i + k]) << (8 * UInt64(k)) }
            h = mix(h, w)
            i += 8
        }
        return finish(h)
    }

    @Test(arguments: UInt64(1)...8) func everyLengthHashesAsTheReference(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        for n in 0...80 {
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let h = bytes.withUnsafeBytes { ContentHash.hash($0, seed: seed) }
            #expect(h == ContentHashTests.reference(bytes, seed: seed), "seed \(seed), \(n) bytes")
        }
    }

    /// Values on disk in journals: they never change (worked out apart from Swift, by the
    /// same definition).
    @Test func knownValues() {
        let pinned: [(String, UInt64, UInt64)] = [
            ("", 0, 0x0000_0000_0000_0000),
            ("a", 0, 0xC4BB_6063_EFAB_D8B1),
            ("bench", 0, 0x513F_48E9_5619_0BC0),
            ("bench", 7, 0x9871_2336_F0FE_1199),
            ("bench-12345", 0, 0x9F1C_26EB_2512_A615),
            ("willPresent", 0, 0xB71C_D0D6_403E_A85B),
            (#"{"emailId":"e-123456","thread":"t-99","title":"Lunch tomorrow?","n":[1,2,3,4,5]}"#, 0, 0xBEA1_D980_99FC_B6C7),
        ]
        for (text, seed, value) in pinned { #expect(ContentHash.hash(text, seed: seed) == value, "\(text), seed \(seed)") }
    }
}
