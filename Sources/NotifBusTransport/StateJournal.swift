// Durable slots, categories and idempotency keys for `--state-dir`: an append-only journal
// of checksummed records, synced before the changes they carry take effect, and compacted
// into a fresh file (temp file, fsync, rename, fsync folder) at start and when it grows. It
// must never let a torn tail or a corrupt record stop the broker from starting, nor a full
// disk: then compaction waits and the journal is used as it is. Only a regular file is a
// journal. A key is written in the same record as the change it belongs to, so that a crash
// never keeps one without the other; the keys on disk are held in the broker's own window
// (`OnceTable`), so that compaction keeps what the broker would still remember.
//
// File: "NBJRNL01", then records: length u32be | crc32 u32be | body
// body: kind u8 (1 slot value, 2 slot emptied, 3 categories, 4 keyed) | name length u16be | name | value
// keyed (kind 4, name empty), value: key count u16be, then per key:
//     key length u16be | key | op u8 | fingerprint u64be | wall-clock ms i64be |
//     outcome kind u8 (0 running, 1 result, 2 error) | outcome length u32be | outcome
//   then the change: kind u8 (0 none, 1 slot value, 2 slot emptied, 3 categories) |
//     name length u16be | name | value (the rest)
import Glibc
import NotifBusCore
import NotifBusProtocol

public final class StateJournal {
    static let fileName = "state.journal"
    static let magic: [UInt8] = Array("NBJRNL01".utf8)
    /// Records above this are corrupt: nothing the broker writes comes near it.
    static let maxRecordBytes = 64 << 20

    enum Kind: UInt8 {
        case slotValue = 1
        case slotEmptied = 2
        case categories = 3
        case keyed = 4
    }

    /// After a compaction failed, the next try waits until the file has grown this much
    /// more, so that a full disk does not turn every sync into a failed rewrite.
    static let compactionRetryBytes = 256 << 10

    public let directory: String
    /// The state on disk: every synced record applied.
    public private(set) var slots: [String: RawJSON] = [:]
    public private(set) var categories: CategorySet? = nil
    /// The idempotency keys on disk, in the broker's window.
    public private(set) var once: OnceTable
    /// The newest wall-clock time any key record carries: the window's ages on disk are
    /// counted to it (never to a later clock, so the journal forgets no key the broker keeps).
    private var newestKeyMs = Int64.min
    /// Problems found while loading, for the caller to report.
    public private(set) var warnings: [String] = []

    private var fd: Int32 = -1
    private var fileBytes = 0
    /// The file's length at the last successful sync: a failed sync cuts it back to this.
    private var syncedBytes = 0
    private var liveBytes = 0
    /// A sync is in flight (`beginSync`): the descriptor stays as it is until `endSync`.
    private var syncing = false
    /// Records appended since the last sync, applied to `slots` and `categories` once synced.
    private var unsynced: [(kind: Kind, name: String, value: [UInt8])] = []
    /// No usable journal file is open (the one found was set aside and no fresh one could be
    /// written): the next write first tries to write one.
    private var needsFreshFile = false
    private var compactionRetryAt = 0
    /// Set while compaction is postponed, so that it is reported once.
    private var compactionPostponed = false

    var path: String { directory + "/" + StateJournal.fileName }

