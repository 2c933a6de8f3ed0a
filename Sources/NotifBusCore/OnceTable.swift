// The idempotency keys (`once`, §3.8) a broker holds: each key with the op and fingerprint it
// was first used with, its state, its outcome once known, and the repeats waiting for it;
// and the window that forgets the oldest outcomes past a count, an age and a byte bound. It
// keeps records only: what a request does with a key is the broker's (Broker+Once.swift).
// The state journal keeps the same table of what is on disk, so that both forget alike.
//
// A key's life:
//
//     insert ──▶ pending ──(a post's event starts)──▶ running ──┐
//                   │  └──────────────────────────────────────── end(outcome) ──▶ ended ──▶ forgotten
//                   └── remove (refused: a failed write, shutdown): as if never held      (oldest first,
//                                                                                          past a bound)
//
// Pending and running keys are never forgotten; only ended ones are, oldest ended first.
import NotifBusProtocol

/// The request kinds that take a key.
public enum OnceOp: UInt8, Sendable, CaseIterable {
    case post = 1
    case put = 2
    case take = 3
    case setCategories = 4

    /// The op as the wire names it (`once_conflict`'s `details.op`).
    public var wireName: String {
        switch self {
        case .post: Op.post
        case .put: Op.put
        case .take: Op.take
        case .setCategories: Op.setCategories
        }
    }
}

/// One key as written to disk, or restored from it.
public struct OnceRecord: Sendable, Equatable {
    public let key: String
    public let op: OnceOp
    /// The request's target and body, hashed (`Broker.fingerprint`).
    public let fingerprint: UInt64
    /// Wall-clock milliseconds since 1970 when the key was recorded in this state.
    public let wallMs: Int64
    /// The first outcome; nil while the post runs.
    public let outcome: OnceOutcome?

    public init(key: String, op: OnceOp, fingerprint: UInt64, wallMs: Int64, outcome: OnceOutcome?) {
        self.key = key
        self.op = op
        self.fingerprint = fingerprint
        self.wallMs = wallMs
        self.outcome = outcome
    }
}

extension OnceOutcome {
    /// What every repeat of a keyed post whose chain was cut by a stop of the broker hears:
    /// its key was "running" on disk and never ended. Built at each use (restarts only), not
    /// kept in a global: the case's tag lives in spare bits of the array's pointer, which
    /// LeakSanitizer then does not see as a reference, and fuzzing would report a leak.
    public static var interrupted: OnceOutcome {
        .error(
            .interrupted,
            message: "the event's chain was cut when the broker stopped; the observers before the cut saw it; it will not run again")
    }
}

/// The bounds of the window: `--once-keys`, `--once-age`, `--once-bytes`.
public struct OnceLimits: Sendable, Equatable {
    public var maxKeys = Limits.defaultOnceKeys
    public var maxAgeMs = Limits.defaultOnceAgeMs
    public var maxBytes = Limits.defaultOnceBytes

    public init() {}
}

/// A request waiting for the outcome of the key it repeats.
public struct OnceWaiter: Sendable {
    public let connection: ConnectionID
    public let requestID: RequestID
}

/// Keys by text, in a table of their own (chained buckets over arrays of entries, hashed
/// with `ContentHash` and a seed) so that a lookup costs one short hash and a compare, and
/// ended keys in the order they ended, for the window. An entry's fixed-size fields live in
/// one array of plain values (`Slot`), its key in an array of its own, and the outcomes,
/// one after another in the order the keys ended, in chunks of 64 KiB: walking a chain or
/// the order, or changing a state, counts no reference, and ending or forgetting a key
/// allocates and frees nothing but a whole chunk now and then, once the oldest outcome has
/// left it.
public struct OnceTable {
    public enum State: UInt8, Sendable, Equatable {
        case pending
        case running
        case ended
    }

    /// An entry's fixed-size fields: no reference among them.
    struct Slot {
        var hash: UInt64
        var fingerprint: UInt64
        var wallMs: Int64
        /// Where its outcome lies: its chunk (`firstChunk` counted in) and offset, once ended.
        var outcomeChunk: Int
        var outcomeAt: Int32
        var outcomeCount: Int32
        /// The next entry in its bucket, or -1.
        var chained: Int32
        /// Its neighbours in the order of ending (ended entries only), or -1.
        var older: Int32
        var newer: Int32
        var op: OnceOp
        var state: State
        var outcomeIsError: Bool
        var live: Bool
    }

