// Durable slots and categories for `--state-dir`: an append-only journal of checksummed
// records, synced before the replies that acknowledge them are written, and compacted
// into a fresh file (temp file, fsync, rename, fsync folder) at start and when it grows.
// It must never let a torn tail or a corrupt record stop the broker from starting.
//
// File: "NBJRNL01", then records: length u32be | crc32 u32be | body
// body: kind u8 (1 slot value, 2 slot emptied, 3 categories) | name length u16be | name | value
import Glibc
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
    }

    public let directory: String
    public private(set) var slots: [String: RawJSON] = [:]
    public private(set) var categories: CategorySet? = nil
    /// Problems found while loading, for the caller to report.
    public private(set) var warnings: [String] = []

    private var fd: Int32 = -1
    private var fileBytes = 0
    private var liveBytes = 0
    private var unsynced = false

    var path: String { directory + "/" + StateJournal.fileName }

    /// Opens (creating it and its missing parents with mode 0700) the folder and loads what
    /// is valid.
    public init(directory: String) throws {
        self.directory = directory
        try StateJournal.createParents(of: directory)
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
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
        try load()
        try compact()
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// Creates the missing folders above `directory` with mode 0700, as `mkdir -p -m 0700`
    /// would (a fresh account has no `~/.local/state`). Existing folders are left as they are.
    static func createParents(of directory: String) throws {
        var prefix = directory.hasPrefix("/") ? "" : "."
        let parts = directory.split(separator: "/", omittingEmptySubsequences: true).dropLast()
        for part in parts {
            prefix += "/" + part
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw SystemError("mkdir \(prefix)")
            }
        }
    }

    // MARK: Recording

    /// Appends a slot's new value; false when it could not be written.
    @discardableResult
    public func recordSlot(name: String, value: RawJSON?) -> Bool {
        guard append(value == nil ? .slotEmptied : .slotValue, name: name, value: value ?? []) else { return false }
        if let value { slots[name] = value } else { slots[name] = nil }
        return true
    }

    /// Appends the category set; false when it could not be written.
    @discardableResult
    public func recordCategories(_ raw: RawJSON) -> Bool {
        guard append(.categories, name: "", value: raw) else { return false }
        categories = try? CategorySet.parse(raw)
        return true
    }

    /// Makes every recorded change durable. Called once per batch, before replies go out;
    /// false when the changes since the last sync may not be on disk.
    public func syncIfNeeded() -> Bool {
        guard unsynced else { return true }
        unsynced = false
        guard fdatasync(fd) == 0 else {
            logLine("notifbus: state journal: \(SystemError("fdatasync \(path)"))")
            return false
        }
        if fileBytes > 4 * liveBytes + (1 << 20) {
            do { try compact() } catch { logLine("notifbus: state journal: compaction failed: \(error)") }
        }
        return true
    }

    /// Writes one record; on failure cuts the file back, so no torn record hides later ones.
    private func append(_ kind: Kind, name: String, value: [UInt8]) -> Bool {
        let record = StateJournal.encode(kind, name: name, value: value)
        guard record.withUnsafeBytes({ writeAll(fd, $0) }) else {
            logLine("notifbus: state journal: \(SystemError("write \(path)")); the write is refused")
            if ftruncate(fd, off_t(fileBytes)) != 0 {
                logLine("notifbus: state journal: \(SystemError("ftruncate \(path)"))")
            }
            return false
        }
        fileBytes += record.count
        unsynced = true
        liveBytes = currentLiveBytes()
        return true
    }

    private func currentLiveBytes() -> Int {
        var n = StateJournal.magic.count + (categories?.raw.count ?? 0)
        for (k, v) in slots { n += 9 + k.utf8.count + v.count }
        return n
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
        record.append(contentsOf: [UInt8(truncatingIfNeeded: crc >> 24), UInt8(truncatingIfNeeded: crc >> 16),
                                   UInt8(truncatingIfNeeded: crc >> 8), UInt8(truncatingIfNeeded: crc)])
        record.append(contentsOf: body)
        return record
    }

    // MARK: Loading and compaction

    private func load() throws {
        let fileFD = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fileFD < 0 {
            if errno == ENOENT { return }
            throw SystemError("open \(path)")
        }
        let data = readAll(fileFD)
        close(fileFD)
        guard let data else { throw SystemError("read \(path)") }
        if let problem = replay(data) {
            // link() never replaces an existing file, so earlier bad files are all kept.
            var aside = path + ".corrupt-\(time(nil))"
            var n = 1
            var kept = false
            while true {
                if link(path, aside) == 0 {
                    kept = unlink(path) == 0
                    break
                }
                if errno == EEXIST && n < 1000 {
                    aside = path + ".corrupt-\(time(nil))-\(n)"
                    n += 1
                    continue
                }
                // A file system without hard links: rename, having checked the name is free.
                kept = access(aside, F_OK) != 0 && rename(path, aside) == 0
                break
            }
            if kept {
                warnings.append("state journal \(path): \(problem); kept what was valid before it, moved the file to \(aside)")
            } else {
                throw StateDirectoryError("state journal \(path): \(problem); it could not be set aside (\(SystemError("link"))), so it is left untouched")
            }
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
                guard Names.isValid(name), (try? JSONValue(parsing: value)) != nil else { return "bad slot record at byte \(offset)" }
                slots[name] = value
            case .slotEmptied?:
                slots[name] = nil
            case .categories?:
                guard let set = try? CategorySet.parse(value) else { return "bad categories record at byte \(offset)" }
                categories = set
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
        let tmp = path + ".tmp"
        // A fresh file, never through a link someone planted.
        unlink(tmp)
        let tmpFD = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard tmpFD >= 0 else { throw SystemError("open \(tmp)") }
        let written = data.withUnsafeBytes { writeAll(tmpFD, $0) }
        guard written, fsync(tmpFD) == 0 else {
            let error = SystemError("write \(tmp)")
            close(tmpFD)
            throw error
        }
        close(tmpFD)
        guard rename(tmp, path) == 0 else { throw SystemError("rename \(tmp)") }
        let dirFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            fsync(dirFD)
            close(dirFD)
        }
        if fd >= 0 { close(fd) }
        fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw SystemError("open \(path)") }
        fileBytes = data.count
        liveBytes = data.count
        unsynced = false
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

func readAll(_ fd: Int32) -> [UInt8]? {
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            return nil
        }
        if n == 0 { return out }
        out.append(contentsOf: chunk[0..<n])
    }
}

/// Why a `--state-dir` cannot be used.
public struct StateDirectoryError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
