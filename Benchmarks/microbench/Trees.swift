// How the JSONValue tree operations grow with the input: building (`init(parsingAnyDepth:)`),
// copying with a change, comparing, hashing, encoding and freeing arrays and objects of
// 10^3 to 10^5 elements and nestings 10^2 to 10^5 deep. Prints the times; the one check is
// loose and on ratios only: the time per element at the largest size may be at most
// `growthSlack` times that at the smallest (a quadratic operation is 100 times and more).
import Glibc
import NotifBusProtocol
import TestSupport

/// The time per element at 10^5 against 10^3 (or 10^2 deep) that still counts as linear.
let growthSlack = 12.0

/// The build time of an array of 5,000, 20,000 and 40,000 numbers (`1e9`), N times each:
/// the figures of the quadratic tree builder, kept comparable.
func runTreeBuild(_ n: Int) {
    for size in [5_000, 20_000, 40_000] {
        let text = Array(("[" + Array(repeating: "1e9", count: size).joined(separator: ",") + "]").utf8)
        var best = UInt64.max
        for _ in 0..<max(n, 1) {
            let start = now()
            guard let value = try? JSONValue(parsingAnyDepth: text), value.arrayValue?.count == size else {
                fail("tree-build: the array of \(size) did not parse")
            }
            best = min(best, now() - start)
        }
        print("tree-build: an array of \(size) numbers: \(formatted(Double(best) / 1e6, 2)) ms (best of \(max(n, 1)))")
    }
}

/// One shape of tree at a size: its text.
struct TreeShape: Sendable {
    let name: String
    let sizes: [Int]
    let text: @Sendable (Int) -> [UInt8]
}

let treeShapes = [
    TreeShape(name: "array of numbers", sizes: [1_000, 10_000, 100_000]) { n in
        Array(("[" + (0..<n).map { String($0) }.joined(separator: ",") + "]").utf8)
    },
    TreeShape(name: "object of members", sizes: [1_000, 10_000, 100_000]) { n in
        Array(("{" + (0..<n).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + "}").utf8)
    },
    TreeShape(name: "arrays nested", sizes: [100, 1_000, 10_000, 100_000]) { n in
        Array((String(repeating: "[", count: n) + "1" + String(repeating: "]", count: n)).utf8)
    },
    TreeShape(name: "objects nested", sizes: [100, 1_000, 10_000, 100_000]) { n in
        Array((String(repeating: "{\"a\":", count: n) + "1" + String(repeating: "}", count: n)).utf8)
    },
]

/// Every operation on every shape at every size, N rounds each (the best is kept); exits 1
/// when one grows faster than linearly by more than `growthSlack`.
func runTreeGrowth(_ n: Int) {
    let rounds = max(n, 1)
    var worst = 0.0
    for shape in treeShapes {
        var perElement: [String: [Double]] = [:]
        for size in shape.sizes {
            let text = shape.text(size)
            var best: [String: UInt64] = [:]
            func time(_ op: String, _ body: () -> Void) {
                let start = now()
                body()
                best[op] = min(best[op] ?? .max, now() - start)
            }
            for _ in 0..<rounds {
                var built: JSONValue? = nil
                var twin: JSONValue? = nil
                time("build") { built = try? JSONValue(parsingAnyDepth: text) }
                twin = try? JSONValue(parsingAnyDepth: text)
                guard var value = built, let other = twin else { fail("tree-growth: \(shape.name) \(size) did not parse") }
                time("compare") { if value != other { fail("tree-growth: \(shape.name) \(size) differs from itself") } }
                var hasher = Hasher()
                time("hash") { value.hash(into: &hasher) }
                time("encode") { if value.encoded.count != text.count { fail("tree-growth: \(shape.name) \(size) encodes differently") } }
                var copy = value
                time("copy") { copy = changedCopy(of: copy) }
                if copy == value { fail("tree-growth: \(shape.name) \(size): the changed copy equals the original") }
                time("free") {
                    value = .null
                    built = nil
                }
                _ = hasher.finalize()
                withExtendedLifetime((copy, other)) {}
            }
            for (op, ns) in best.sorted(by: { $0.key < $1.key }) {
                perElement[op, default: []].append(Double(ns) / Double(size))
            }
            let line = best.sorted { $0.key < $1.key }.map { "\($0.key) \(formatted(Double($0.value) / 1e6, 2))" }.joined(separator: ", ")
            print("tree-growth: \(shape.name) \(size): \(line) (ms, best of \(rounds))")
        }
        for (op, times) in perElement.sorted(by: { $0.key < $1.key }) {
            guard let first = times.first, let last = times.last, first > 0 else { continue }
            let ratio = last / first
            worst = max(worst, ratio)
            print("tree-growth: \(shape.name): \(op) per element at \(shape.sizes.last!) / at \(shape.sizes.first!): \(formatted(ratio, 2))")
        }
    }
    print("tree-growth: the largest ratio is \(formatted(worst, 2)) (linear: about 1; allowed: \(growthSlack))")
    if worst > growthSlack { fail("tree-growth: an operation grows faster than linearly (ratio \(formatted(worst, 2)))") }
}
