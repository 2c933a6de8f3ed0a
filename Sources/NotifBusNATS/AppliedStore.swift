// The bridge's persistent record of inbound message ids: an intent before a message goes to
// the broker, then its outcome once applied. Appended as JSON lines and fsynced per batch;
// bounded to the newest `window` applied ids. It must never forget an id inside the window.
import Glibc
import NotifBusProtocol

/// What the store knows of one inbound message id.
public enum AppliedState: Equatable {
    /// Intent `sequence` was recorded; whether it reached the broker is decided on recovery.
    case intended(sequence: Int64)
    /// Applied; `outcome` is the body of its result message (nil for puts).
    case applied(outcome: JSONValue?)
}

/// Why the store could not be opened or written.
public struct StoreError: Error, CustomStringConvertible {
    public let description: String
}

/// The log file `DIR/nats-<device>.applied`:
///
///     {"s":41}                                  highest intent sequence so far (after compaction)
///     {"i":42,"id":"m-1"}                       intent 42 for message id m-1, written before sending
///     {"a":"m-1","r":{...}}                     m-1 applied, with its result body
///     {"a":"m-2"}                               m-2 (a put) applied
///
/// A torn last line (a crash during the write) is cut off when the file is opened again.
public final class AppliedStore {
    /// The newest applied ids kept; older ones are forgotten (the documented window).
    public let window: Int
    /// nil keeps the store in memory only (exactly once while this process lives).
    private let path: String?
    private let folder: String?
    private var fd: Int32
    private var states: [String: AppliedState] = [:]
    /// Applied ids, oldest first, for trimming to the window (with a start index instead of shifting).
    private var appliedOrder: [String] = []
    private var appliedStart = 0
    private var pendingBytes: [UInt8] = []
    private var lines = 0
    /// The highest intent sequence ever recorded; the broker-side marker compares to it.
    public private(set) var lastSequence: Int64 = 0

    public init(folder: String?, device: String, window: Int) throws(StoreError) {
        self.window = window
        self.folder = folder
        path = folder.map { $0 + "/nats-" + device + ".applied" }
        fd = -1
        guard let folder, let path else { return }
        try AppliedStore.openFolder(folder)
        try load(path)
        compact()
    }

    deinit { if fd >= 0 { close(fd) } }

    private static func openFolder(_ folder: String) throws(StoreError) {
        var st = stat()
        if lstat(folder, &st) != 0 {
            guard errno == ENOENT, mkdir(folder, 0o700) == 0 else {
                throw StoreError(description: "cannot create state folder \(folder): \(String(cString: strerror(errno)))")
            }
        } else if (st.st_mode & S_IFMT) != S_IFDIR {
            throw StoreError(description: "state folder \(folder) is not a folder (links are not followed)")
        }
    }