    public let limits: OnceLimits
    private let seed: UInt64
    private var slots: [Slot] = []
    private var keys: [String] = []
    /// The outcomes of ended entries, in the order they ended; `chunks[0]` is chunk number
    /// `firstChunk`.
    private var chunks: [OutcomeChunk] = []
    private var firstChunk = 0
    /// The repeats waiting for a pending or running entry, by entry: few entries have any.
    private var waiters: [Int32: [OnceWaiter]] = [:]
    private var free: [Int32] = []
    private var buckets: [Int32]
    /// The oldest and newest ended entries, or -1.
    private var oldest: Int32 = -1
    private var newest: Int32 = -1
    /// Keys held, in every state.
    public private(set) var count = 0
    /// Bytes of the keys and outcomes held (what `--once-bytes` bounds).
    public private(set) var bytes = 0

    public init(limits: OnceLimits, seed: UInt64 = 0) {
        self.limits = limits
        self.seed = seed
        buckets = [Int32](repeating: -1, count: 64)
    }

    /// The hash a key is filed under.
    public func hash(_ key: String) -> UInt64 { ContentHash.hash(key, seed: seed) }

    /// The hash a key is filed under, from its UTF-8 where it lies.
    public func hash(utf8 key: UnsafeRawBufferPointer) -> UInt64 { ContentHash.hash(key, seed: seed) }

    // MARK: Lookup

    /// The entry of `key` (whose `hash` this table gave), if held. An ended key older than
    /// the window at `nowMs` is forgotten here, and not found.
    public mutating func find(_ key: String, hash h: UInt64, nowMs: Int64) -> Int32? {
        guard let i = index(of: key, hash: h) else { return nil }
        if slots[Int(i)].state == .ended && isExpired(slots[Int(i)].wallMs, nowMs: nowMs) {
            remove(i)
            return nil
        }
        return i
    }

    /// `find` with the key hashed here.
    public mutating func find(_ key: String, nowMs: Int64) -> Int32? { find(key, hash: hash(key), nowMs: nowMs) }

    /// Whether `key` is held (however old: `find` forgets an expired one).
    public func holds(_ key: String) -> Bool { index(of: key) != nil }

    /// The entry of `key`, if held, however old.
    public func index(of key: String) -> Int32? { index(of: key, hash: hash(key)) }

    private func index(of key: String, hash h: UInt64) -> Int32? {
        var i = buckets[Int(h & UInt64(buckets.count &- 1))]
        while i >= 0 {
            if slots[Int(i)].hash == h && keys[Int(i)] == key { return i }
            i = slots[Int(i)].chained
        }
        return nil
    }

    public func state(_ i: Int32) -> State { slots[Int(i)].state }
    public func op(_ i: Int32) -> OnceOp { slots[Int(i)].op }
    public func fingerprint(_ i: Int32) -> UInt64 { slots[Int(i)].fingerprint }
    public func key(_ i: Int32) -> String { keys[Int(i)] }

    /// The outcome of an ended entry, as an array of its own; nil before it ended.
    public func outcome(_ i: Int32) -> OnceOutcome? {
        guard slots[Int(i)].state == .ended else { return nil }
        return withOutcome(i) { isError, bytes in isError ? .error(RawJSON(bytes)) : .result(RawJSON(bytes)) }
    }

    /// Lends an ended entry's outcome, whether it is an error and its bytes, where it lies.
    public func withOutcome<R>(_ i: Int32, _ body: (Bool, UnsafeRawBufferPointer) -> R) -> R {
        let s = slots[Int(i)]
        let chunk = chunks[s.outcomeChunk &- firstChunk]
        return body(s.outcomeIsError, UnsafeRawBufferPointer(start: chunk.base + Int(s.outcomeAt), count: Int(s.outcomeCount)))
    }

    // MARK: Changes

    /// Holds `key` (whose `hash` this table gave) as pending (or running) and returns its
    /// entry. The key must not be held.
    @discardableResult
    public mutating func insert(
        _ key: String, hash h: UInt64, op: OnceOp, fingerprint: UInt64, state: State = .pending, wallMs: Int64
    ) -> Int32 {
        if count >= buckets.count { grow() }
        let b = Int(h & UInt64(buckets.count &- 1))
        let slot = Slot(
            hash: h, fingerprint: fingerprint, wallMs: wallMs, outcomeChunk: 0, outcomeAt: 0, outcomeCount: 0, chained: buckets[b],
            older: -1, newer: -1, op: op, state: state, outcomeIsError: false, live: true)
        let i: Int32
        if let reused = free.popLast() {
            i = reused
            slots[Int(i)] = slot
            keys[Int(i)] = key
        } else {
            i = Int32(slots.count)
            slots.append(slot)
            keys.append(key)
        }
        buckets[b] = i
        count &+= 1
        bytes &+= key.utf8.count
        return i
    }

