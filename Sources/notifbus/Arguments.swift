// Command-line parsing for the `notifbus` subcommands: flags with values (`--x V` or
// `--x=V`), switches, repeatable flags and positionals, with usage errors that exit 2.
import Glibc
import NotifBusProtocol

/// A usage mistake: printed as one line, exit status 2.
struct UsageError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// A runtime failure: printed as one line, exit status 1.
struct CommandError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// Parsed arguments of one subcommand.
struct Arguments {
    private(set) var values: [String: [String]] = [:]
    private(set) var switches: Set<String> = []
    private(set) var positionals: [String] = []
    /// How `--json` output is laid out: `--json` and `--json=short` one line per value,
    /// `--json=pretty` indented, `-j` pretty on a terminal and short otherwise (as busctl's).
    private(set) var prettyJSON = false

    /// The switch that `-j` and `--json=MODE` stand for.
    static let json = "json"

    /// `valueFlags` take a value; `switchFlags` do not. Both are given without dashes.
    init(_ args: [String], valueFlags: Set<String>, switchFlags: Set<String>) throws(UsageError) {
        var i = 0
        var onlyPositionals = false
        while i < args.count {
            let arg = args[i]
            i += 1
            if onlyPositionals || !arg.hasPrefix("--") || arg == "-" {
                if !onlyPositionals && arg == "-j" && switchFlags.contains(Arguments.json) {
                    switches.insert(Arguments.json)
                    prettyJSON = isatty(1) == 1
                    continue
                }
                if !onlyPositionals && arg.hasPrefix("-") && arg != "-" && arg != "-h" && Int64(arg) == nil {
                    throw UsageError("unknown option '\(arg)'")
                }
                if arg == "-h" { switches.insert("help"); continue }
                positionals.append(arg)
                continue
            }
            if arg == "--" { onlyPositionals = true; continue }
            var name = String(arg.dropFirst(2))
            var inlineValue: String? = nil
            if let eq = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if name == Arguments.json && switchFlags.contains(name), let mode = inlineValue {
                guard mode == "short" || mode == "pretty" else { throw UsageError("--json takes short or pretty, not '\(mode)'") }
                switches.insert(name)
                prettyJSON = mode == "pretty"
            } else if switchFlags.contains(name) || name == "help" {
                guard inlineValue == nil else { throw UsageError("option '--\(name)' takes no value") }
                switches.insert(name)
            } else if valueFlags.contains(name) {
                let value: String
                if let inlineValue {
                    value = inlineValue
                } else {
                    guard i < args.count else { throw UsageError("option '--\(name)' needs a value") }
                    value = args[i]
                    i += 1
                }
                values[name, default: []].append(value)
            } else {
                throw UsageError("unknown option '--\(name)'")
            }
        }
    }

    func has(_ name: String) -> Bool { switches.contains(name) }

    /// The last value given for a flag.
    func value(_ name: String) -> String? { values[name]?.last }

    func all(_ name: String) -> [String] { values[name] ?? [] }

    func integer(_ name: String, min: Int64? = nil, max: Int64? = nil) throws(UsageError) -> Int64? {
        guard let text = value(name) else { return nil }
        guard let n = Int64(text) else { throw UsageError("--\(name) needs an integer, not '\(text)'") }
        if let min, n < min { throw UsageError("--\(name) must be at least \(min)") }
        if let max, n > max { throw UsageError("--\(name) must be at most \(max)") }
        return n
    }

    /// A duration in milliseconds; `hours` admits `h` too (a window of a day, not a timeout).
    func duration(_ name: String, hours: Bool = false) throws(UsageError) -> Int64? {
        guard let text = value(name) else { return nil }
        guard let ms = Arguments.parseDuration(text, hours: hours) else {
            let examples = hours ? "250ms, 2s, 1m, 24h or 1.5 (seconds)" : "250ms, 2s, 1m or 1.5 (seconds)"
            throw UsageError("--\(name) needs a duration such as \(examples), at least 1ms, not '\(text)'")
        }
        return ms
    }

    /// A number followed by `ms`, `s` or `m` (or, with `hours`, `h`), or alone for seconds
    /// as busctl takes them (`1.5`), rounded to the millisecond and at least 1 ms; milliseconds.
    static func parseDuration(_ text: String, hours: Bool = false) -> Int64? {
        var number = Substring(text)
        var factor: Int64 = 1000
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000)] + (hours ? [("h", 3_600_000)] : [])
        for (suffix, unit) in units where text.hasSuffix(suffix) {
            number = text.dropLast(suffix.count)
            factor = unit
            break
        }
        let parts = number.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let isDigits: (Substring) -> Bool = { $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }
        // 18 digits fit an Int64; more than 9 after the point say nothing a millisecond keeps.
        guard let whole = parts.first, !whole.isEmpty, whole.count <= 18, isDigits(whole) else { return nil }
        let fraction = parts.count == 2 ? parts[1] : ""
        guard parts.count == 1 || (!fraction.isEmpty && fraction.count <= 9 && isDigits(fraction)) else { return nil }
        let (wholeMs, overflow) = Int64(whole)!.multipliedReportingOverflow(by: factor)
        var scale: Int64 = 1
        for _ in fraction.utf8 { scale *= 10 }
        let fractionMs = ((Int64(fraction) ?? 0) * factor + scale / 2) / scale
        let (ms, overflowAgain) = wholeMs.addingReportingOverflow(fractionMs)
        guard !overflow, !overflowAgain, ms >= 1 else { return nil }
        return ms
    }

    func json(_ text: String, what: String) throws(UsageError) -> JSONValue {
        do {
            return try JSONValue(parsing: text)
        } catch {
            throw UsageError("\(what) is not valid JSON: \(error)")
        }
    }
}
