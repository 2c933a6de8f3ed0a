// One desktop entry file (Desktop Entry Specification) read for the app the bridge starts:
// the `[Desktop Entry]` group's keys with the string escapes undone and localized keys
// chosen for the locale. Pure: text in, values out. Finding the file in the XDG folders and
// reading it are the executable's; nothing here runs anything.

/// Why a desktop file cannot be used.
public struct DesktopEntryError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The keys of a desktop file's `[Desktop Entry]` group that the bridge uses.
public struct DesktopEntry: Sendable, Equatable {
    /// Files larger than this are refused before they are read: a real one is a few KiB.
    public static let maxBytes = 1 << 20
    /// The group every desktop file starts with.
    public static let mainGroup = "Desktop Entry"

    /// The desktop file id without `.desktop`, such as `org.example.Mail`.
    public let id: String
    /// Where the file was read from (the Exec field code `%k`).
    public let path: String
    /// `Name`, localized.
    public let name: String
    /// `Icon`: a theme icon name or an absolute path; nil when absent or empty.
    public let icon: String?
    /// `Exec`, with the string escapes undone (its quoting is `ExecCommand`'s).
    public let exec: String?
    /// `TryExec`: a program that must exist for the entry to count as installed.
    public let tryExec: String?
    /// `Path`: the folder the program runs in.
    public let workingDirectory: String?
    public let dbusActivatable: Bool
    /// `Terminal=true`: the program needs a terminal, which the bridge has none of.
    public let terminal: Bool
    /// `Hidden=true`: the entry is deleted, and hides any of the same id further down the folders.
    public let hidden: Bool

    /// Parses a file's text. `locale` is the value of LC_ALL, LC_MESSAGES or LANG (the first
    /// set), used to choose `Name[xx]`.
    public init(parsing text: String, id: String, path: String, locale: String?) throws(DesktopEntryError) {
        let keys = try DesktopEntry.mainGroupKeys(text)
        func value(_ key: String) throws(DesktopEntryError) -> String? {
            try keys[key].map { raw throws(DesktopEntryError) in try DesktopEntry.unescape(raw, key: key) }
        }
        func boolean(_ key: String) throws(DesktopEntryError) -> Bool {
            switch keys[key] {
            case nil, "false"?: return false
            case "true"?: return true
            case let other?: throw DesktopEntryError("\(key)=\(other) is not a boolean (true or false)")
            }
        }
        self.id = id
        self.path = path
        hidden = try boolean("Hidden")
        let type = keys["Type"]
        guard hidden || type == "Application" else {
            throw DesktopEntryError(type == nil ? "it has no Type key" : "its Type is \(type!), not Application")
        }
        var name = try DesktopEntry.localized("Name", in: keys, locale: locale)
        if name == nil { name = try value("Name") }
        guard hidden || !(name ?? "").isEmpty else { throw DesktopEntryError("it has no Name") }
        self.name = name ?? ""
        icon = try value("Icon").flatMap { $0.isEmpty ? nil : $0 }
        exec = try value("Exec")
        tryExec = try value("TryExec").flatMap { $0.isEmpty ? nil : $0 }
        workingDirectory = try value("Path").flatMap { $0.isEmpty ? nil : $0 }
        dbusActivatable = try boolean("DBusActivatable")
        terminal = try boolean("Terminal")
    }

    /// The `[Desktop Entry]` group's entries, values as written (escapes not undone).
    static func mainGroupKeys(_ text: String) throws(DesktopEntryError) -> [String: String] {
        var keys: [String: String] = [:]
        var group: String? = nil
        var groups: Set<String> = []
        for (n, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            if trimmed.hasPrefix("[") {
                guard trimmed.hasSuffix("]"), trimmed.count > 2 else { throw DesktopEntryError("line \(n + 1): a bad group header") }
                let name = String(trimmed.dropFirst().dropLast())
                guard groups.insert(name).inserted else { throw DesktopEntryError("line \(n + 1): group [\(name)] is given twice") }
                guard group != nil || name == mainGroup else {
                    throw DesktopEntryError("line \(n + 1): the first group is [\(name)], not [\(mainGroup)]")
                }
                group = name
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { throw DesktopEntryError("line \(n + 1): neither a key=value nor a group") }
            guard let group else { throw DesktopEntryError("line \(n + 1): a key before the [\(mainGroup)] group") }
            guard group == mainGroup else { continue }
            let key = String(line[..<equals]).trimmingSpaces
            let value = String(line[line.index(after: equals)...]).leadingSpacesDropped
            guard isValidKey(key) else { throw DesktopEntryError("line \(n + 1): '\(key)' is not a valid key") }
            guard keys.updateValue(value, forKey: key) == nil else { throw DesktopEntryError("line \(n + 1): key \(key) is given twice") }
        }
        guard group != nil else { throw DesktopEntryError("it has no [\(mainGroup)] group") }
        return keys
    }

    /// `A-Za-z0-9-`, with an optional `[locale]` suffix.
    static func isValidKey(_ key: String) -> Bool {
        var base = Substring(key)
        if let open = key.firstIndex(of: "[") {
            guard key.hasSuffix("]"), key.index(after: open) < key.index(before: key.endIndex) else { return false }
            base = key[..<open]
        }
        return !base.isEmpty && base.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x2D }
    }