    private func load(_ path: String) throws(StoreError) {
        let rfd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        var bytes: [UInt8] = []
        if rfd >= 0 {
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(rfd, $0.baseAddress!, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                bytes += chunk[0..<n]
            }
            close(rfd)
        } else if errno != ENOENT {
            throw StoreError(description: "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        var start = 0
        while start < bytes.count {
            guard let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")),
                let record = try? JSONValue(parsing: bytes[start..<end])
            else { break }
            apply(record)
            lines += 1
            start = end + 1
        }
    }

    private func apply(_ record: JSONValue) {
        if let s = record["s"]?.intValue { lastSequence = max(lastSequence, s) }
        if let i = record["i"]?.intValue, let id = record["id"]?.stringValue {
            lastSequence = max(lastSequence, i)
            if case .applied = states[id] { return }
            states[id] = .intended(sequence: i)
        }
        if let id = record["a"]?.stringValue {
            if case .applied = states[id] {} else { appliedOrder.append(id) }
            states[id] = .applied(outcome: record["r"])
            trim()
        }
    }

    private func trim() {
        while appliedOrder.count - appliedStart > window {
            let old = appliedOrder[appliedStart]
            appliedStart += 1
            if case .applied = states[old] { states[old] = nil }
        }
        if appliedStart > 4096 && appliedStart * 2 > appliedOrder.count {
            appliedOrder.removeFirst(appliedStart)
            appliedStart = 0
        }
    }

    /// What is known of `id`.
    public func state(of id: String) -> AppliedState? { states[id] }

    /// Ids with an intent and no outcome, in intent order.
    public var unresolved: [(id: String, sequence: Int64)] {
        states.compactMap { id, state in
            if case .intended(let s) = state { return (id, s) }
            return nil
        }.sorted { $0.sequence < $1.sequence }
    }

    /// Records an intent for `id` (buffered until `sync`) and returns its sequence.
    public func recordIntent(_ id: String) -> Int64 {
        hasUnsyncedIntents = true
        lastSequence += 1
        states[id] = .intended(sequence: lastSequence)
        buffer(["i": .integer(lastSequence), "id": .string(id)])
        return lastSequence
    }

    /// Records that `id` took effect (buffered until `sync`).
    public func recordApplied(_ id: String, outcome: JSONValue?) {
        recordApplied(id, outcome: outcome, encoded: outcome?.encoded)
    }

    /// Records that `id` took effect, with `encoded` the outcome's JSON encoding already made
    /// (the bridge publishes the same bytes as the result), so the outcome is not encoded again.
    public func recordApplied(_ id: String, outcome: JSONValue?, encoded: [UInt8]?) {
        if case .applied = states[id] {} else { appliedOrder.append(id) }
        states[id] = .applied(outcome: outcome)
        pendingBytes += Array(#"{"a":"#.utf8)
        pendingBytes += JSONValue.string(id).encoded
        if let encoded {
            pendingBytes += Array(#","r":"#.utf8)
            pendingBytes += encoded
        }
        pendingBytes += Array("}\n".utf8)
        lines += 1
        trim()
    }

    /// Keeps new intent sequences above `sequence`, the broker's marker: a store that was
    /// wiped must not reuse numbers the marker already covers.
    public func raiseSequence(to sequence: Int64) {
        if sequence > lastSequence {
            lastSequence = sequence
            buffer(["s": .integer(sequence)])
        }
    }

    /// Forgets an intent that never reached the broker, so that a redelivery applies it.
    public func dropIntent(_ id: String) {
        if case .intended = states[id] { states[id] = nil }
    }

    private func buffer(_ record: JSONValue) {
        pendingBytes += record.encoded
        pendingBytes.append(UInt8(ascii: "\n"))
        lines += 1
    }

    /// Whether records wait for `sync`.
    public var hasUnsynced: Bool { !pendingBytes.isEmpty }

    /// Whether an intent recorded since the last `sync` is not on disk yet.
    public private(set) var hasUnsyncedIntents = false

    /// Writes and fsyncs what was recorded since the last call.
    public func sync() throws(StoreError) {
        guard !pendingBytes.isEmpty else { return }
        guard let path else {
            pendingBytes.removeAll(keepingCapacity: true)
            hasUnsyncedIntents = false
            return
        }
        if fd < 0 {
            fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else { throw StoreError(description: "cannot open \(path): \(String(cString: strerror(errno)))") }
        }
        var offset = 0
        while offset < pendingBytes.count {
            let n = pendingBytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw StoreError(description: "cannot write \(path): \(String(cString: strerror(errno)))") }
            offset += n
        }
        guard fdatasync(fd) == 0 else { throw StoreError(description: "cannot fsync \(path): \(String(cString: strerror(errno)))") }
        pendingBytes.removeAll(keepingCapacity: true)
        hasUnsyncedIntents = false
        if lines > 2 * window + 1024 { compact() }
    }

    /// Rewrites the file with only what is still known: temp file, fsync, rename, fsync folder.
    /// A failure leaves the old file in place, which stays correct, only longer.
    private func compact() {
        guard let path, let folder else { return }
        var out: [UInt8] = JSONValue.object(["s": .integer(lastSequence)]).encoded + [UInt8(ascii: "\n")]
        var count = 1
        for id in appliedOrder[appliedStart...] {
            guard case .applied(let outcome) = states[id] else { continue }
            var record: [String: JSONValue] = ["a": .string(id)]
            if let outcome { record["r"] = outcome }
            out += JSONValue.object(record).encoded + [UInt8(ascii: "\n")]
            count += 1
        }
        for (id, sequence) in unresolved {
            out += JSONValue.object(["i": .integer(sequence), "id": .string(id)]).encoded + [UInt8(ascii: "\n")]
            count += 1
        }
        let temp = path + ".tmp"
        let tfd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard tfd >= 0 else { return }
        var offset = 0
        while offset < out.count {
            let n = out.withUnsafeBytes { write(tfd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { close(tfd); unlink(temp); return }
            offset += n
        }
        guard fsync(tfd) == 0 else { close(tfd); unlink(temp); return }
        close(tfd)
        guard rename(temp, path) == 0 else { unlink(temp); return }
        let dfd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 { fsync(dfd); close(dfd) }
        if fd >= 0 { close(fd); fd = -1 }
        lines = count
    }
}
