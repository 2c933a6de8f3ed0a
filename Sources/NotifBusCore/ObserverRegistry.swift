// The observers and their unique keys: who listens to which event names, and each name's
// chain in order (priority, then subscription order). It only keeps records; sending
// `evicted` and ending a running hop are the broker's part.
import NotifBusProtocol

struct ObserverRecord {
    let id: Int
    let client: ConnectionID
    let events: [String]
    let priority: Int32
    let key: String?
}

/// Observers by id, chains by event name, and which observer holds each key.
struct ObserverRegistry {
    private(set) var records = IDTable<ObserverRecord>()
    /// Per event name, observer ids in chain order. Ids grow with subscription order, so
    /// (priority, id) is the chain order.
    private var chains: [String: [Int]] = [:]
    private var keys: [String: Int] = [:]
    private var nextID = 1
    /// The last name looked up and its chain then: a post of the same name as the one
    /// before (the common case) finds its chain without hashing the name. Any change to
    /// the chains forgets it.
    private var lastLookup: (name: String, chain: [Int])? = nil

    var count: Int { records.count }

    subscript(id: Int) -> ObserverRecord? { records[id] }

    /// The connection of observer `id`, read without copying its record.
    @inline(__always)
    func client(of id: Int) -> ConnectionID? { records.read(id) { $0.client } }

    /// The observer holding `key`, if any.
    func holder(ofKey key: String) -> Int? { keys[key] }

    /// The chain of `name` now: a copy, so that later changes do not affect an event that
    /// is walking it.
    mutating func chain(for name: String) -> [Int] {
        if let last = lastLookup, last.name == name { return last.chain }
        let chain = chains[name] ?? []
        lastLookup = (name, chain)
        return chain
    }

    /// The live observer a wire id (`"o12"`) names.
    func find(_ text: String) -> Int? {
        guard let id = parseTaggedID(text, tag: "o"), records[id] != nil else { return nil }
        return id
    }

    /// Adds an observer of `client`. If `key` was held, the holder is removed and returned.
    mutating func add(client: ConnectionID, events: [String], priority: Int32, key: String?) -> (id: Int, replaced: ObserverRecord?) {
        let id = nextID
        nextID += 1
        var replaced: ObserverRecord? = nil
        if let key, let old = keys[key] { replaced = remove(old) }
        records.insert(id, ObserverRecord(id: id, client: client, events: events, priority: priority, key: key))
        if let key { keys[key] = id }
        for name in events { insert(id, priority, into: name) }
        return (id, replaced)
    }

    private mutating func insert(_ id: Int, _ priority: Int32, into name: String) {
        lastLookup = nil
        var chain = chains.removeValue(forKey: name) ?? []
        var lo = 0, hi = chain.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if let p = records[chain[mid]]?.priority, p <= priority { lo = mid + 1 } else { hi = mid }
        }
        chain.insert(id, at: lo)
        chains[name] = chain
    }

    /// Removes an observer from its chains and its key.
    mutating func remove(_ id: Int) -> ObserverRecord? {
        guard let record = records.removeValue(forKey: id) else { return nil }
        lastLookup = nil
        if let key = record.key, keys[key] == id { keys[key] = nil }
        for name in record.events {
            guard var chain = chains.removeValue(forKey: name) else { continue }
            chain.removeAll { $0 == id }
            if !chain.isEmpty { chains[name] = chain }
        }
        return record
    }
}

/// The number of a broker-assigned wire id (`"o12"` → 12 for tag `o`).
func parseTaggedID(_ text: String, tag: Character) -> Int? {
    guard text.first == tag else { return nil }
    return Int(text.dropFirst())
}
