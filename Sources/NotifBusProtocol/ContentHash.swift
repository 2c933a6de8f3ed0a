// A 64-bit hash of bytes, the same on every machine and in every run: the fingerprint of a
// keyed request's target and body (§3.8), which the broker keeps on disk (the key table
// files its keys by a hash of its own, `OnceTable.keyHash`). Not a cryptographic hash: a
// client that sends two different bodies under one key is told so unless the two collide.

/// Hashes bytes a word at a time: each 8-byte little-endian word is mixed in with one
/// multiplication, the last few bytes as one more word, and the result is finished with
/// SplitMix64's finalizer.
public enum ContentHash {
    /// The hash of `bytes`, starting from `seed`.
    @inlinable
    public static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        var h = seed ^ UInt64(truncatingIfNeeded: bytes.count) &* 0xBF58_476D_1CE4_E5B9
        let n = bytes.count
        guard n > 0, let base = bytes.baseAddress else { return finish(h) }
        // Four words a turn, then two, then the odd one: the same words in the same order,
        // counted a quarter as often (chain3-once, whose payload has ten words: two a turn
        // saved 52 instructions per post, four 11 more).
        let words = n & ~7
        var p = 0
        while p &+ 32 <= words {
            h = mix(h, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: p, as: UInt64.self)))
            h = mix(h, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: p &+ 8, as: UInt64.self)))
            h = mix(h, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: p &+ 16, as: UInt64.self)))
            h = mix(h, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: p &+ 24, as: UInt64.self)))
            p &+= 32
        }
        if p &+ 16 <= words {
            h = mix(h, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: p, as: UInt64.self)))
            h = mix(h, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: p &+ 8, as: UInt64.self)))
            p &+= 16
        }
        if p < words {
            h = mix(h, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: p, as: UInt64.self)))
            p = words
        }
        let rest = n &- p
        guard rest > 0 else { return finish(h) }
        var w: UInt64 = 0
        if n >= 8 {
            // The last word, read where it ends with the buffer, its bytes already mixed in
            // shifted out.
            w = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)) &>> UInt64((8 &- rest) &* 8)
        } else if n >= 4 {
            // Two four-byte words, the second where the bytes end: where they overlap they
            // hold the same bytes in the same places.
            let low = UInt64(UInt32(littleEndian: base.loadUnaligned(as: UInt32.self)))
            let high = UInt64(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self)))
            w = low | high &<< UInt64((n &- 4) &* 8)
        } else {
            // One to three bytes: the first, the middle and the last, each in its place.
            w = UInt64(base.load(as: UInt8.self)) | UInt64(base.load(fromByteOffset: n &>> 1, as: UInt8.self)) &<< UInt64((n &>> 1) &* 8)
            w |= UInt64(base.load(fromByteOffset: n &- 1, as: UInt8.self)) &<< UInt64((n &- 1) &* 8)
        }
        return finish(mix(h, w))
    }

    /// The hash of a string's UTF-8.
    @inlinable
    public static func hash(_ text: String, seed: UInt64 = 0) -> UInt64 {
        if let h = text.utf8.withContiguousStorageIfAvailable({ hash(UnsafeRawBufferPointer($0), seed: seed) }) { return h }
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
    static func mix(_ h: UInt64, _ w: UInt64) -> UInt64 {
        let m = (h ^ w) &* 0x9E37_79B9_7F4A_7C15
        return m ^ (m &>> 29)
    }

    /// SplitMix64's finalizer: every bit of `x` moves about half of the result's bits.
    @inlinable @inline(__always)
    public static func finish(_ x: UInt64) -> UInt64 {
        var z = x
        z = (z ^ (z &>> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z &>> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z &>> 31)
    }
}
