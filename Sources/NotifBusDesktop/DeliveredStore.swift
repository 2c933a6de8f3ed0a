// The delivered table kept on disk for `--state-dir`: every change to it is appended to a
// journal of checksummed records and synced before the bridge acts on it (answers `add`,
// posts a click), so that after a crash or restart a click on a notification still on the
// screen finds it. A torn tail is cut off; the file is rewritten as a snapshot (temp file,
// fsync, rename, fsync folder) when it opens and when it has grown. The logic is pure: the
// file is a `JournalFile` the caller provides (the executable's on disk, the tests' in memory).
//
// File: "NBDESK01", then records: length u32be | crc32 u32be | kind u8 | JSON body
//   kind 1 server     {"bus": id?, "owner": unique name?}   the server the notifications after it belong to
//   kind 2 shown      {"id", "caller"?, "notification", "category"?, "routes", "userInfo"?}
//                     userInfo: the text the app sent it as; the notification's is then {}
//   kind 3 forgotten  {"id"}
//
//   open ──replay──► table (stops at the first torn or bad record) ──snapshot──► file
//   change ──apply in memory, append record, sync──► durable (or cut back, reported)
import NotifBusClient
import NotifBusProtocol

/// Why the journal file could not do what it was asked.
public struct JournalFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The one file the store writes. Implementations make `sync` and `replace` durable.
public protocol JournalFile: AnyObject {
    /// Appends bytes at the end; not durable until `sync`.
    func append(_ bytes: [UInt8]) throws(JournalFileError)
    /// Makes every byte appended so far durable.
    func sync() throws(JournalFileError)
    /// Cuts the file back to `length` bytes (after a failed append or sync).
    func truncate(to length: Int) throws(JournalFileError)
    /// Replaces the whole file with `bytes`, durably: a temp file, fsync, rename over the
    /// journal, fsync of the folder. A crash leaves the old file or the new one.
    func replace(with bytes: [UInt8]) throws(JournalFileError)
}

/// The server instance the delivered notifications belong to: its ids mean nothing to
/// another bus or another owner of org.freedesktop.Notifications.
public struct ServerInstance: Sendable, Equatable {
    /// The bus's id (`org.freedesktop.DBus.GetId`): a restarted bus reuses unique names.
    public var bus: String?
    /// The unique name that owns org.freedesktop.Notifications.
    public var owner: String?

    public init(bus: String?, owner: String?) {
        self.bus = bus
        self.owner = owner
    }
}

/// The delivered table and its journal.
public struct DeliveredStore {
    static let magic: [UInt8] = Array("NBDESK01".utf8)
    /// A record above this is corrupt: the largest is one `add`, bounded by the broker's frame.
    static let maxRecordBytes = 64 << 20
    /// The file is rewritten once it is this many times the live state, plus
    /// `compactionSlackBytes`: appends stay cheap, and the file stays within a few times
    /// what it holds.
    static let growthFactor = 4

    enum Kind: UInt8 {
        case server = 1
        case shown = 2
        case forgotten = 3
    }

    /// The notifications delivered, in memory.
    public private(set) var table: DeliveryTable
    /// The server they were shown by, as last recorded.
    public private(set) var server: ServerInstance? = nil
    /// nil: memory only (no `--state-dir`).
    let file: (any JournalFile)?
    /// Bytes in the file, and how many of them are synced.
    private var fileBytes = 0
    private var syncedBytes = 0
    /// The encoded size of each entry's record, for the compaction rule.
    private var recordBytes: [UInt32: Int] = [:]
    /// See `growthFactor`; small in the tests, so that they reach compaction.
    public var compactionSlackBytes = 1 << 20

    /// A store that keeps nothing on disk.
    public init(capacity: Int) {
        table = DeliveryTable(capacity: capacity)
        file = nil
    }

    /// What `open` found.
    public struct Loaded {
        public let store: DeliveredStore
        /// The first bad record, when the file had one: what followed it is dropped.
        public let problem: String?
        /// Ids dropped to fit `capacity` (a smaller `--max-delivered` than before): their
        /// notifications are to be closed on the server.
        public let evicted: [UInt32]
    }

    /// Replays `bytes` (the file's content; empty for a new file) and rewrites the file as a
    /// snapshot of what was valid. Throws when the snapshot cannot be written.
    public static func open(_ bytes: [UInt8], file: any JournalFile, capacity: Int) throws(JournalFileError) -> Loaded {
        var store = DeliveredStore(capacity: capacity, file: file)
        let (problem, evicted) = store.replay(bytes)
        try store.compact()
        return Loaded(store: store, problem: problem, evicted: evicted)
    }

    private init(capacity: Int, file: any JournalFile) {
        table = DeliveryTable(capacity: capacity)
        self.file = file
    }

    // MARK: Changes

    /// Records that `server` shows the notifications recorded from now on. A server other
    /// than the recorded one empties the table (its ids mean nothing to the new one); returns
    /// how many were forgotten, and a failed write for the log (memory has changed anyway:
    /// the old server's notifications are gone from the screen).
    public mutating func serverIs(_ instance: ServerInstance) -> (forgotten: Int, writeFailure: JournalFileError?) {
        guard instance != server else { return (0, nil) }
        let forgotten = table.reset()
        recordBytes.removeAll()
        server = instance
        do {
            try write([DeliveredStore.encode(.server(instance))])
            return (forgotten, nil)
        } catch {
            return (forgotten, error)
        }
    }

