// Keeps repeated log lines of one kind to at most one a second: the rest are counted and
// reported with the next line of that kind, or by `flush` once the second is over. Every
// line says how many it stands for: itself and "(N more like it ...)". It decides only
// whether to print; it reads no clock of its own.

/// Per kind of message (for example "accept" or "read"), the time it was last printed and
/// how many were held back since.
struct LogLimiter {
    /// One line per kind per second at most.
    static let intervalNs: UInt64 = 1_000_000_000

    struct Entry {
        var printedAt: UInt64
        var held = 0
        var lastHeld = ""
    }

    private var entries: [String: Entry] = [:]

    /// Whether any held line is waiting for `flush`.
    var hasHeld: Bool { entries.values.contains { $0.held > 0 } }

    /// The line to print now for `message` of `kind`, or nil when it is held back.
    mutating func admit(_ message: String, kind: String, now: UInt64) -> String? {
        guard var entry = entries[kind] else {
            entries[kind] = Entry(printedAt: now)
            return message
        }
        if now &- entry.printedAt < LogLimiter.intervalNs {
            entry.held += 1
            entry.lastHeld = message
            entries[kind] = entry
            return nil
        }
        let held = entry.held
        entries[kind] = Entry(printedAt: now)
        return held == 0 ? message : "\(message) (\(held) more like it since the last such line)"
    }

    /// Lines summarizing what was held back for a second or more, one per kind.
    mutating func flush(now: UInt64) -> [String] {
        var lines: [String] = []
        for (kind, entry) in entries where entry.held > 0 && now &- entry.printedAt >= LogLimiter.intervalNs {
            lines.append(entry.held == 1 ? entry.lastHeld : "\(entry.lastHeld) (\(entry.held - 1) more like it before it, in the last second)")
            entries[kind] = Entry(printedAt: now)
        }
        // Kinds quiet for a while are forgotten, so the table stays as small as the kinds in use.
        entries = entries.filter { $0.value.held > 0 || now &- $0.value.printedAt < 60 * LogLimiter.intervalNs }
        return lines.sorted()
    }
}
