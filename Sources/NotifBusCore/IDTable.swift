// A table from the broker's own integer ids (connections, handlers, calls) to records: open
// addressing with linear probing and a multiplicative hash, for the per-frame lookups. It must
// not be keyed by anything a peer chooses: its hash is not seeded against collisions.

/// Records by an id the broker (or its transport) hands out in sequence. A `Dictionary`
/// would hash each id with a seeded SipHash on every lookup; these ids are not chosen by
/// any peer, so a multiplicative (Fibonacci) hash spreads them well enough, and a lookup
/// costs a multiply, a shift and usually one compare.
public struct IDTable<Value> {
    /// One id and its record. A struct rather than a tuple: a tuple's copies and destroys
    /// go through the runtime's generic tuple witnesses, a struct's are specialized.
    @usableFromInline struct Entry {
        @usableFromInline var key: Int
        @usableFromInline var value: Value

        @inlinable init(_ key: Int, _ value: Value) {
            self.key = key
            self.value = value
        }
    }

    /// Slots of a power-of-two count (none until the first insert); nil is empty. Kept at
    /// most half full, so probe runs stay short.
    @usableFromInline var slots: [Entry?] = []
    @usableFromInline var shift = 64 - 4
    /// How many ids are held.
    public private(set) var count = 0

    /// An empty table (it allocates on the first insert).
    public init() {}

    /// Whether no id is held.
    public var isEmpty: Bool { count == 0 }

    @inlinable @inline(__always)
    func home(_ key: Int) -> Int {
        Int(truncatingIfNeeded: (UInt64(bitPattern: Int64(key)) &* 0x9E37_79B9_7F4A_7C15) >> UInt64(shift))
    }

    @inlinable @inline(__always)
    func index(of key: Int) -> Int? {
        guard count > 0 else { return nil }
        let mask = slots.count - 1
        var i = home(key)
        while let entry = slots[i] {
            if entry.key == key { return i }
            i = (i + 1) & mask
        }
        return nil
    }

    /// The record of `key`; setting nil removes it.
    public subscript(key: Int) -> Value? {
        @inlinable get {
            guard let i = index(of: key) else { return nil }
            return slots[i]!.value
        }
        set {
            if let newValue { insert(key, newValue) } else { _ = removeValue(forKey: key) }
        }
    }

    /// What `body` reads from `key`'s record, or nil when there is none. The record is
    /// lent, not copied: reading one field of a record that holds references (arrays,
    /// strings, a class) retains and releases nothing, where the subscript copies it all.
    @inlinable @inline(__always)
    public func read<R>(_ key: Int, _ body: (Value) -> R) -> R? {
        guard let i = index(of: key) else { return nil }
        return slots.withUnsafeBufferPointer { body($0[i].unsafelyUnwrapped.value) }
    }

    /// Whether `key` has a record (nothing is copied or retained).
    @inlinable @inline(__always)
    public func contains(_ key: Int) -> Bool { index(of: key) != nil }

    /// Sets `key`'s record, replacing any it had.
    public mutating func insert(_ key: Int, _ value: Value) {
        if let i = index(of: key) {
            slots[i] = Entry(key, value)
            return
        }
        if slots.isEmpty {
            slots = Array(repeating: nil, count: 16)
        } else if (count + 1) * 2 > slots.count {
            grow()
        }
        let mask = slots.count - 1
        var i = home(key)
        while slots[i] != nil { i = (i + 1) & mask }
        slots[i] = Entry(key, value)
        count += 1
    }

    /// Removes `key`'s entry and closes the gap by moving later entries of the probe run
    /// back, so that no tombstones build up.
    @discardableResult
    public mutating func removeValue(forKey key: Int) -> Value? {
        guard var hole = index(of: key) else { return nil }
        let removed = slots[hole]!.value
        slots[hole] = nil
        count -= 1
        let mask = slots.count - 1
        var i = (hole + 1) & mask
        while let entry = slots[i] {
            let h = home(entry.key)
            // The entry may move into the hole if its home is not in (hole, i], cyclically.
            let stays = hole <= i ? (hole < h && h <= i) : (hole < h || h <= i)
            if !stays {
                slots[hole] = entry
                slots[i] = nil
                hole = i
            }
            i = (i + 1) & mask
        }
        return removed
    }

    /// Empties the table and frees its slots.
    public mutating func removeAll() {
        slots = []
        shift = 64 - 4
        count = 0
    }

    private mutating func grow() {
        let old = slots
        slots = Array(repeating: nil, count: old.count * 2)
        shift -= 1
        count = 0
        for case let entry? in old { insert(entry.key, entry.value) }
    }

    /// The ids held, in no particular order.
    public var keys: [Int] { slots.compactMap { $0?.key } }
    /// The records held, in no particular order.
    public var values: [Value] { slots.compactMap { $0?.value } }
    /// The entries, ordered by id.
    public var sortedEntries: [(key: Int, value: Value)] { slots.compactMap { $0.map { ($0.key, $0.value) } }.sorted { $0.key < $1.key } }
}
