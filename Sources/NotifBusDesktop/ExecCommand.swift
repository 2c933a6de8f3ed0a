// A desktop file's `Exec` line turned into the argument vector the bridge runs, as the
// Desktop Entry Specification says: arguments separated by spaces, quoted in whole with
// double quotes (`\"`, `` \` ``, `\$`, `\\` inside), field codes expanded or removed. No
// shell ever sees the line: a line that wants one names it (`sh -c "..."`). Pure.

/// The program and arguments of an `Exec` line, for a start with no files to open.
public struct ExecCommand: Sendable, Equatable {
    /// `argv[0]`: an absolute path, or a name looked up in `$PATH`.
    public let program: String
    /// The whole vector, `program` first.
    public let arguments: [String]

    /// Parses `exec` (string escapes already undone) and expands its field codes: `%f`,
    /// `%F`, `%u`, `%U` (no file is opened) and the deprecated `%d %D %n %N %v %m` are
    /// removed; `%i` becomes `--icon ICON` (nothing without an icon); `%c` the name; `%k`
    /// the file's path; `%%` a `%`. Field codes inside a quoted argument are left as they
    /// are (the spec leaves them undefined there).
    public init(exec: String, name: String, icon: String?, location: String) throws(DesktopEntryError) {
        var words: [(text: String, quoted: Bool)] = []
        var current = ""
        var inWord = false
        var quoted = false
        var inQuotes = false
        var escaped = false
        for ch in exec {
            if inQuotes {
                if escaped {
                    if !"\"`$\\".contains(ch) { current.append("\\") }
                    current.append(ch)
                    escaped = false
                } else if ch == "\\" {
                    escaped = true
                } else if ch == "\"" {
                    inQuotes = false
                } else {
                    current.append(ch)
                }
                continue
            }
            switch ch {
            case " ", "\t":
                if inWord { words.append((current, quoted)) }
                current = ""
                inWord = false
                quoted = false
            case "\"":
                guard !inWord else { throw DesktopEntryError("Exec: a quote inside an unquoted argument (an argument is quoted in whole)") }
                inWord = true
                quoted = true
                inQuotes = true
            default:
                guard !quoted else { throw DesktopEntryError("Exec: text right after a closing quote") }
                inWord = true
                current.append(ch)
            }
        }
        guard !inQuotes else { throw DesktopEntryError("Exec: a quoted argument is not closed") }
        if inWord { words.append((current, quoted)) }

        var arguments: [String] = []
        for word in words {
            if word.quoted {
                arguments.append(word.text)
                continue
            }
            switch word.text {
            case "%f", "%F", "%u", "%U", "%d", "%D", "%n", "%N", "%v", "%m": continue
            case "%i":
                if let icon, !icon.isEmpty { arguments += ["--icon", icon] }
                continue
            default: break
            }
            arguments.append(try ExecCommand.expand(word.text, name: name, location: location))
        }
        guard let program = arguments.first, !program.isEmpty else { throw DesktopEntryError("Exec names no program") }
        guard !program.contains("=") else { throw DesktopEntryError("Exec: the program '\(program)' contains '=', which the spec does not allow") }
        guard !program.contains("/") || program.hasPrefix("/") else {
            throw DesktopEntryError("Exec: the program '\(program)' is neither an absolute path nor a name to look up in PATH")
        }
        self.program = program
        self.arguments = arguments
    }

    /// The field codes inside one unquoted argument.
    static func expand(_ word: String, name: String, location: String) throws(DesktopEntryError) -> String {
        var out = ""
        var percent = false
        for ch in word {
            guard percent else {
                if ch == "%" { percent = true } else { out.append(ch) }
                continue
            }
            percent = false
            switch ch {
            case "%": out.append("%")
            case "c": out += name
            case "k": out += location
            case "f", "u", "d", "n", "v", "m": break
            case "F", "U", "D", "N", "i":
                throw DesktopEntryError("Exec: field code %\(ch) must be an argument of its own, not part of '\(word)'")
            default: throw DesktopEntryError("Exec: unknown field code %\(ch) in '\(word)'")
            }
        }
        if percent { throw DesktopEntryError("Exec: '\(word)' ends with a lone %") }
        return out
    }
}