    /// Opens (creating it and its missing parents with mode 0700) the folder and loads what
    /// is valid. Keys are held within `onceLimits` (the broker's `--once-*` flags); keys
    /// whose post was running when the broker stopped are held as `interrupted`.
    public init(directory: String, onceLimits: OnceLimits = OnceLimits()) throws {
        self.directory = directory
        once = OnceTable(limits: onceLimits)
        try StateJournal.createParents(of: directory)
        if !makePrivateFolder(directory) {
            throw SystemError("mkdir \(directory)")
        }
        var st = stat()
        guard lstat(directory, &st) == 0 else { throw SystemError("lstat \(directory)") }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            throw StateDirectoryError("\(directory) is not a folder (a symbolic link is refused too)")
        }
        // Another user who owns or can write the folder could plant links or forge state.
        guard st.st_uid == getuid() || st.st_uid == 0 else {
            throw StateDirectoryError("refusing state folder \(directory): owned by uid \(st.st_uid), not by \(getuid())")
        }
        guard st.st_mode & (S_IWGRP | S_IWOTH) == 0 else {
            throw StateDirectoryError("refusing state folder \(directory): other users can write to it")
        }
        let clean = try load()
        for r in once.records where r.outcome == nil { applyKey(r.ended(with: .interrupted)) }
        do {
            try compact()
        } catch {
            // A full disk: start from the journal as it is, and compact later.
            compactionPostponed = true
            compactionRetryAt = fileBytes + StateJournal.compactionRetryBytes
            if clean, let size = openForAppending() {
                fileBytes = size
                syncedBytes = size
                warnings.append("state journal \(path): compaction postponed (\(error)); using the journal as it is")
            } else {
                needsFreshFile = true
                warnings.append("state journal \(path): no fresh journal could be written (\(error)); writes fail until one can be")
            }
        }
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// Creates the missing folders above `directory`, each with mode 0700 (a fresh account
    /// has no `~/.local/state`); stricter than `mkdir -p -m 0700`, which gives that mode only
    /// to the last folder. Existing folders are left as they are.
    static func createParents(of directory: String) throws {
        var prefix = directory.hasPrefix("/") ? "" : "."
        let parts = directory.split(separator: "/", omittingEmptySubsequences: true).dropLast()
        for part in parts {
            prefix += "/" + part
            if !makePrivateFolder(prefix) {
                throw SystemError("mkdir \(prefix)")
            }
        }
    }

    // MARK: Recording

    /// Appends a slot's new value (nil: emptied); false when it could not be written.
    public func recordSlot(name: String, value: RawJSON?) -> Bool {
        append(value == nil ? .slotEmptied : .slotValue, name: name, value: value ?? [])
    }

    /// Appends the category set; false when it could not be written.
    public func recordCategories(_ raw: RawJSON) -> Bool {
        append(.categories, name: "", value: raw)
    }

    /// Appends one write of the broker: its change and its keys in one record (a change
    /// without keys as the record of its own kind); false when it could not be written.
    public func record(_ change: StateRecord, once keys: [OnceRecord]) -> Bool {
        guard keys.isEmpty else { return append(.keyed, name: "", value: StateJournal.encodeKeyed(change, keys)) }
        switch change {
        case .slot(let name, let value): return recordSlot(name: name, value: value)
        case .categories(let raw): return recordCategories(raw)
        case .keysOnly: return true
        }
    }

    /// Makes every record appended since the last call durable, in line. Called before the
    /// changes take effect; false when they may not be on disk, and then they are cut off
    /// the file again, so that disk and memory keep agreeing.
    public func syncIfNeeded() -> Bool {
        guard let ticket = beginSync() else { return true }
        return endSync(ticket, errno: fdatasync(ticket.fd) == 0 ? 0 : errno)
    }

    /// A sync in flight: the descriptor to sync, and the records and bytes it covers.
    public struct SyncTicket: Sendable {
        public let fd: Int32
        let records: Int
        let bytes: Int
    }

    /// Starts making the records appended so far durable: the caller runs `fdatasync` on
    /// the ticket's descriptor (another thread may), then `endSync`. Until then the file is
    /// neither compacted nor replaced, and records appended meanwhile wait for the next
    /// sync. Nil when every record is on disk already.
    public func beginSync() -> SyncTicket? {
        precondition(!syncing, "one journal sync at a time")
        guard !unsynced.isEmpty else { return nil }
        syncing = true
        return SyncTicket(fd: fd, records: unsynced.count, bytes: fileBytes)
    }

