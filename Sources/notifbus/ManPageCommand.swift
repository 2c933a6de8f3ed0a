// `notifbus manpage`: the notifbus(1) manual page in roff, generated from the same help
// texts `--help` prints, so the page and the command never disagree: every command's, and
// the bridges' as their executables beside this one print them. It prints; the install
// script writes it to share/man/man1/notifbus.1.
enum ManPageCommand {
    static let command = Subcommand(
        name: "manpage",
        summary: "print the notifbus(1) manual page (roff)",
        usage: """
            Usage: notifbus manpage

            Prints the manual page, built from every command's help text, in roff; 'desktop'
            and 'bridge' from their executables' help, when they are installed beside notifbus.
            scripts/install.sh installs it; to read it at once: notifbus manpage | man -l -
            """,
        valueFlags: [], switchFlags: [],
        run: { args in
            try CLI.expectPositionals(args, 0...0, "no arguments")
            Output.line(page())
            return 0
        })

    static func page() -> String {
        var out = [
            ".TH NOTIFBUS 1 \"\" \"\(CLI.version)\" \"User Commands\"",
            ".SH NAME",
            "notifbus \\- one notification delegate shared across processes",
            ".SH SYNOPSIS",
            ".B notifbus",
            ".I command",
            "[options]",
            ".SH DESCRIPTION",
        ]
        out.append(contentsOf: preformatted(CLI.overview))
        out.append(".SH COMMANDS")
        for command in CLI.subcommands {
            out.append(".SS \(escape(command.name))")
            out.append(escape(command.summary) + ".")
            out.append(contentsOf: preformatted(CLI.help(for: command)))
        }
        for tool in SiblingTool.tools {
            out.append(".SS \(escape(tool.command))")
            out.append(escape(tool.summary) + "; the executable \(escape(tool.executable)), which 'notifbus \(escape(tool.command))' runs.")
            let texts = SiblingTool.helpTexts(tool)
            if texts.isEmpty {
                out.append("\(escape(tool.executable)) was not installed beside notifbus when this page was made.")
            }
            for text in texts { out.append(contentsOf: preformatted(text)) }
        }
        out.append(".SS help")
        out.append("print the overview, or a command's help.")
        out.append(
            contentsOf: preformatted(
                "Usage: notifbus help [COMMAND]\n\nThe same as 'notifbus COMMAND --help'; 'notifbus --version' prints the version."))
        out.append(".SH ENVIRONMENT")
        out.append(".TP\n.B NOTIFBUS_SOCKET\nthe broker's socket, when --socket is not given")
        out.append(".TP\n.B XDG_RUNTIME_DIR\nthe socket is $XDG_RUNTIME_DIR/notifbus.sock when NOTIFBUS_SOCKET is unset")
        out.append(".SH EXIT STATUS\n0 on success, 1 on an error (one line on stderr), 2 on bad usage.")
        return out.joined(separator: "\n")
    }

    /// Help text kept as printed: no filling, no adjusting.
    static func preformatted(_ text: String) -> [String] {
        [".nf"]
            + text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
                let escaped = escape(String(line))
                return escaped.hasPrefix(".") || escaped.hasPrefix("'") ? "\\&" + escaped : escaped
            } + [".fi"]
    }

    /// Backslashes, dashes and characters beyond ASCII as roff wants them: roff reads
    /// its input as Latin-1 unless told otherwise, so `…` or `µ` are written `\[u2026]`.
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\e"
            case "-": out += "\\-"
            case _ where scalar.isASCII: out.unicodeScalars.append(scalar)
            default:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\[u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
            }
        }
        return out
    }
}