    /// Undoes the escapes of the string types: `\s`, `\n`, `\t`, `\r`, `\\`. Any other
    /// backslash is kept with the character after it, for `Exec`'s own quoting to read
    /// (`\$` inside a quoted argument). A NUL cannot be part of an argument or a name.
    static func unescape(_ raw: String, key: String) throws(DesktopEntryError) -> String {
        var out = ""
        var escaped = false
        for ch in raw {
            if ch == "\0" { throw DesktopEntryError("\(key) holds a NUL character") }
            if escaped {
                switch ch {
                case "s": out.append(" ")
                case "n": out.append("\n")
                case "t": out.append("\t")
                case "r": out.append("\r")
                case "\\": out.append("\\")
                default:
                    out.append("\\")
                    out.append(ch)
                }
                escaped = false
            } else if ch == "\\" {
                escaped = true
            } else {
                out.append(ch)
            }
        }
        if escaped { out.append("\\") }
        return out
    }

    /// `key[xx]` for the locale, in the spec's order: lang_COUNTRY@MODIFIER, lang_COUNTRY,
    /// lang@MODIFIER, lang; nil when none is given (the caller falls back to `key`).
    static func localized(_ key: String, in keys: [String: String], locale: String?) throws(DesktopEntryError) -> String? {
        for candidate in localeCandidates(locale) {
            if let raw = keys["\(key)[\(candidate)]"] { return try unescape(raw, key: key) }
        }
        return nil
    }

    /// The locale names to try, most specific first; `C` and `POSIX` have none.
    public static func localeCandidates(_ locale: String?) -> [String] {
        guard var rest = locale.map({ Substring($0) }), !rest.isEmpty, rest != "C", rest != "POSIX" else { return [] }
        var modifier: Substring? = nil
        if let at = rest.firstIndex(of: "@") {
            modifier = rest[rest.index(after: at)...]
            rest = rest[..<at]
        }
        if let dot = rest.firstIndex(of: ".") { rest = rest[..<dot] }
        var country: Substring? = nil
        if let underscore = rest.firstIndex(of: "_") {
            country = rest[rest.index(after: underscore)...]
            rest = rest[..<underscore]
        }
        let lang = String(rest)
        var out: [String] = []
        if let country, let modifier { out.append("\(lang)_\(country)@\(modifier)") }
        if let country { out.append("\(lang)_\(country)") }
        if let modifier { out.append("\(lang)@\(modifier)") }
        out.append(lang)
        return out
    }

    /// Whether `id` may name a desktop file: it becomes part of a path, so no `/`, no
    /// leading dot, and only the characters the spec allows in a file id (`A-Za-z0-9._-`).
    public static func isValidID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 255 && !id.hasPrefix(".") && !id.hasPrefix("-")
            && id.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x2D || $0 == 0x2E || $0 == 0x5F
            }
    }

    /// Whether `id` is a D-Bus well-known name, as `DBusActivatable` needs: two or more
    /// elements separated by dots, none empty or starting with a digit, of `A-Za-z0-9_-`.
    public static func isBusName(_ id: String) -> Bool {
        let elements = id.split(separator: ".", omittingEmptySubsequences: false)
        return id.utf8.count <= 255 && elements.count >= 2
            && elements.allSatisfy { element in
                guard let first = element.utf8.first, !(first >= 0x30 && first <= 0x39) else { return false }
                return element.utf8.allSatisfy {
                    ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x2D || $0 == 0x5F
                }
            }
    }

    /// The object path of `org.freedesktop.Application` for a D-Bus activatable id: dots
    /// become slashes, dashes underscores, after a leading slash (`/org/example/Mail`).
    public static func objectPath(forBusName id: String) -> String {
        "/" + String(id.map { $0 == "." ? "/" : $0 == "-" ? "_" : $0 })
    }

    /// The file names, relative to an `applications` folder, that can hold the id: the id
    /// itself, and each form with some of its dashes as folder separators (the id of
    /// `applications/foo/bar.desktop` is `foo-bar`), nearest the top first. `isFolder` says
    /// whether a relative folder exists, so that only existing folders are walked.
    public static func relativePaths(for id: String, isFolder: (String) -> Bool) -> [String] {
        var out: [String] = []
        func walk(_ prefix: String, _ rest: Substring) {
            out.append(prefix + rest + ".desktop")
            var index = rest.startIndex
            while let dash = rest[index...].firstIndex(of: "-") {
                let folder = prefix + rest[..<dash]
                if dash != rest.startIndex, isFolder(folder) { walk(folder + "/", rest[rest.index(after: dash)...]) }
                index = rest.index(after: dash)
            }
        }
        walk("", Substring(id))
        return out
    }

    /// The folders searched for desktop files, in precedence order: `$XDG_DATA_HOME`
    /// (default `~/.local/share`), then each of `$XDG_DATA_DIRS` (default
    /// `/usr/local/share:/usr/share`), each with `/applications`. Relative entries are
    /// ignored, as the XDG Base Directory spec says.
    public static func applicationFolders(dataHome: String?, dataDirs: String?, home: String?) -> [String] {
        var roots: [String] = []
        if let dataHome, dataHome.hasPrefix("/") {
            roots.append(dataHome)
        } else if let home, home.hasPrefix("/") {
            roots.append(home + "/.local/share")
        }
        let dirs = (dataDirs?.isEmpty ?? true) ? "/usr/local/share:/usr/share" : dataDirs!
        roots += dirs.split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        var seen: Set<String> = []
        return roots.map { ($0.hasSuffix("/") ? String($0.dropLast()) : $0) + "/applications" }.filter { seen.insert($0).inserted }
    }
}

extension StringProtocol {
    fileprivate var trimmingSpaces: String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }

    fileprivate var leadingSpacesDropped: String { String(drop { $0 == " " || $0 == "\t" }) }
}