    /// Ends the sync of `ticket` with fdatasync's `errno` (0: it worked): its records are
    /// applied to the state on disk. False when it failed: then every record not yet on disk,
    /// those appended after the ticket too, is cut off the file. Compaction runs here, when
    /// nothing is left unsynced (`compactionDue` tells a caller to sync the rest in line).
    public func endSync(_ ticket: SyncTicket, errno code: Int32) -> Bool {
        syncing = false
        guard code == 0 else {
            logLine("notifbus: state journal: \(SystemError("fdatasync \(path)", code: code)); \(unsynced.count) change(s) refused")
            unsynced.removeAll()
            cutBack(to: syncedBytes)
            return false
        }
        syncedBytes = ticket.bytes
        for r in unsynced.prefix(ticket.records) {
            switch r.kind {
            case .slotValue: slots[r.name] = r.value
            case .slotEmptied: slots[r.name] = nil
            case .categories: categories = try? CategorySet.parse(r.value)
            case .keyed: _ = applyKeyed(r.value)
            }
        }
        unsynced.removeFirst(ticket.records)
        liveBytes = currentLiveBytes()
        if unsynced.isEmpty && compactionDue {
            do {
                try compact()
                if compactionPostponed { logLine("notifbus: state journal: compacted \(path) again") }
                compactionPostponed = false
            } catch {
                compactionRetryAt = fileBytes + StateJournal.compactionRetryBytes
                if !compactionPostponed { logLine("notifbus: state journal: compaction postponed: \(error)") }
                compactionPostponed = true
            }
        }
        return true
    }

    /// Whether the file has grown enough past the live state to be rewritten at the next
    /// sync that leaves nothing unsynced.
    public var compactionDue: Bool {
        fileBytes > 4 * liveBytes + (1 << 20) && fileBytes >= compactionRetryAt
    }

    /// Writes one record; on failure cuts the file back, so no torn record hides later ones.
    private func append(_ kind: Kind, name: String, value: [UInt8]) -> Bool {
        if needsFreshFile {
            // The file is replaced only while no sync uses its descriptor.
            guard !syncing else {
                logLine("notifbus: state journal: no journal file while a sync is in flight; the write is refused")
                return false
            }
            // The live state has to be on disk before any change to it can be.
            do {
                try compact()
                needsFreshFile = false
                compactionPostponed = false
            } catch {
                logLine("notifbus: state journal: \(error); the write is refused")
                return false
            }
        }
        let record = StateJournal.encode(kind, name: name, value: value)
        guard record.withUnsafeBytes({ writeAll(fd, $0) }) else {
            logLine("notifbus: state journal: \(SystemError("write \(path)")); the write is refused")
            cutBack(to: fileBytes)
            return false
        }
        fileBytes += record.count
        unsynced.append((kind, name, value))
        return true
    }

    private func cutBack(to length: Int) {
        if ftruncate(fd, off_t(length)) != 0 {
            logLine("notifbus: state journal: \(SystemError("ftruncate \(path)"))")
        }
        fileBytes = length
    }

    private func currentLiveBytes() -> Int {
        var n = StateJournal.magic.count + (categories?.raw.count ?? 0)
        for (k, v) in slots { n += 9 + k.utf8.count + v.count }
        // A key's record: its text and outcome, and about 48 bytes of framing and fields.
        return n + once.bytes + once.count * 48
    }

    static func encode(_ kind: Kind, name: String, value: [UInt8]) -> [UInt8] {
        var body: [UInt8] = [kind.rawValue]
        let nameBytes = Array(name.utf8)
        body.append(UInt8(truncatingIfNeeded: nameBytes.count >> 8))
        body.append(UInt8(truncatingIfNeeded: nameBytes.count))
        body.append(contentsOf: nameBytes)
        body.append(contentsOf: value)
        var record = FrameHeader.encode(length: body.count)
        let crc = CRC32.checksum(body)
        record.append(contentsOf: [
            UInt8(truncatingIfNeeded: crc >> 24), UInt8(truncatingIfNeeded: crc >> 16),
            UInt8(truncatingIfNeeded: crc >> 8), UInt8(truncatingIfNeeded: crc),
        ])
        record.append(contentsOf: body)
        return record
    }

    // MARK: Loading and compaction

