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

/// Keys by text, in a table of their own (chained buckets over entries, hashed with a
/// seed: `keyHash`) so that a lookup costs one short hash and a compare, and ended
/// keys in the order they ended, for the window. Not copyable: its storage is memory it
/// allocates and frees itself, so that nothing on a keyed request's way counts a reference or
/// asks whether an array is shared.
/// - An entry's fixed-size fields live in one block of `Slot`s; dead slots are chained for
///   reuse.
/// - Keys and outcomes live in an arena of chunks (64 KiB each), written one after another
///   at the end of the newest. A key is written there when it is held; when its entry ends,
///   the outcome follows it where it lies if nothing was written after it (a request that
///   ends before the next keyed one arrives), or else key and outcome are written anew at
///   the end, one after the other.
/// - Ended entries are forgotten oldest first, and keys not yet ended are counted per chunk:
///   a chunk is freed whole once the oldest outcome has left it and no key not yet ended
///   lies in it.
public struct OnceTable: ~Copyable {
    public enum State: UInt8, Sendable, Equatable {
        case pending
        case running
        case ended
    }

    /// An entry's fixed-size fields.
    struct Slot {
        var hash: UInt64
        var fingerprint: UInt64
        var wallMs: Int64
        /// The chunk (`firstChunk` counted in) holding its key, then (ended) its outcome.
        var chunk: Int
        /// The key's offset in `chunk`.
        var at: Int32
        var keyCount: Int32
        var outcomeCount: Int32
        /// The next entry in its bucket, or -1; for a dead slot, the next dead one.
        var chained: Int32
        /// Its neighbours in the order of ending (ended entries only), or -1.
        var older: Int32
        var newer: Int32
        var op: OnceOp
        var state: State
        var outcomeIsError: Bool
        var live: Bool
    }

    /// 64 KiB: a few hundred keys with their outcomes each, so that one allocation serves many.
    static let chunkSize = 64 << 10

