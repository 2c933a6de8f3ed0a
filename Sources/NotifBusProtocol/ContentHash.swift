// A 64-bit hash of bytes, the same on every machine and in every run: the fingerprint of a
// keyed request's target and body (§3.8), which the broker keeps on disk, and the index of
// its key table (with a seed of the run's own). Not a cryptographic hash: a client that
// sends two different bodies under one key is told so unless the two collide.

/// Hashes bytes a word at a time: each 8-byte little-endian word is mixed in with one
/// multiplication, and the result is finished with SplitMix64's finalizer.
public enum ContentHash {
    /// The hash of `bytes`, starting from `seed`.
    @inlinable
    public static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        var h = seed ^ UInt64(truncatingIfNeeded: bytes.count) &* 0xBF58_476D_1CE4_E5B9
        guard let base = bytes.baseAddress else { return finish(h) }
        let n = bytes.count
        var p = 0
        while p &+ 8 <= n {
            let w = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: p, as: UInt64.self))
            h = (h ^ w) &* 0x9E37_79B9_7F4A_7C15
            h ^= h &>> 29
            p &+= 8
        }
        if p < n {
            var w: UInt64 = 0
            var shift: UInt64 = 0
            while p < n {
                w |= UInt64(base.load(fromByteOffset: p, as: UInt8.self)) &<< shift
                shift &+= 8
                p &+= 1
            }
            h = (h ^ w) &* 0x9E37_79B9_7F4A_7C15
            h ^= h &>> 29
        }
        return finish(h)
    }

    /// The hash of a string's UTF-8.
    @inlinable
    public static func hash(_ text: String, seed: UInt64 = 0) -> UInt64 {
        var text = text
        return text.withUTF8 { hash(UnsafeRawBufferPointer($0), seed: seed) }
    }

    /// The hash of raw JSON bytes, or of no bytes for nil.
    @inlinable
    public static func hash(_ raw: RawJSON?, seed: UInt64 = 0) -> UInt64 {
        guard let raw else { return hash(UnsafeRawBufferPointer(start: nil, count: 0), seed: seed) }
        return raw.withUnsafeBytes { hash($0, seed: seed) }
    }

    /// Two hashes combined, in order: the fingerprint of a target and a body.
    @inlinable
    public static func combine(_ a: UInt64, _ b: UInt64) -> UInt64 {
        finish(a &* 0x9E37_79B9_7F4A_7C15 ^ b)
    }

    @usableFromInline @inline(__always)
    static func finish(_ x: UInt64) -> UInt64 {
        var z = x
        z = (z ^ (z &>> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z &>> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z &>> 31)
    }
}
