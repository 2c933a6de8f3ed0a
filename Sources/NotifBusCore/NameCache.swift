// The text of the last post's name, kept beside its bytes: most posts repeat the name of the
// one before, and a stream of them then makes its String once instead of once per post
// (UTF-8 validation and a copy, about 180 instructions for a short name). A speed trick held
// to `String(decoding:as:)` by NameCacheTests.

/// The last name asked for, as bytes and as text.
struct NameCache {
    private var bytes: [UInt8] = []
    private var text = ""

    /// The text of `utf8`: the kept one when the bytes are the same, otherwise made and kept.
    @inline(__always)
    mutating func text(of utf8: UnsafeRawBufferPointer) -> String {
        if utf8.count == bytes.count && bytes.withUnsafeBytes({ NameCache.same($0, utf8) }) { return text }
        return remember(utf8)
    }

    @inline(never)
    private mutating func remember(_ utf8: UnsafeRawBufferPointer) -> String {
        bytes = Array(utf8)
        text = String(decoding: utf8, as: UTF8.self)
        return text
    }

    /// Whether two runs of bytes of the same length hold the same bytes, a word at a time.
    @inline(__always)
    static func same(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        let n = a.count
        guard n > 0, let p = a.baseAddress, let q = b.baseAddress else { return true }
        var i = 0
        while i &+ 8 <= n {
            if p.loadUnaligned(fromByteOffset: i, as: UInt64.self) != q.loadUnaligned(fromByteOffset: i, as: UInt64.self) { return false }
            i &+= 8
        }
        while i < n {
            if p.load(fromByteOffset: i, as: UInt8.self) != q.load(fromByteOffset: i, as: UInt8.self) { return false }
            i &+= 1
        }
        return true
    }
}