    public let limits: OnceLimits
    private let seed: UInt64
    private var slots: UnsafeMutablePointer<Slot>
    private var slotCapacity: Int32 = 0
    /// Slots ever used; those below it and not live are chained from `deadSlot`.
    private var slotCount: Int32 = 0
    private var deadSlot: Int32 = -1
    private var buckets: UnsafeMutablePointer<Int32>
    private var bucketCount = 64
    /// The arena: runs of bytes written one after another and freed whole; `chunks[0]` is
    /// chunk number `firstChunk`.
    private var chunks: [UnsafeMutableRawPointer] = []
    private var firstChunk = 0
    /// The newest chunk's number, start, bytes used and capacity (nil start: no chunk yet).
    private var tailChunk = -1
    private var tail: UnsafeMutableRawPointer? = nil
    private var tailUsed = 0
    private var tailCapacity = 0
    /// Keys not yet ended in the newest chunk, and in each older one (`chunks` less the last).
    private var tailPending: Int32 = 0
    private var olderPending: [Int32] = []
    /// The repeats waiting for a pending or running entry, by entry: few entries have any.
    private var waiters: [Int32: [OnceWaiter]] = [:]
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
        slots = .allocate(capacity: 0)
        buckets = .allocate(capacity: 64)
        buckets.initialize(repeating: -1, count: 64)
    }

    deinit {
        slots.deallocate()
        buckets.deallocate()
        for c in chunks { c.deallocate() }
    }

    /// The hash a key is filed under.
    public func hash(_ key: String) -> UInt64 { OnceTable.withUTF8(key) { hash(utf8: $0) } }

    /// The hash a key is filed under, from its UTF-8 where it lies. Not `ContentHash`: no
    /// one outside this table sees it, so it need only spread keys over buckets, and it folds
    /// 16 bytes a multiplication (a key of up to 16 bytes in one, inline) where
    /// `ContentHash` mixes 8 bytes a turn and calls a function to do it (chain3-once: 55
    /// instructions per post for an 11-byte key). The run's seed is in every operand of a
    /// multiplication, so that keys chosen to make one of them 0 cannot be written ahead.
    @inline(__always)
    public func hash(utf8 key: UnsafeRawBufferPointer) -> UInt64 { OnceTable.keyHash(key, seed: seed) }

    /// Odd constants with bits spread (the fractional parts of the golden ratio and of √3),
    /// so that a key's word and one of them rarely cancel.
    static let keyMix0: UInt64 = 0x9E37_79B9_7F4A_7C15
    static let keyMix1: UInt64 = 0xBB67_AE85_84CA_A73B

    /// The high and low halves of `x * y`, folded into one word: each of their bits moves
    /// many bits of the result, its low ones (the bucket) included.
    @inline(__always)
    static func fold(_ x: UInt64, _ y: UInt64) -> UInt64 {
        let (high, low) = x.multipliedFullWidth(by: y)
        return high ^ low
    }

    /// The key's bytes as two words, sixteen bytes at a time, each pair folded into the
    /// state; the last one to sixteen bytes read where the key ends (overlapping bytes
    /// already folded when it is longer), and its length in the state from the start.
    @inline(__always)
    static func keyHash(_ key: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        let n = key.count
        var h = seed ^ UInt64(truncatingIfNeeded: n)
        guard n > 0, let base = key.baseAddress else { return fold(h ^ keyMix0, seed ^ keyMix1) }
        var a: UInt64
        var b: UInt64
        if n >= 8 {
            var p = 0
            while p &+ 16 < n {
                let first = base.loadUnaligned(fromByteOffset: p, as: UInt64.self)
                h = fold(first ^ seed ^ keyMix0, base.loadUnaligned(fromByteOffset: p &+ 8, as: UInt64.self) ^ h ^ keyMix1)
                p &+= 16
            }
            // The last 1 to 16 bytes as two words, which may overlap (and overlap bytes folded).
            a = base.loadUnaligned(fromByteOffset: n > 16 ? n &- 16 : 0, as: UInt64.self)
            b = base.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)
        } else if n >= 4 {
            a = UInt64(base.loadUnaligned(as: UInt32.self))
            b = UInt64(base.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self))
        } else {
            // One to three bytes: the first, the middle and the last.
            a = UInt64(base.load(as: UInt8.self)) | UInt64(base.load(fromByteOffset: n &>> 1, as: UInt8.self)) &<< 8
            a |= UInt64(base.load(fromByteOffset: n &- 1, as: UInt8.self)) &<< 16
            b = 0
        }
        return fold(a ^ seed ^ keyMix0, b ^ h ^ keyMix1)
    }

    // MARK: Lookup

    /// The entry of `key` (whose `hash` this table gave), if held. An ended key older than
    /// the window at `nowMs` is forgotten here, and not found. An empty bucket, what most
    /// fresh keys find, is answered inline, without the call that walks a chain.
    @inline(__always)
    public mutating func find(_ key: UnsafeRawBufferPointer, hash h: UInt64, nowMs: Int64) -> Int32? {
        guard buckets[Int(h & UInt64(bucketCount &- 1))] >= 0 else { return nil }
        return findInChain(key, hash: h, nowMs: nowMs)
    }

    /// `find` where the key's bucket chains entries.
    @inline(never)
    private mutating func findInChain(_ key: UnsafeRawBufferPointer, hash h: UInt64, nowMs: Int64) -> Int32? {
        guard let i = index(of: key, hash: h) else { return nil }
        if slots[Int(i)].state == .ended && isExpired(slots[Int(i)].wallMs, nowMs: nowMs) {
            remove(i)
            return nil
        }
        return i
    }

    /// `find` with the key hashed here.
    public mutating func find(_ key: String, nowMs: Int64) -> Int32? {
        OnceTable.withUTF8(key) { find($0, hash: hash(utf8: $0), nowMs: nowMs) }
    }

    /// Whether `key` is held (however old: `find` forgets an expired one).
    public func holds(_ key: String) -> Bool { index(of: key) != nil }

    /// The entry of `key`, if held, however old.
    public func index(of key: String) -> Int32? {
        OnceTable.withUTF8(key) { index(of: $0, hash: hash(utf8: $0)) }
    }

    /// Inlined: called apart, it would be lent a copy of the whole table (chain3-once: 32
    /// instructions per post).
    @inline(__always)
    private func index(of key: UnsafeRawBufferPointer, hash h: UInt64) -> Int32? {
        var i = buckets[Int(h & UInt64(bucketCount &- 1))]
        while i >= 0 {
            let s = slots[Int(i)]
            if s.hash == h && Int(s.keyCount) == key.count && withKey(i, { JSONName(inPlace: $0).hasUTF8(key) }) { return i }
            i = s.chained
        }
        return nil
    }

    public func state(_ i: Int32) -> State { slots[Int(i)].state }
    public func op(_ i: Int32) -> OnceOp { slots[Int(i)].op }
    public func fingerprint(_ i: Int32) -> UInt64 { slots[Int(i)].fingerprint }
    public func key(_ i: Int32) -> String { withKey(i) { String(decoding: $0, as: UTF8.self) } }

    /// Lends the bytes of entry `i`'s key where they lie.
    public func withKey<R>(_ i: Int32, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let s = slots[Int(i)]
        return body(UnsafeRawBufferPointer(start: chunks[s.chunk &- firstChunk] + Int(s.at), count: Int(s.keyCount)))
    }

    /// The outcome of an ended entry, as an array of its own; nil before it ended.
    public func outcome(_ i: Int32) -> OnceOutcome? {
        guard slots[Int(i)].state == .ended else { return nil }
        return withOutcome(i) { isError, bytes in isError ? .error(RawJSON(bytes)) : .result(RawJSON(bytes)) }
    }

    /// Lends an ended entry's outcome, whether it is an error and its bytes, where it lies.
    public func withOutcome<R>(_ i: Int32, _ body: (Bool, UnsafeRawBufferPointer) -> R) -> R {
        let s = slots[Int(i)]
        let at = chunks[s.chunk &- firstChunk] + Int(s.at) + Int(s.keyCount)
        return body(s.outcomeIsError, UnsafeRawBufferPointer(start: at, count: Int(s.outcomeCount)))
    }

    // MARK: Changes

    /// Holds `key` (whose `hash` this table gave) as pending (or running) and returns its
    /// entry. The key must not be held.
    @discardableResult
    public mutating func insert(
        _ key: UnsafeRawBufferPointer, hash h: UInt64, op: OnceOp, fingerprint: UInt64, state: State = .pending, wallMs: Int64
    ) -> Int32 {
        if count >= bucketCount { grow() }
        let i = newSlot()
        let b = Int(h & UInt64(bucketCount &- 1))
        if tail == nil || tailUsed &+ key.count > tailCapacity { newChunk(holding: key.count) }
        let at = tailUsed
        OnceTable.copyKey(key, to: tail.unsafelyUnwrapped + at)
        tailUsed = at &+ key.count
        tailPending &+= 1
        (slots + Int(i)).initialize(
            to: Slot(
                hash: h, fingerprint: fingerprint, wallMs: wallMs, chunk: tailChunk, at: Int32(truncatingIfNeeded: at),
                keyCount: Int32(truncatingIfNeeded: key.count), outcomeCount: 0, chained: buckets[b], older: -1, newer: -1, op: op,
                state: state, outcomeIsError: false, live: true))
        buckets[b] = i
        count &+= 1
        bytes &+= key.count
        return i
    }

    /// Copies a key into the arena: one of 8 to 32 bytes as two or four words (which may
    /// overlap), a key's usual length, inline; others through `memmove` (chain3-once's 11-byte
    /// keys: the call cost more than the copy).
    @inline(__always)
    static func copyKey(_ key: UnsafeRawBufferPointer, to target: UnsafeMutableRawPointer) {
        let n = key.count
        guard let source = key.baseAddress else { return }
        guard n >= 8 && n <= 32 else { return target.copyMemory(from: source, byteCount: n) }
        let first = source.loadUnaligned(as: UInt64.self), last = source.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)
        if n > 16 {
            let second = source.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
            let third = source.loadUnaligned(fromByteOffset: n &- 16, as: UInt64.self)
            target.storeBytes(of: second, toByteOffset: 8, as: UInt64.self)
            target.storeBytes(of: third, toByteOffset: n &- 16, as: UInt64.self)
        }
        target.storeBytes(of: first, as: UInt64.self)
        target.storeBytes(of: last, toByteOffset: n &- 8, as: UInt64.self)
    }

    /// `insert` with the key hashed here.
    @discardableResult
    public mutating func insert(_ key: String, op: OnceOp, fingerprint: UInt64, state: State = .pending, wallMs: Int64) -> Int32 {
        OnceTable.withUTF8(key) { insert($0, hash: hash(utf8: $0), op: op, fingerprint: fingerprint, state: state, wallMs: wallMs) }
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

    /// `end` with the outcome's bytes lent (they are copied into the arena). An entry ended
    /// before (a journal's later record of the same key) takes the new outcome.
    @discardableResult
    public mutating func end(_ i: Int32, isError: Bool, outcome: UnsafeRawBufferPointer, wallMs: Int64) -> [OnceWaiter] {
        let waiting = waiters.isEmpty ? [] : waiters.removeValue(forKey: i) ?? []
        endUnawaited(i, isError: isError, outcome: outcome, wallMs: wallMs)
        return waiting
    }

    /// Whether repeats wait for the outcome of entry `i`.
    public func isAwaited(_ i: Int32) -> Bool { !waiters.isEmpty && waiters[i] != nil }

    /// `end` for an entry no repeat waits for (`isAwaited` false): no list of them is made,
    /// returned and let go (chain3-once: 34 instructions per post). Inlined where a post ends.
    @inline(__always)
    public mutating func endUnawaited(_ i: Int32, isError: Bool, outcome: UnsafeRawBufferPointer, wallMs: Int64) {
        assert(!isAwaited(i), "a once key ended without its waiting repeats")
        let s = slots[Int(i)]
        let p = slots + Int(i)
        if s.state != .ended && s.chunk == tailChunk && Int(s.at) &+ Int(s.keyCount) == tailUsed
            && tailUsed &+ outcome.count <= tailCapacity
        {
            // The key is the arena's last bytes: its outcome follows it there.
            tailPending &-= 1
            if let source = outcome.baseAddress { (tail.unsafelyUnwrapped + tailUsed).copyMemory(from: source, byteCount: outcome.count) }
            tailUsed &+= outcome.count
        } else {
            storeAnew(i, outcome)
        }
        bytes &+= outcome.count
        let older = newest
        p.pointee.state = .ended
        p.pointee.wallMs = wallMs
        p.pointee.outcomeCount = Int32(truncatingIfNeeded: outcome.count)
        p.pointee.outcomeIsError = isError
        p.pointee.older = older
        p.pointee.newer = -1
        if older >= 0 { slots[Int(older)].newer = i } else { oldest = i }
        newest = i
        forgetPastBounds(nowMs: wallMs)
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
        unchain(i, slot)
        if slot.state == .ended {
            if slot.older >= 0 { slots[Int(slot.older)].newer = slot.newer } else { oldest = slot.newer }
            if slot.newer >= 0 { slots[Int(slot.newer)].older = slot.older } else { newest = slot.older }
        } else {
            // A key refused as soon as it was held is the arena's last bytes: they are taken back.
            if slot.chunk == tailChunk && Int(slot.at) &+ Int(slot.keyCount) == tailUsed { tailUsed = Int(slot.at) }
            leavePending(slot.chunk)
        }
        free(i, slot, ended: slot.state == .ended)
        return waiters.isEmpty ? [] : waiters.removeValue(forKey: i) ?? []
    }

    /// Forgets ended keys, oldest first, while a bound is passed at `nowMs`.
    @inline(__always)
    public mutating func forgetPastBounds(nowMs: Int64) {
        while oldest >= 0 && (count > limits.maxKeys || bytes > limits.maxBytes || isExpired(slots[Int(oldest)].wallMs, nowMs: nowMs)) {
            forgetOldest()
        }
    }

    /// `remove` for the oldest ended entry, which no repeat waits for (they are answered when
    /// it ends), whose key lies in the arena and which has no older neighbour: what a table
    /// in its steady state does once per key it ends (chain3-once: 46 instructions fewer per
    /// post than through `remove`, and 18 more inlined with `forgetPastBounds` where a key
    /// ends).
    @inline(__always)
    private mutating func forgetOldest() {
        let i = oldest
        let slot = slots[Int(i)]
        unchain(i, slot)
        oldest = slot.newer
        if slot.newer >= 0 { slots[Int(slot.newer)].older = -1 } else { newest = -1 }
        free(i, slot, ended: true)
    }

    /// Entry `i` (`slot`, `ended` or not), out of its bucket's chain and of the order of
    /// ending (or of its chunk's pending keys), joins the dead slots; its bytes leave the
    /// count, and the arena's first chunks go once nothing held is left in them. `ended` is
    /// passed, not read from `slot`, so that `forgetOldest` pays no test for it.
    @inline(__always)
    private mutating func free(_ i: Int32, _ slot: Slot, ended: Bool) {
        slots[Int(i)].live = false
        slots[Int(i)].chained = deadSlot
        deadSlot = i
        count &-= 1
        bytes &-= Int(slot.keyCount) &+ (ended ? Int(slot.outcomeCount) : 0)
        if slot.chunk == firstChunk && chunks.count > 1 && (oldest < 0 || slots[Int(oldest)].chunk != firstChunk) {
            dropOldChunks()
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
        for i in 0..<slotCount where slots[Int(i)].live && slots[Int(i)].state != .ended {
            all.append(record(i))
        }
        return all
    }

    private func record(_ i: Int32) -> OnceRecord {
        let s = slots[Int(i)]
        return OnceRecord(key: key(i), op: s.op, fingerprint: s.fingerprint, wallMs: s.wallMs, outcome: outcome(i))
    }

    /// Ended keys from the oldest: their text, for tests of the window's order.
    public var endedKeys: [String] {
        var all: [String] = []
        var i = oldest
        while i >= 0 {
            all.append(key(i))
            i = slots[Int(i)].newer
        }
        return all
    }

    /// Chunks of the arena held (tests: they are freed once the oldest outcome left them).
    public var chunkCount: Int { chunks.count }

    /// Keys not yet ended, as the arena's chunks count them (tests: each is counted from when
    /// it is held until it ends or is forgotten).
    public var pendingKeys: Int {
        olderPending.reduce(Int(tailPending)) { $0 &+ Int($1) }
    }

    // MARK: Internals

    private func isExpired(_ wallMs: Int64, nowMs: Int64) -> Bool {
        nowMs &- wallMs >= limits.maxAgeMs
    }

    @inline(__always)
    private static func withUTF8<R>(_ text: String, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        if let r = text.utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) { return r }
        var text = text
        return text.withUTF8 { body(UnsafeRawBufferPointer($0)) }
    }

    /// A free slot: a dead one, or else a slot never used. The first case inlined.
    @inline(__always)
    private mutating func newSlot() -> Int32 {
        guard deadSlot >= 0 else { return unusedSlot() }
        let i = deadSlot
        deadSlot = slots[Int(i)].chained
        return i
    }

    /// A slot never used, the block grown (doubled) when none is left.
    private mutating func unusedSlot() -> Int32 {
        if slotCount == slotCapacity {
            let capacity = Swift.max(64, Int(slotCapacity) &* 2)
            let grown = UnsafeMutablePointer<Slot>.allocate(capacity: capacity)
            grown.moveInitialize(from: slots, count: Int(slotCount))
            slots.deallocate()
            slots = grown
            slotCapacity = Int32(capacity)
        }
        slotCount &+= 1
        return slotCount &- 1
    }

    /// `end`'s other way: the entry's key and its outcome are written, one after the other, at
    /// the end of the newest chunk (a fresh one when they do not fit). An entry ended before
    /// leaves the order of ending and its old outcome the count; one not yet ended leaves its
    /// chunk's pending keys.
    @inline(never)
    private mutating func storeAnew(_ i: Int32, _ outcome: UnsafeRawBufferPointer) {
        let s = slots[Int(i)]
        let key = UnsafeRawPointer(chunks[s.chunk &- firstChunk] + Int(s.at)), keyCount = Int(s.keyCount)
        let n = keyCount &+ outcome.count
        // A fresh chunk is added after the others: the key's stays where it is meanwhile.
        if tail == nil || tailUsed &+ n > tailCapacity { newChunk(holding: n) }
        let at = tailUsed
        let p = tail.unsafelyUnwrapped + at
        p.copyMemory(from: key, byteCount: keyCount)
        if let source = outcome.baseAddress { (p + keyCount).copyMemory(from: source, byteCount: outcome.count) }
        tailUsed = at &+ n
        if s.state == .ended {
            unlinkOrder(i)
            bytes &-= Int(s.outcomeCount)
        } else {
            leavePending(s.chunk)
        }
        slots[Int(i)].chunk = tailChunk
        slots[Int(i)].at = Int32(truncatingIfNeeded: at)
        if s.chunk == firstChunk && chunks.count > 1 { dropOldChunks() }
    }

    /// A key not yet ended leaves the count of its chunk.
    @inline(__always)
    private mutating func leavePending(_ chunk: Int) {
        if chunk == tailChunk { tailPending &-= 1 } else { olderPending[chunk &- firstChunk] &-= 1 }
    }

    /// Starts a chunk of at least `n` bytes as the newest.
    private mutating func newChunk(holding n: Int) {
        let capacity = Swift.max(OnceTable.chunkSize, n)
        let base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
        if tail != nil { olderPending.append(tailPending) }
        tailPending = 0
        chunks.append(base)
        tailChunk = firstChunk &+ chunks.count &- 1
        tail = base
        tailUsed = 0
        tailCapacity = capacity
    }

    /// Frees the chunks before the oldest outcome's and before the first that holds a key not
    /// yet ended (the newest one is kept to write into).
    private mutating func dropOldChunks() {
        var drop = (oldest >= 0 ? slots[Int(oldest)].chunk : tailChunk) &- firstChunk
        if let pending = olderPending.firstIndex(where: { $0 != 0 }) { drop = Swift.min(drop, pending) }
        drop = Swift.min(drop, chunks.count &- 1)
        guard drop > 0 else { return }
        for c in chunks[..<drop] { c.deallocate() }
        chunks.removeFirst(drop)
        olderPending.removeFirst(drop)
        firstChunk &+= drop
    }

    /// Takes entry `i` (`slot`) out of its bucket's chain.
    @inline(__always)
    private mutating func unchain(_ i: Int32, _ slot: Slot) {
        let b = Int(slot.hash & UInt64(bucketCount &- 1))
        if buckets[b] == i {
            buckets[b] = slot.chained
        } else {
            var j = buckets[b]
            while slots[Int(j)].chained != i { j = slots[Int(j)].chained }
            slots[Int(j)].chained = slot.chained
        }
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
        buckets.deallocate()
        bucketCount &*= 2
        buckets = .allocate(capacity: bucketCount)
        buckets.initialize(repeating: -1, count: bucketCount)
        let mask = UInt64(bucketCount &- 1)
        for i in 0..<slotCount where slots[Int(i)].live {
            let b = Int(slots[Int(i)].hash & mask)
            slots[Int(i)].chained = buckets[b]
            buckets[Int(b)] = i
        }
    }
}
