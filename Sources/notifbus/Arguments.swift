// Command-line parsing for the `notifbus` subcommands: flags with values (`--x V` or
// `--x=V`), switches, repeatable flags and positionals, with usage errors that exit 2.
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

    /// `valueFlags` take a value; `switchFlags` do not. Both are given without dashes.
    init(_ args: [String], valueFlags: Set<String>, switchFlags: Set<String>) throws(UsageError) {
        var i = 0
        var onlyPositionals = false
        while i < args.count {
            let arg = args[i]
            i += 1
            if onlyPositionals || !arg.hasPrefix("--") || arg == "-" {
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
            if switchFlags.contains(name) || name == "help" {
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

    func duration(_ name: String) throws(UsageError) -> Int64? {
        guard let text = value(name) else { return nil }
        guard let ms = Arguments.parseDuration(text) else {
            throw UsageError("--\(name) needs a duration such as 250ms, 2s or 1m (at least 1ms), not '\(text)'")
        }
        return ms
    }

    /// An integer followed by `ms`, `s` or `m`, at least 1 ms; milliseconds.
    static func parseDuration(_ text: String) -> Int64? {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            let digits = text.dropLast(suffix.count)
            guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
                let n = Int64(digits)
            else { return nil }
            let (ms, overflow) = n.multipliedReportingOverflow(by: factor)
            guard !overflow, ms >= 1 else { return nil }
            return ms
        }
        return nil
    }

    func json(_ text: String, what: String) throws(UsageError) -> JSONValue {
        do {
            return try JSONValue(parsing: text)
        } catch {
            throw UsageError("\(what) is not valid JSON: \(error)")
        }
    }
}