    /// Loads the journal; false when it was damaged and set aside.
    private func load() throws -> Bool {
        // Never block on a FIFO or a device, never follow a link: a regular file or nothing.
        let fileFD = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        if fileFD < 0 {
            let e = errno
            if e == ENOENT { return true }
            var st = stat()
            if lstat(path, &st) == 0 && (st.st_mode & S_IFMT) != S_IFREG {
                throw StateDirectoryError("state journal \(path) is \(StateJournal.describe(st.st_mode)), not a regular file; move it away")
            }
            throw SystemError("open \(path)", code: e)
        }
        var st = stat()
        guard fstat(fileFD, &st) == 0 else {
            let error = SystemError("fstat \(path)")
            close(fileFD)
            throw error
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            close(fileFD)
            throw StateDirectoryError("state journal \(path) is \(StateJournal.describe(st.st_mode)), not a regular file; move it away")
        }
        let data = readAll(fileFD)
        close(fileFD)
        guard let data else { throw SystemError("read \(path)") }
        fileBytes = data.count
        if let problem = replay(data) {
            // The damaged file stays where it is until a fresh journal replaces it (compaction
            // renames over it): a crash or a full disk before then leaves it to be read again,
            // never an empty folder. A second name keeps it for inspection: link() never
            // replaces an existing file, so earlier bad files are all kept.
            var aside = path + ".corrupt-\(time(nil))"
            var n = 1
            var kept = false
            while true {
                if link(path, aside) == 0 {
                    kept = true
                    break
                }
                if errno == EEXIST && n < 1000 {
                    aside = path + ".corrupt-\(time(nil))-\(n)"
                    n += 1
                    continue
                }
                // A file system without hard links: a copy, under a name that is free.
                kept = StateJournal.writeCopy(data, to: aside)
                break
            }
            if kept {
                warnings.append("state journal \(path): \(problem); kept what was valid before it, kept the file as \(aside)")
            } else {
                throw StateDirectoryError(
                    "state journal \(path): \(problem); it could not be set aside (\(SystemError("link"))), so it is left untouched")
            }
            fileBytes = 0
            return false
        }
        return true
    }

    /// Writes `data` to a new file at `path` (never through a link, never over a file) and
    /// syncs it; false, leaving nothing behind, when that fails.
    static func writeCopy(_ data: [UInt8], to path: String) -> Bool {
        let copyFD = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard copyFD >= 0 else { return false }
        let written = data.withUnsafeBytes { writeAll(copyFD, $0) } && fsync(copyFD) == 0
        close(copyFD)
        if !written { unlink(path) }
        return written
    }

    /// Opens the existing journal for appending; nil when it cannot be.
    private func openForAppending() -> Int? {
        let appendFD = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard appendFD >= 0 else { return nil }
        var st = stat()
        guard fstat(appendFD, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            close(appendFD)
            return nil
        }
        if fd >= 0 { close(fd) }
        fd = appendFD
        return Int(st.st_size)
    }