    /// Records a notification the server shows under `desktopId`; returns the ids forgotten
    /// to stay within capacity. When the record cannot be made durable the table is left as
    /// it was and the error thrown: the caller closes the notification and refuses the add.
    @discardableResult
    public mutating func record(
        _ notification: NotifBusClient.Notification, desktopId: UInt32, category: NotificationCategory?,
        routes: [String: ActionRoute], caller: String?, userInfo: RawJSON? = nil
    ) throws(JournalFileError) -> [UInt32] {
        let before = table
        let beforeSizes = recordBytes
        let evicted = table.record(
            notification, desktopId: desktopId, category: category, routes: routes, caller: caller, userInfo: userInfo)
        guard file != nil else { return evicted }
        let record = DeliveredStore.encode(.shown(desktopId, table.entries[desktopId]!))
        recordBytes = recordBytes.filter { table.entries[$0.key] != nil }
        recordBytes[desktopId] = record.count
        var records = [record]
        // Evictions replay by themselves (the same capacity), but a later --max-delivered may
        // differ: they are written down.
        for id in evicted { records.append(DeliveredStore.encode(.forgotten(id))) }
        do {
            try write(records)
        } catch {
            table = before
            recordBytes = beforeSizes
            throw error
        }
        return evicted
    }

    /// `ActivationToken(id, token)`: kept in memory with the notification (a token is for
    /// the start right after the click, not for a later bridge).
    public mutating func noteActivationToken(_ token: String, desktopId: UInt32) {
        table.activationToken(desktopId: desktopId, token: token)
    }

    /// Runs a change of the table that may forget entries (a signal, a removal) and writes
    /// down the ids it forgot. The change stands in memory whatever the file does: the
    /// response it produced is already the bridge's to post; a failed write is returned
    /// beside the result, for the log.
    public mutating func change<T>(_ body: (inout DeliveryTable) -> T) -> (result: T, writeFailure: JournalFileError?) {
        let before = Set(table.entries.keys)
        let result = body(&table)
        let gone = before.subtracting(table.entries.keys).sorted()
        for id in gone { recordBytes[id] = nil }
        guard !gone.isEmpty else { return (result, nil) }
        do {
            try write(gone.map { DeliveredStore.encode(.forgotten($0)) })
            return (result, nil)
        } catch {
            return (result, error)
        }
    }

    /// Appends `records` and syncs them; on failure cuts the file back to what was synced,
    /// so that memory and disk keep agreeing on everything acknowledged.
    private mutating func write(_ records: [[UInt8]]) throws(JournalFileError) {
        guard let file else { return }
        let bytes = records.flatMap { $0 }
        do {
            try file.append(bytes)
            fileBytes += bytes.count
            try file.sync()
            syncedBytes = fileBytes
        } catch {
            try? file.truncate(to: syncedBytes)
            fileBytes = syncedBytes
            throw error
        }
        let live = DeliveredStore.magic.count + 64 + recordBytes.values.reduce(0, +)
        if fileBytes > DeliveredStore.growthFactor * live + compactionSlackBytes {
            // A failed rewrite leaves the journal as it is, still valid; the next change tries again.
            try? compact()
        }
    }

    /// Rewrites the file as the live state.
    mutating func compact() throws(JournalFileError) {
        guard let file else { return }
        var bytes = DeliveredStore.magic
        if let server { bytes += DeliveredStore.encode(.server(server)) }
        recordBytes.removeAll()
        for (id, entry) in table.entries.sorted(by: { $0.value.sequence < $1.value.sequence }) {
            let record = DeliveredStore.encode(.shown(id, entry))
            recordBytes[id] = record.count
            bytes += record
        }
        try file.replace(with: bytes)
        fileBytes = bytes.count
        syncedBytes = bytes.count
    }

    // MARK: Records

    enum Record {
        case server(ServerInstance)
        case shown(UInt32, DeliveryTable.Entry)
        case forgotten(UInt32)
    }

    static func encode(_ record: Record) -> [UInt8] {
        let kind: Kind
        let body: JSONValue
        switch record {
        case .server(let s):
            kind = .server
            body = ["bus": s.bus.map(JSONValue.string) ?? .null, "owner": s.owner.map(JSONValue.string) ?? .null]
        case .shown(let id, let entry):
            kind = .shown
            // userInfo as the app sent it, as text beside the notification (kept without it),
            // so that a click after a restart posts the same bytes.
            var notification = entry.notification
            if entry.userInfo != nil { notification.content.userInfo = [:] }
            body = [
                "id": .integer(Int64(id)), "caller": entry.caller.map(JSONValue.string) ?? .null,
                "notification": notification.jsonValue, "category": entry.category?.jsonValue ?? .null,
                "routes": .object(entry.routes.mapValues(\.jsonValue)),
                "userInfo": entry.userInfo.map { .string(String(decoding: $0, as: UTF8.self)) } ?? .null,
            ]
        case .forgotten(let id):
            kind = .forgotten
            body = ["id": .integer(Int64(id))]
        }
        let payload = [kind.rawValue] + body.encoded
        var out = bigEndian(UInt32(payload.count))
        out += bigEndian(CRC32.checksum(payload))
        out += payload
        return out
    }

