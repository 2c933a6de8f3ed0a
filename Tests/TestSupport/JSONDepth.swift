// Measuring how deeply a JSON tree nests, for the tests that send user data nested far beyond
// what a recursive walk would survive. It only reads the tree.
import NotifBusProtocol

/// How deeply `value` nests (a scalar is 0, `[0]` is 1), counted without recursion.
public func depth(of value: JSONValue) -> Int {
    var deepest = 0
    var stack: [(JSONValue, Int)] = [(value, 0)]
    while let (v, d) = stack.popLast() {
        deepest = max(deepest, d)
        switch v {
        case .array(let a): for e in a { stack.append((e, d + 1)) }
        case .object(let o): for e in o.values { stack.append((e, d + 1)) }
        default: break
        }
    }
    return deepest
}
