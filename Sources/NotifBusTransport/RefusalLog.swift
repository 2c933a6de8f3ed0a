// How often the broker logs refused connections: every refusal up to a budget per window,
// then one line saying how many it left out. Another user who may reach the socket must
// not be able to fill the broker's log. Counting only; the caller writes the lines.
import NotifBusCore

/// A per-window budget for refusal log lines.
struct RefusalLog {
    /// Lines per window: enough to see who is knocking, too few to flood a journal.
    static let linesPerWindow = 10
    /// The window, in nanoseconds (10 s).
    static let windowNs: UInt64 = 10_000_000_000

    private var windowStart: Instant = 0
    private var logged = 0
    private var suppressed = 0

    /// One more refusal at `now`: whether to log it, and how many refusals of the last
    /// window went unlogged (to report once, when a new window starts).
    mutating func note(now: Instant) -> (log: Bool, leftOut: Int) {
        var leftOut = 0
        if logged == 0 || now &- windowStart >= RefusalLog.windowNs {
            leftOut = suppressed
            windowStart = now
            logged = 0
            suppressed = 0
        }
        guard logged < RefusalLog.linesPerWindow else {
            suppressed += 1
            return (false, leftOut)
        }
        logged += 1
        return (true, leftOut)
    }
}