    static func bigEndian(_ v: UInt32) -> [UInt8] {
        [UInt8(truncatingIfNeeded: v >> 24), UInt8(truncatingIfNeeded: v >> 16), UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v)]
    }

    /// Applies every valid record; returns the first bad one (nil when the file was whole)
    /// and the ids evicted to fit the capacity.
    mutating func replay(_ data: [UInt8]) -> (problem: String?, evicted: [UInt32]) {
        guard !data.isEmpty else { return (nil, []) }
        guard data.count >= DeliveredStore.magic.count, Array(data[0..<DeliveredStore.magic.count]) == DeliveredStore.magic else {
            return ("not a delivered-table journal (bad header)", [])
        }
        var evicted: [UInt32] = []
        var offset = DeliveredStore.magic.count
        while offset < data.count {
            guard data.count - offset >= 8 else { return ("a torn record at byte \(offset)", evicted) }
            let length = Int(data[offset]) << 24 | Int(data[offset + 1]) << 16 | Int(data[offset + 2]) << 8 | Int(data[offset + 3])
            let crc = UInt32(data[offset + 4]) << 24 | UInt32(data[offset + 5]) << 16 | UInt32(data[offset + 6]) << 8 | UInt32(data[offset + 7])
            guard length >= 1, length <= DeliveredStore.maxRecordBytes else { return ("a bad record length at byte \(offset)", evicted) }
            guard data.count - offset - 8 >= length else { return ("a torn record at byte \(offset)", evicted) }
            let payload = Array(data[(offset + 8)..<(offset + 8 + length)])
            guard CRC32.checksum(payload) == crc else { return ("a checksum mismatch at byte \(offset)", evicted) }
            guard let kind = Kind(rawValue: payload[0]), let body = try? JSONValue(parsing: payload[1...]), apply(kind, body, &evicted) else {
                return ("an unreadable record at byte \(offset)", evicted)
            }
            offset += 8 + length
        }
        return (nil, evicted)
    }

    private mutating func apply(_ kind: Kind, _ body: JSONValue, _ evicted: inout [UInt32]) -> Bool {
        switch kind {
        case .server:
            table.reset()
            server = ServerInstance(bus: body["bus"]?.stringValue, owner: body["owner"]?.stringValue)
            return true
        case .shown:
            guard let id = DeliveredStore.desktopId(body["id"]), let n = body["notification"],
                var notification = try? NotifBusClient.Notification(json: n),
                let routeObject = body["routes"]?.objectValue
            else { return false }
            var userInfo: RawJSON? = nil
            if let text = body["userInfo"]?.stringValue {
                let bytes = Array(text.utf8)
                guard bytes.first == UInt8(ascii: "{"), let members = (try? JSONValue(parsingAnyDepth: bytes))?.objectValue
                else { return false }
                notification.content.userInfo = members
                userInfo = bytes
            }
            var category: NotificationCategory? = nil
            if let c = body["category"], !c.isNull {
                guard let read = try? NotificationCategory(json: c) else { return false }
                category = read
            }
            var routes: [String: ActionRoute] = [:]
            for (key, value) in routeObject {
                guard let route = ActionRoute(json: value) else { return false }
                routes[key] = route
            }
            let gone = table.record(
                notification, desktopId: id, category: category, routes: routes, caller: body["caller"]?.stringValue, userInfo: userInfo)
            evicted.removeAll { $0 == id }
            evicted += gone
            return true
        case .forgotten:
            guard let id = DeliveredStore.desktopId(body["id"]) else { return false }
            table.forget(id)
            evicted.removeAll { $0 == id }
            return true
        }
    }

    static func desktopId(_ value: JSONValue?) -> UInt32? {
        guard let n = value?.intValue, n > 0, n <= Int64(UInt32.max) else { return nil }
        return UInt32(n)
    }
}

extension ActionRoute {
    /// `["default"]`, `["action", id]`, `["inlineReply", id]`, `["textInputButton", id]`.
    var jsonValue: JSONValue {
        switch self {
        case .defaultAction: return ["default"]
        case .action(let id): return ["action", .string(id)]
        case .inlineReply(let id): return ["inlineReply", .string(id)]
        case .textInputButton(let id): return ["textInputButton", .string(id)]
        }
    }

    init?(json: JSONValue) {
        guard let parts = json.arrayValue, let kind = parts.first?.stringValue else { return nil }
        let id = parts.count == 2 ? parts[1].stringValue : nil
        switch (kind, id, parts.count) {
        case ("default", nil, 1): self = .defaultAction
        case ("action", let id?, _): self = .action(id)
        case ("inlineReply", let id?, _): self = .inlineReply(id)
        case ("textInputButton", let id?, _): self = .textInputButton(id)
        default: return nil
        }
    }
}
