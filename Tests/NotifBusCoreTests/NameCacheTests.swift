// NameCache, a speed trick of the post path, held to the plain way it replaces: whatever the
// run of names (repeated, changing, of every length around a word, invalid UTF-8 among them),
// each text is what String(decoding:as:) makes of its bytes, and each hash, asked for or
// not, what ContentHash makes of them.
import NotifBusProtocol
import TestSupport
import Testing

@testable import NotifBusCore

struct NameCacheTests {
    @Test(arguments: UInt64(1)...8) func eachTextAndHashAreThoseOfItsBytes(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        var cache = NameCache()
        // A few names, so that runs of one name and returns to an older one both happen;
        // names that differ only in their last byte, or in one byte of a later word.
        var names: [[UInt8]] = (0..<6).map { _ in
            (0..<Int.random(in: 0...20, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        }
        names.append(Array("willPresent".utf8))
        names.append(Array("willPresenu".utf8))
        names.append(Array("didReceive-0123456789".utf8))
        names.append(Array("didReceive-0123456788".utf8))
        for step in 0..<2_000 {
            let name = names.randomElement(using: &rng)!
            let text = name.withUnsafeBytes { cache.text(of: $0) }
            #expect(text == String(decoding: name, as: UTF8.self), "seed \(seed) step \(step): \(name)")
            if Bool.random(using: &rng) {
                #expect(cache.hash() == name.withUnsafeBytes { ContentHash.hash($0) }, "seed \(seed) step \(step): \(name)")
            }
        }
    }
}