    /// `insert` with the key hashed here.
    @discardableResult
    public mutating func insert(_ key: String, op: OnceOp, fingerprint: UInt64, state: State = .pending, wallMs: Int64) -> Int32 {
        insert(key, hash: hash(key), op: op, fingerprint: fingerprint, state: state, wallMs: wallMs)
    }

    /// A pending post's event started.
    public mutating func setRunning(_ i: Int32) {
        slots[Int(i)].state = .running
    }

    /// The key's request ended with `outcome` at `wallMs`: it joins the window as its newest
    /// entry, and the oldest ones past a bound are forgotten. Returns the repeats that waited
    /// for it.
    @discardableResult
    public mutating func end(_ i: Int32, outcome: OnceOutcome, wallMs: Int64) -> [OnceWaiter] {
        outcome.withBytes { isError, bytes in end(i, isError: isError, outcome: bytes, wallMs: wallMs) }
    }

    /// `end` with the outcome's bytes lent (they are copied into the arena).
    @discardableResult
    public mutating func end(_ i: Int32, isError: Bool, outcome: UnsafeRawBufferPointer, wallMs: Int64) -> [OnceWaiter] {
        let waiting = waiters.isEmpty ? [] : waiters.removeValue(forKey: i) ?? []
        if slots[Int(i)].state == .ended {
            unlinkOrder(i)
            bytes &-= Int(slots[Int(i)].outcomeCount)
        }
        let (chunk, at) = store(outcome)
        bytes &+= outcome.count
        let older = newest
        slots.withUnsafeMutableBufferPointer { s in
            s[Int(i)].state = .ended
            s[Int(i)].wallMs = wallMs
            s[Int(i)].outcomeChunk = chunk
            s[Int(i)].outcomeAt = at
            s[Int(i)].outcomeCount = Int32(truncatingIfNeeded: outcome.count)
            s[Int(i)].outcomeIsError = isError
            s[Int(i)].older = older
            s[Int(i)].newer = -1
            if older >= 0 { s[Int(older)].newer = i }
        }
        if older < 0 { oldest = i }
        newest = i
        forgetPastBounds(nowMs: wallMs)
        return waiting
    }

    /// A repeat waits for the outcome of entry `i` (pending or running).
    public mutating func addWaiter(_ i: Int32, _ waiter: OnceWaiter) {
        waiters[i, default: []].append(waiter)
    }

    /// Forgets the key of entry `i` (its request was refused, or it left the window) and
    /// returns the repeats that waited for it.
    @discardableResult
    public mutating func remove(_ i: Int32) -> [OnceWaiter] {
        let slot = slots[Int(i)]
        precondition(slot.live, "a once key removed twice")
        let b = Int(slot.hash & UInt64(buckets.count &- 1))
        let first = buckets[b]
        let (older, newer) = (oldest, newest)
        // The order's links and the bucket's chain, changed in one pass over the slots.
        let (newOldest, newNewest) = slots.withUnsafeMutableBufferPointer { s -> (Int32, Int32) in
            var (o, n) = (older, newer)
            if slot.state == .ended {
                if slot.older >= 0 { s[Int(slot.older)].newer = slot.newer } else { o = slot.newer }
                if slot.newer >= 0 { s[Int(slot.newer)].older = slot.older } else { n = slot.older }
            }
            if first != i {
                var j = first
                while s[Int(j)].chained != i { j = s[Int(j)].chained }
                s[Int(j)].chained = slot.chained
            }
            s[Int(i)].live = false
            s[Int(i)].older = -1
            s[Int(i)].newer = -1
            return (o, n)
        }
        oldest = newOldest
        newest = newNewest
        if first == i { buckets[b] = slot.chained }
        count &-= 1
        bytes &-= keys[Int(i)].utf8.count &+ (slot.state == .ended ? Int(slot.outcomeCount) : 0)
        keys[Int(i)] = ""
        free.append(i)
        if slot.state == .ended && slot.outcomeChunk == firstChunk { dropOldChunks() }
        return waiters.isEmpty ? [] : waiters.removeValue(forKey: i) ?? []
    }

