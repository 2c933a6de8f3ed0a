// Subcommands that live in executables of their own beside `notifbus` (the bridges, which link
// sd-bus or cnats): `notifbus desktop ...` replaces this process with `notifbus-desktop ...`,
// `notifbus push ...` with `notifbus-bridge push ...`.
// The broker binary links nothing for them; it only finds and execs them, and asks them
// for their help text for the man page and the completion scripts.
import Glibc

enum SiblingTool {
    /// Subcommand name, the executable that implements it, the words put before the
    /// command's own arguments, its one-line summary, and the words its first argument takes
    /// (the bridge's engines, push's actions).
    typealias Tool = (command: String, executable: String, prefix: [String], summary: String, arguments: [String])

    static let tools: [Tool] = [
        ("desktop", "notifbus-desktop", [], "be the delegate of the desktop's notification server (D-Bus)", []),
        ("bridge", "notifbus-bridge", [], "bridge the bus to a remote engine (bridge nats ...)", ["nats"]),
        ("push", "notifbus-bridge", ["push"], "post, put or invoke on a device over NATS, as a server does", ["post", "put", "invoke"]),
    ]

    /// What `executable ARGUMENTS --help` prints, run from this executable's folder; nil when
    /// it is not there or fails (bounded: 10 s).
    static func help(_ executable: String, _ arguments: [String] = []) -> String? {
        guard let folder = ownFolder(), access(folder + "/" + executable, X_OK) == 0 else { return nil }
        let words = [folder + "/" + executable] + arguments + ["--help"]
        let result = Subprocess.runBlocking(words.map { "'" + $0.replacingQuote() + "'" }.joined(separator: " "), input: [], timeoutMs: 10_000)
        guard result.status == 0, !result.stdout.isEmpty else { return nil }
        return String(decoding: result.stdout, as: UTF8.self)
    }

    /// The help texts of `tool`: its own, then each engine's that differs from it.
    static func helpTexts(_ tool: Tool) -> [String] {
        var texts: [String] = []
        for words in [tool.prefix] + tool.arguments.map({ tool.prefix + [$0] }) {
            if let text = help(tool.executable, words), !texts.contains(text) { texts.append(text) }
        }
        return texts
    }

    /// The options `tool`'s help texts name (`--app-name`, `--url`, ...), sorted, each with
    /// whether it takes a value: whether the help writes its value after it somewhere
    /// (`--url URLS`, `[--state-dir DIR]`, `--unhandled banner|none`).
    static func options(_ tool: Tool) -> [(option: String, takesValue: Bool)] {
        var found: [String: Bool] = [:]
        for text in helpTexts(tool) {
            let words = text.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).map(String.init)
            for (i, raw) in words.enumerated() {
                // An option word, without what comes before or after its name ("(--url,").
                let from = raw.drop { $0 != "-" }
                let word = String(from.prefix { $0.isLetter || $0.isNumber || $0 == "-" })
                guard word.hasPrefix("--"), word.count > 2, word.dropFirst(2).first?.isLetter == true else { continue }
                let option = String(word.reversed().drop { $0 == "-" }.reversed())
                let takesValue = word == from && i + 1 < words.count && SiblingTool.isValueWord(words[i + 1])
                found[option] = (found[option] ?? false) || takesValue
            }
        }
        return found.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// Whether a help text's word after an option names its value: a metavariable of
    /// capitals, digits and `_` (`PATH]` in `[--socket PATH]`), or alternatives (`banner|none`).
    static func isValueWord(_ word: String) -> Bool {
        if word.contains("|") { return true }
        let run = word.prefix { $0.isUppercase || $0.isNumber || $0 == "_" }
        guard run.first?.isUppercase == true else { return false }
        return word.dropFirst(run.count).first.map { !$0.isLetter } ?? true
    }

    /// The folder of the running executable, from /proc/self/exe.
    static func ownFolder() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let path = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = path.lastIndex(of: "/") else { return nil }
        return String(path[..<slash])
    }

    /// Replaces this process with `executable` from the same folder, passing `arguments` on.
    /// Returns only on failure, with the exit status to use after the message was printed.
    static func exec(_ executable: String, command: String, arguments: [String]) -> Int32 {
        guard let folder = ownFolder() else {
            Output.error("notifbus \(command): cannot find the folder of this executable")
            return 1
        }
        let path = folder + "/" + executable
        guard access(path, X_OK) == 0 else {
            Output.error("notifbus \(command): \(path) is not installed (build or install the '\(executable)' target)")
            return 1
        }
        // The words of the tool's prefix (`push`) go before the arguments.
        let prefix = tools.first { $0.command == command }?.prefix ?? []
        var argv: [UnsafeMutablePointer<CChar>?] = ([path] + prefix + arguments).map { strdup($0) }
        argv.append(nil)
        execv(path, argv)
        let reason = String(cString: strerror(errno))
        Output.error("notifbus \(command): cannot run \(path): \(reason)")
        return 1
    }
}
