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
    /// its key was "running" on disk and never ended.
    public static let interrupted = OnceOutcome.error(
        .interrupted,
        message: "the event's chain was cut when the broker stopped; the observers before the cut saw it; it will not run again")
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

/// Keys by text, in a table of their own (chained buckets over one array of entries, hashed
/// with `ContentHash` and a seed) so that a lookup costs one short hash and a compare, and
/// ended keys in the order they ended, for the window.
public struct OnceTable {
    public enum State: Sendable, Equatable {
        case pending
        case running
        case ended
    }

    struct Entry {
        var key: String
        var hash: UInt64
        var op: OnceOp
        var fingerprint: UInt64
        var state: State
        var outcome: OnceOutcome?
        var wallMs: Int64
        var waiters: [OnceWaiter]
        /// The next entry in its bucket, or -1.
        var chained: Int32
        /// Its neighbours in the order of ending (ended entries only), or -1.
        var older: Int32
        var newer: Int32
        var live: Bool
    }

    public let limits: OnceLimits
    private let seed: UInt64
    private var entries: [Entry] = []
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

    /// What one key costs against `--once-bytes`: its text and its outcome.
    static func cost(key: String, outcome: OnceOutcome?) -> Int { key.utf8.count &+ (outcome?.count ?? 0) }

    // MARK: Lookup

    /// The entry of `key`, if held. An ended key older than the window at `nowMs` is
    /// forgotten here, and not found.
    public mutating func find(_ key: String, nowMs: Int64) -> Int32? {
        let h = ContentHash.hash(key, seed: seed)
        var i = buckets[Int(h & UInt64(buckets.count &- 1))]
        while i >= 0 {
            if entries[Int(i)].hash == h && entries[Int(i)].key == key {
                if entries[Int(i)].state == .ended && isExpired(entries[Int(i)].wallMs, nowMs: nowMs) {
                    remove(i)
                    return nil
                }
                return i
            }
            i = entries[Int(i)].chained
        }
        return nil
    }

    /// Whether `key` is held (however old: `find` forgets an expired one).
    public func holds(_ key: String) -> Bool { index(of: key) != nil }

    /// The entry of `key`, if held, however old.
    public func index(of key: String) -> Int32? {
        let h = ContentHash.hash(key, seed: seed)
        var i = buckets[Int(h & UInt64(buckets.count &- 1))]
        while i >= 0 {
            if entries[Int(i)].hash == h && entries[Int(i)].key == key { return i }
            i = entries[Int(i)].chained
        }
        return nil
    }

    public func state(_ i: Int32) -> State { entries[Int(i)].state }
    public func op(_ i: Int32) -> OnceOp { entries[Int(i)].op }
    public func fingerprint(_ i: Int32) -> UInt64 { entries[Int(i)].fingerprint }
    public func key(_ i: Int32) -> String { entries[Int(i)].key }
    public func outcome(_ i: Int32) -> OnceOutcome? { entries[Int(i)].outcome }

    // MARK: Changes

    /// Holds `key` as pending (or running) and returns its entry. The key must not be held.
    @discardableResult
    public mutating func insert(_ key: String, op: OnceOp, fingerprint: UInt64, state: State = .pending, wallMs: Int64) -> Int32 {
        let h = ContentHash.hash(key, seed: seed)
        if count >= buckets.count { grow() }
        let b = Int(h & UInt64(buckets.count &- 1))
        let entry = Entry(
            key: key, hash: h, op: op, fingerprint: fingerprint, state: state, outcome: nil, wallMs: wallMs, waiters: [],
            chained: buckets[b], older: -1, newer: -1, live: true)
        let i: Int32
        if let reused = free.popLast() {
            i = reused
            entries[Int(i)] = entry
        } else {
            i = Int32(entries.count)
            entries.append(entry)
        }
        buckets[b] = i
        count &+= 1
        bytes &+= OnceTable.cost(key: key, outcome: nil)
        return i
    }

    /// A pending post's event started.
    public mutating func setRunning(_ i: Int32) {
        entries[Int(i)].state = .running
    }