    /// Forgets ended keys, oldest first, while a bound is passed at `nowMs`.
    public mutating func forgetPastBounds(nowMs: Int64) {
        while oldest >= 0 {
            guard count > limits.maxKeys || bytes > limits.maxBytes || isExpired(slots[Int(oldest)].wallMs, nowMs: nowMs) else {
                return
            }
            remove(oldest)
        }
    }

    // MARK: Reading

    /// Every key held as a record, the ended ones in the order they ended, then the others
    /// (running and pending) in no particular order: what a fresh journal holds.
    public var records: [OnceRecord] {
        var all: [OnceRecord] = []
        all.reserveCapacity(count)
        var i = oldest
        while i >= 0 {
            all.append(record(i))
            i = slots[Int(i)].newer
        }
        for i in slots.indices where slots[i].live && slots[i].state != .ended {
            all.append(record(Int32(i)))
        }
        return all
    }

    private func record(_ i: Int32) -> OnceRecord {
        let s = slots[Int(i)]
        return OnceRecord(key: keys[Int(i)], op: s.op, fingerprint: s.fingerprint, wallMs: s.wallMs, outcome: outcome(i))
    }

    /// Ended keys from the oldest: their text, for tests of the window's order.
    public var endedKeys: [String] {
        var all: [String] = []
        var i = oldest
        while i >= 0 {
            all.append(keys[Int(i)])
            i = slots[Int(i)].newer
        }
        return all
    }

    /// Chunks of outcomes held (tests: they are freed once the oldest outcome left them).
    public var chunkCount: Int { chunks.count }

    // MARK: Internals

    private func isExpired(_ wallMs: Int64, nowMs: Int64) -> Bool {
        nowMs &- wallMs >= limits.maxAgeMs
    }

    /// Copies an outcome to the end of the newest chunk (a fresh one when it does not fit)
    /// and says where it lies.
    private mutating func store(_ outcome: UnsafeRawBufferPointer) -> (chunk: Int, at: Int32) {
        let n = outcome.count
        if chunks.isEmpty || chunks[chunks.count &- 1].used &+ n > chunks[chunks.count &- 1].capacity {
            chunks.append(OutcomeChunk(capacity: Swift.max(OutcomeChunk.size, n)))
        } else if !isKnownUniquelyReferenced(&chunks[chunks.count &- 1]) {
            // A copy of this table shares the chunk: this one writes into a copy of its own.
            chunks[chunks.count &- 1] = chunks[chunks.count &- 1].copy()
        }
        let chunk = chunks[chunks.count &- 1]
        let at = chunk.used
        if let source = outcome.baseAddress { (chunk.base + at).copyMemory(from: source, byteCount: n) }
        chunk.used &+= n
        return (firstChunk &+ chunks.count &- 1, Int32(truncatingIfNeeded: at))
    }

    /// Frees the chunks before the oldest outcome's (the newest one is kept to write into).
    private mutating func dropOldChunks() {
        let keep = oldest >= 0 ? slots[Int(oldest)].outcomeChunk : firstChunk &+ chunks.count &- 1
        let drop = Swift.min(keep &- firstChunk, chunks.count &- 1)
        guard drop > 0 else { return }
        chunks.removeFirst(drop)
        firstChunk &+= drop
    }

    private mutating func unlinkOrder(_ i: Int32) {
        let older = slots[Int(i)].older, newer = slots[Int(i)].newer
        if older >= 0 { slots[Int(older)].newer = newer } else { oldest = newer }
        if newer >= 0 { slots[Int(newer)].older = older } else { newest = older }
        slots[Int(i)].older = -1
        slots[Int(i)].newer = -1
    }

    /// Doubles the buckets and chains every live entry anew.
    private mutating func grow() {
        buckets = [Int32](repeating: -1, count: buckets.count * 2)
        let mask = UInt64(buckets.count &- 1)
        for i in slots.indices where slots[i].live {
            let b = Int(slots[i].hash & mask)
            slots[i].chained = buckets[b]
            buckets[b] = Int32(i)
        }
    }
}

/// Outcome bytes, written one after another and never moved; freed whole.
final class OutcomeChunk {
    /// 64 KiB: a few hundred outcomes of posts each, so that one allocation serves many.
    static let size = 64 << 10

    let base: UnsafeMutableRawPointer
    let capacity: Int
    var used = 0

    init(capacity: Int) {
        self.capacity = capacity
        base = .allocate(byteCount: capacity, alignment: 8)
    }

    deinit { base.deallocate() }

    func copy() -> OutcomeChunk {
        let other = OutcomeChunk(capacity: capacity)
        other.base.copyMemory(from: base, byteCount: used)
        other.used = used
        return other
    }
}
