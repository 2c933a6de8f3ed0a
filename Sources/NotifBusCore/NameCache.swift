// The text of the last post's name, kept beside its bytes: most posts repeat the name of the
// one before, and a stream of them then makes its String once instead of once per post
// (UTF-8 validation and a copy, about 180 instructions for a short name); so is its hash,
// once a keyed post asks for it (chain3-once: 48 instructions per post). A speed trick held
// to `String(decoding:as:)` and `ContentHash` by NameCacheTests.
import NotifBusProtocol

/// The last name asked for, as bytes and as text, and its hash once asked for.
struct NameCache {
    private var bytes: [UInt8] = []
    private var text = ""
    private var nameHash: UInt64? = nil

    /// The text of `utf8`: the kept one when the bytes are the same, otherwise made and kept.
    @inline(__always)
    mutating func text(of utf8: UnsafeRawBufferPointer) -> String {
        if bytes.withUnsafeBytes({ JSONName(inPlace: $0).hasUTF8(utf8) }) { return text }
        return remember(utf8)
    }

    @inline(never)
    private mutating func remember(_ utf8: UnsafeRawBufferPointer) -> String {
        bytes = Array(utf8)
        text = String(decoding: utf8, as: UTF8.self)
        nameHash = nil
        return text
    }

    /// The `ContentHash` (unseeded) of the name `text(of:)` was last asked for: the target's
    /// part of a keyed post's fingerprint (`Broker.fingerprint`).
    @inline(__always)
    mutating func hash() -> UInt64 {
        if let nameHash { return nameHash }
        return rememberHash()
    }

    @inline(never)
    private mutating func rememberHash() -> UInt64 {
        let h = bytes.withUnsafeBytes { ContentHash.hash($0) }
        nameHash = h
        return h
    }
}
