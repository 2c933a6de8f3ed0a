// Editing a JSON tree as an application does, for the tests and benchmarks of trees nested
// far beyond what recursion survives: every step is a loop.
import NotifBusProtocol

/// A copy of `value` whose innermost first element or member (the least key) is
/// `"changed"`, made by copy on write along the path: every container on the way is copied,
/// the original keeps its own.
public func changedCopy(of value: JSONValue) -> JSONValue {
    var path: [JSONValue] = []
    var node = value
    descending: while true {
        switch node {
        case .array(let a) where !a.isEmpty:
            path.append(node)
            node = a[0]
        case .object(let o) where !o.isEmpty:
            path.append(node)
            node = o[o.keys.min()!]!
        default:
            break descending
        }
    }
    var rebuilt: JSONValue = "changed"
    while let parent = path.popLast() {
        switch parent {
        case .array(var a):
            a[0] = rebuilt
            rebuilt = .array(a)
        case .object(var o):
            o[o.keys.min()!] = rebuilt
            rebuilt = .object(o)
        default:
            break
        }
    }
    return rebuilt
}