    /// The key's request ended with `outcome` at `wallMs`: it joins the window as its newest
    /// entry, and the oldest ones past a bound are forgotten. Returns the repeats that waited
    /// for it.
    @discardableResult
    public mutating func end(_ i: Int32, outcome: OnceOutcome, wallMs: Int64) -> [OnceWaiter] {
        let waiters = entries[Int(i)].waiters
        entries[Int(i)].waiters = []
        if entries[Int(i)].state == .ended { unlinkOrder(i) }
        bytes &+= outcome.count &- (entries[Int(i)].outcome?.count ?? 0)
        entries[Int(i)].outcome = outcome
        entries[Int(i)].state = .ended
        entries[Int(i)].wallMs = wallMs
        entries[Int(i)].older = newest
        entries[Int(i)].newer = -1
        if newest >= 0 { entries[Int(newest)].newer = i } else { oldest = i }
        newest = i
        forgetPastBounds(nowMs: wallMs)
        return waiters
    }

    /// A repeat waits for the outcome of entry `i` (pending or running).
    public mutating func addWaiter(_ i: Int32, _ waiter: OnceWaiter) {
        entries[Int(i)].waiters.append(waiter)
    }

    /// Forgets the key of entry `i` (its request was refused, or it left the window) and
    /// returns the repeats that waited for it.
    @discardableResult
    public mutating func remove(_ i: Int32) -> [OnceWaiter] {
        let e = entries[Int(i)]
        precondition(e.live, "a once key removed twice")
        if e.state == .ended { unlinkOrder(i) }
        let b = Int(e.hash & UInt64(buckets.count &- 1))
        if buckets[b] == i {
            buckets[b] = e.chained
        } else {
            var j = buckets[b]
            while entries[Int(j)].chained != i { j = entries[Int(j)].chained }
            entries[Int(j)].chained = e.chained
        }
        count &-= 1
        bytes &-= OnceTable.cost(key: e.key, outcome: e.outcome)
        entries[Int(i)] = Entry(
            key: "", hash: 0, op: .post, fingerprint: 0, state: .pending, outcome: nil, wallMs: 0, waiters: [], chained: -1,
            older: -1, newer: -1, live: false)
        free.append(i)
        return e.waiters
    }

    /// Forgets ended keys, oldest first, while a bound is passed at `nowMs`.
    public mutating func forgetPastBounds(nowMs: Int64) {
        while oldest >= 0 {
            guard count > limits.maxKeys || bytes > limits.maxBytes || isExpired(entries[Int(oldest)].wallMs, nowMs: nowMs) else {
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
            let e = entries[Int(i)]
            all.append(OnceRecord(key: e.key, op: e.op, fingerprint: e.fingerprint, wallMs: e.wallMs, outcome: e.outcome))
            i = e.newer
        }
        for e in entries where e.live && e.state != .ended {
            all.append(OnceRecord(key: e.key, op: e.op, fingerprint: e.fingerprint, wallMs: e.wallMs, outcome: nil))
        }
        return all
    }

    /// Ended keys from the oldest: their text, for tests of the window's order.
    public var endedKeys: [String] {
        var keys: [String] = []
        var i = oldest
        while i >= 0 {
            keys.append(entries[Int(i)].key)
            i = entries[Int(i)].newer
        }
        return keys
    }

    // MARK: Internals

    private func isExpired(_ wallMs: Int64, nowMs: Int64) -> Bool {
        nowMs &- wallMs >= limits.maxAgeMs
    }

    private mutating func unlinkOrder(_ i: Int32) {
        let e = entries[Int(i)]
        if e.older >= 0 { entries[Int(e.older)].newer = e.newer } else { oldest = e.newer }
        if e.newer >= 0 { entries[Int(e.newer)].older = e.older } else { newest = e.older }
        entries[Int(i)].older = -1
        entries[Int(i)].newer = -1
    }

    /// Doubles the buckets and chains every live entry anew.
    private mutating func grow() {
        buckets = [Int32](repeating: -1, count: buckets.count * 2)
        let mask = UInt64(buckets.count &- 1)
        for i in entries.indices where entries[i].live {
            let b = Int(entries[i].hash & mask)
            entries[i].chained = buckets[b]
            buckets[b] = Int32(i)
        }
    }
}