    static func describe(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: return "a FIFO"
        case S_IFSOCK: return "a socket"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFLNK: return "a symbolic link"
        case S_IFDIR: return "a folder"
        default: return "not a regular file"
        }
    }

    /// Applies every valid record; returns a description of the first bad one.
    func replay(_ data: [UInt8]) -> String? {
        guard data.count >= StateJournal.magic.count, Array(data[0..<8]) == StateJournal.magic else {
            return data.isEmpty ? nil : "bad header"
        }
        var offset = StateJournal.magic.count
        while offset < data.count {
            guard data.count - offset >= 8 else { return "truncated record header at byte \(offset)" }
            let length = Int(data[offset]) << 24 | Int(data[offset + 1]) << 16 | Int(data[offset + 2]) << 8 | Int(data[offset + 3])
            let crc = UInt32(data[offset + 4]) << 24 | UInt32(data[offset + 5]) << 16 | UInt32(data[offset + 6]) << 8 | UInt32(data[offset + 7])
            guard length >= 3, length <= StateJournal.maxRecordBytes else { return "bad record length \(length) at byte \(offset)" }
            guard data.count - offset - 8 >= length else { return "truncated record at byte \(offset)" }
            let body = Array(data[(offset + 8)..<(offset + 8 + length)])
            guard CRC32.checksum(body) == crc else { return "checksum mismatch at byte \(offset)" }
            let nameLength = Int(body[1]) << 8 | Int(body[2])
            guard 3 + nameLength <= body.count else { return "bad name length at byte \(offset)" }
            let name = String(decoding: body[3..<(3 + nameLength)], as: UTF8.self)
            let value = Array(body[(3 + nameLength)...])
            switch Kind(rawValue: body[0]) {
            case .slotValue?:
                // The wire's own validator: whatever a put was accepted with is read back.
                guard Names.isValid(name), JSONScanner.isValidDocument(value) else { return "bad slot record at byte \(offset)" }
                slots[name] = value
            case .slotEmptied?:
                slots[name] = nil
            case .categories?:
                guard let set = try? CategorySet.parse(value) else { return "bad categories record at byte \(offset)" }
                categories = set
            case .keyed?:
                guard applyKeyed(value) else { return "bad keyed record at byte \(offset)" }
            case nil:
                return "unknown record kind \(body[0]) at byte \(offset)"
            }
            offset += 8 + length
        }
        return nil
    }

    /// Rewrites the journal as a snapshot of the live state and reopens it for appending.
    func compact() throws {
        var data = StateJournal.magic
        if let categories { data += StateJournal.encode(.categories, name: "", value: categories.raw) }
        for name in slots.keys.sorted() {
            data += StateJournal.encode(.slotValue, name: name, value: slots[name]!)
        }
        // Oldest first, as the window forgets them.
        for key in once.records {
            data += StateJournal.encode(.keyed, name: "", value: StateJournal.encodeKeyed(.keysOnly, [key]))
        }
        let tmp = path + ".tmp"
        // A fresh file, never through a link someone planted.
        unlink(tmp)
        let tmpFD = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard tmpFD >= 0 else { throw SystemError("open \(tmp)") }
        let written = data.withUnsafeBytes { writeAll(tmpFD, $0) }
        guard written, fsync(tmpFD) == 0 else {
            let error = SystemError("write \(tmp)")
            close(tmpFD)
            unlink(tmp)  // a partial copy must not keep the space a full disk lacks
            throw error
        }
        close(tmpFD)
        guard rename(tmp, path) == 0 else {
            let error = SystemError("rename \(tmp)")
            unlink(tmp)
            throw error
        }
        let dirFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            fsync(dirFD)
            close(dirFD)
        }
        if fd >= 0 { close(fd) }
        fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw SystemError("open \(path)") }
        fileBytes = data.count
        syncedBytes = data.count
        liveBytes = data.count
        compactionRetryAt = 0
    }
}

extension StateJournal {
    // MARK: Keyed records

