// What `notifbus monitor` shows: the `--match` rules (as busctl's, key=value pairs, all of
// one rule must hold, any rule may) and the wall-clock stamp of each line. No I/O here.
import Glibc
import NotifBusClient
import NotifBusProtocol

/// The `--match` rules of one `monitor` run; no rule shows every frame.
struct MonitorFilter {
    /// The keys a rule may test, and what each one reads.
    static let keys = ["op", "client", "name", "channel", "method", "dir"]

    /// Every op a frame can carry, both ways: a rule on any other matches nothing.
    static let ops = [
        Op.hello, Op.ping, Op.subscribe, Op.unsubscribe, Op.post, Op.handle, Op.unhandle, Op.invoke, Op.put, Op.take,
        Op.peek, Op.setCategories, Op.getCategories, Op.status, Op.monitor, Op.next, Op.complete, Op.stop, Op.return,
        Op.reply, Op.event, Op.evicted, Op.call, Op.seen,
    ]

    /// Each rule is a set of key=value conditions that must all hold.
    let rules: [[(key: String, value: String)]]

    /// Parses `--match op=post,name=willPresent` rules.
    init(_ texts: [String]) throws(UsageError) {
        var rules: [[(key: String, value: String)]] = []
        for text in texts {
            var rule: [(key: String, value: String)] = []
            for part in text.split(separator: ",", omittingEmptySubsequences: false) {
                let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                guard pair.count == 2, !pair[1].isEmpty, MonitorFilter.keys.contains(pair[0]) else {
                    throw UsageError(
                        "--match needs KEY=VALUE[,KEY=VALUE...] with KEY one of \(MonitorFilter.keys.joined(separator: ", ")), not '\(text)'")
                }
                if pair[0] == "dir" && pair[1] != "in" && pair[1] != "out" {
                    throw UsageError("--match dir= takes in (frames the broker read) or out (frames it wrote), not '\(pair[1])'")
                }
                if pair[0] == "op" && !MonitorFilter.ops.contains(pair[1]) {
                    throw UsageError("--match op= takes an op of the protocol (\(MonitorFilter.ops.joined(separator: ", "))), not '\(pair[1])'")
                }
                rule.append((pair[0], pair[1]))
            }
            rules.append(rule)
        }
        self.rules = rules
    }

    /// Whether `frame` is shown.
    func matches(_ seen: SeenFrame) -> Bool {
        rules.isEmpty || rules.contains { rule in rule.allSatisfy { MonitorFilter.holds($0.key, $0.value, seen) } }
    }

    /// `name` matches a post's or event's name and any of a subscription's events.
    static func holds(_ key: String, _ value: String, _ seen: SeenFrame) -> Bool {
        switch key {
        case "client": return seen.client == value
        case "dir": return seen.direction == value
        case "name":
            if seen.frame["name"]?.stringValue == value { return true }
            return seen.frame["events"]?.arrayValue?.contains(.string(value)) ?? false
        default: return seen.frame[key]?.stringValue == value
        }
    }
}

/// Wall-clock stamps for monitor lines.
enum Timestamp {
    /// `14:51:02.123456` in local time, for a line a person reads.
    static func local() -> String {
        let (seconds, micros) = now()
        var t = seconds
        var parts = tm()
        localtime_r(&t, &parts)
        return two(parts.tm_hour) + ":" + two(parts.tm_min) + ":" + two(parts.tm_sec) + "." + six(micros)
    }

    /// `2026-12-01T14:51:02.123456Z`, for JSON.
    static func utc() -> String {
        let (seconds, micros) = now()
        var t = seconds
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(parts.tm_year + 1900) + "-" + two(parts.tm_mon + 1) + "-" + two(parts.tm_mday) + "T"
            + two(parts.tm_hour) + ":" + two(parts.tm_min) + ":" + two(parts.tm_sec) + "." + six(micros) + "Z"
    }

    static func now() -> (time_t, Int) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return (ts.tv_sec, ts.tv_nsec / 1000)
    }

    static func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : String(n) }

    static func six(_ n: Int) -> String {
        let text = String(n)
        return String(repeating: "0", count: max(0, 6 - text.count)) + text
    }
}