    /// The value of a keyed record: the keys, then the change.
    static func encodeKeyed(_ change: StateRecord, _ keys: [OnceRecord]) -> [UInt8] {
        var out: [UInt8] = []
        func u16(_ n: Int) { out += [UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n)] }
        func u64(_ n: UInt64) { for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: n >> UInt64(shift))) } }
        u16(keys.count)
        for k in keys {
            u16(k.key.utf8.count)
            out += Array(k.key.utf8)
            out.append(k.op.rawValue)
            u64(k.fingerprint)
            u64(UInt64(bitPattern: k.wallMs))
            switch k.outcome {
            case nil:
                out += [0, 0, 0, 0, 0]  // running: no outcome, of length 0
            case .result(let raw)?, .error(let raw)?:
                if case .error = k.outcome { out.append(2) } else { out.append(1) }
                for shift in [24, 16, 8, 0] { out.append(UInt8(truncatingIfNeeded: raw.count >> shift)) }
                out += raw
            }
        }
        switch change {
        case .keysOnly: out += [0, 0, 0]
        case .slot(let name, let value):
            out.append(value == nil ? Kind.slotEmptied.rawValue : Kind.slotValue.rawValue)
            u16(name.utf8.count)
            out += Array(name.utf8)
            out += value ?? []
        case .categories(let raw):
            out.append(Kind.categories.rawValue)
            u16(0)
            out += raw
        }
        return out
    }

    /// A keyed record's value read back, each part checked as the wire checks it; nil when
    /// it is not one the broker writes.
    static func decodeKeyed(_ value: [UInt8]) -> (keys: [OnceRecord], change: StateRecord)? {
        var p = 0
        func take(_ n: Int) -> ArraySlice<UInt8>? {
            guard n >= 0, value.count - p >= n else { return nil }
            defer { p += n }
            return value[p..<(p + n)]
        }
        func uint(_ n: Int) -> UInt64? {
            guard let bytes = take(n) else { return nil }
            return bytes.reduce(0) { $0 << 8 | UInt64($1) }
        }
        guard let count = uint(2) else { return nil }
        var keys: [OnceRecord] = []
        for _ in 0..<count {
            guard let keyLength = uint(2), let keyBytes = take(Int(keyLength)), let opByte = uint(1),
                let op = OnceOp(rawValue: UInt8(opByte)), let fingerprint = uint(8), let wall = uint(8), let outcomeKind = uint(1),
                let outcomeLength = uint(4), let outcomeBytes = take(Int(outcomeLength))
            else { return nil }
            let key = String(decoding: keyBytes, as: UTF8.self)
            guard Names.isValid(key), Array(key.utf8) == Array(keyBytes) else { return nil }
            let outcome: OnceOutcome?
            switch outcomeKind {
            case 0:
                guard outcomeLength == 0 else { return nil }
                outcome = nil
            case 1, 2:
                let raw = Array(outcomeBytes)
                guard JSONScanner.isValidDocument(raw) else { return nil }
                outcome = outcomeKind == 1 ? .result(raw) : .error(raw)
            default: return nil
            }
            keys.append(OnceRecord(key: key, op: op, fingerprint: fingerprint, wallMs: Int64(bitPattern: wall), outcome: outcome))
        }
        guard let kind = uint(1), let nameLength = uint(2), let nameBytes = take(Int(nameLength)) else { return nil }
        let name = String(decoding: nameBytes, as: UTF8.self)
        let rest = Array(value[p...])
        switch kind {
        case 0:
            guard nameLength == 0, rest.isEmpty else { return nil }
            return (keys, .keysOnly)
        case UInt64(Kind.slotValue.rawValue):
            guard Names.isValid(name), JSONScanner.isValidDocument(rest) else { return nil }
            return (keys, .slot(name: name, value: rest))
        case UInt64(Kind.slotEmptied.rawValue):
            guard Names.isValid(name), rest.isEmpty else { return nil }
            return (keys, .slot(name: name, value: nil))
        case UInt64(Kind.categories.rawValue):
            guard nameLength == 0, (try? CategorySet.parse(rest)) != nil else { return nil }
            return (keys, .categories(rest))
        default:
            return nil
        }
    }

    /// Applies a keyed record's change and keys to the state on disk; false when it is not
    /// one the broker writes.
    func applyKeyed(_ value: [UInt8]) -> Bool {
        guard let (keys, change) = StateJournal.decodeKeyed(value) else { return false }
        switch change {
        case .keysOnly: break
        case .slot(let name, let value): slots[name] = value
        case .categories(let raw): categories = try? CategorySet.parse(raw)
        }
        for key in keys { applyKey(key) }
        return true
    }

    /// One key's record, held as the broker holds it: running, or ended with its outcome.
    func applyKey(_ r: OnceRecord) {
        newestKeyMs = Swift.max(newestKeyMs, r.wallMs)
        if let i = once.index(of: r.key), once.op(i) != r.op || once.fingerprint(i) != r.fingerprint || r.outcome == nil {
            // The broker forgot the key and it came back for another request (or runs again).
            once.remove(i)
        }
        let i = once.index(of: r.key) ?? once.insert(r.key, op: r.op, fingerprint: r.fingerprint, state: .running, wallMs: r.wallMs)
        if let outcome = r.outcome { once.end(i, outcome: outcome, wallMs: r.wallMs) }
        once.forgetPastBounds(nowMs: newestKeyMs)
    }
}

extension OnceRecord {
    /// The same key, ended with `outcome`.
    func ended(with outcome: OnceOutcome) -> OnceRecord {
        OnceRecord(key: key, op: op, fingerprint: fingerprint, wallMs: wallMs, outcome: outcome)
    }
}

func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
        if n < 0 {
            if errno == EINTR { continue }
            return false
        }
        offset += n
    }
    return true
}

/// Why a `--state-dir` cannot be used.
public struct StateDirectoryError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
