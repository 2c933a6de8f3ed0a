// The command line beside busctl: JSON from standard input and files past the shell's
// argument limit (bounded by the broker's maxFrame), durations in plain seconds and
// timeouts printed rounded, -j and --json=pretty, a stale socket named as such, monitor's
// op rule checked, `list` and `status CLIENT`, completion of arguments in bash, zsh and
// fish, a man page with every command, and install.sh putting every executable in place.
import Foundation
import Glibc
import NotifBusProtocol
import Testing

@Suite(.ownThread, .timeLimit(.minutes(5))) struct BusctlConveniencesTests {
    func run(_ args: [String]) throws -> (Int32, String, String) {
        let c = try Child(Binaries.notifbus, args)
        guard let status = c.waitExit(.seconds(20)) else { throw TestFailure("notifbus \(args) hung") }
        return (status, c.stdout, c.stderr)
    }

    /// Runs a shell line (for `< FILE` on standard input) with `NB` standing for notifbus.
    func shell(_ line: String, timeout: Duration = .seconds(30)) throws -> (Int32, String, String) {
        let c = try Child("/bin/sh", ["-c", "NB='\(Binaries.notifbus)'; " + line])
        guard let status = c.waitExit(timeout) else { throw TestFailure("'\(line)' hung") }
        return (status, c.stdout, c.stderr)
    }

    /// A file holding `{"blob":"xxx..."}` of about `bytes` bytes.
    static func bigPayload(in folder: TempFolder, bytes: Int = 2_000_000) throws -> String {
        let path = folder.path + "/big.json"
        try Data(("{\"blob\":\"" + String(repeating: "x", count: bytes) + "\"}").utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func twoMegabytesFromAFileOrStandardInputReachEveryCommand() throws {
        let broker = try BrokerUnderTest(["--max-frame", "4194304"])
        let file = try Self.bigPayload(in: broker.folder)
        let s = broker.socket
        // put @FILE and put -: the slot holds it whole.
        #expect(try broker.cli(["put", "big", "@" + file]).0 == 0)
        var (status, out, err) = try shell("\"$NB\" take big --socket '\(s)'")
        #expect(status == 0 && out.utf8.count > 2_000_000, "\(err)")
        (status, _, err) = try shell("\"$NB\" put big - --socket '\(s)' < '\(file)'")
        #expect(status == 0, "\(err)")
        #expect(try shell("\"$NB\" take big --socket '\(s)'").1 == out)
        // post -: an observer sees the payload.
        let observer = try broker.spawn(["observe", "e", "--count", "1"])
        #expect(observer.waitFor { observer.stderr.contains("observer o1") })
        (status, out, err) = try shell("\"$NB\" post e - --socket '\(s)' < '\(file)'")
        #expect(status == 0 && out.contains("\"outcome\":\"unhandled\""), "\(out) \(err)")
        #expect(observer.waitExit() == 0 && observer.stdout.utf8.count > 2_000_000)
        // invoke @FILE: the handler's command reads the whole call (its byte count is the result).
        let handler = try broker.spawn(["handle", "ch", "m", "--exec", "wc -c", "--count", "1"])
        #expect(handler.waitFor { handler.stderr.contains("handling ch") })
        (status, out, err) = try run(["invoke", "ch", "m", "@" + file, "--socket", s])
        #expect(status == 0 && (Int(out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 2_000_000, "\(out) \(err)")
        // notify --user-info @FILE, click --user-info -: the click nobody handled keeps it for launch.
        (status, out, err) = try run(["notify", "--id", "m1", "--user-info", "@" + file, "--socket", s])
        #expect(status == 0 && out.hasPrefix("willPresent m1:"), "\(out) \(err)")
        (status, out, err) = try shell("\"$NB\" click --id m2 --user-info - --socket '\(s)' < '\(file)'")
        #expect(status == 0 && out.contains("retained for launch"), "\(out) \(err)")
        let launch = try JSONValue(parsing: try run(["take", "launch", "--socket", s]).1)
        #expect(launch["notification"]?["content"]?["userInfo"]?["blob"]?.stringValue?.count == 2_000_000)
    }

    @Test func aPayloadBeyondTheBrokersMaxFrameIsRefusedBeforeItIsSent() throws {
        let broker = try BrokerUnderTest()
        let file = try Self.bigPayload(in: broker.folder)
        let (status, _, err) = try broker.cli(["put", "big", "@" + file])
        #expect(status == 1)
        #expect(err.contains("the value from \(file) is larger than the broker takes: a frame is at most 1048576 bytes"), "\(err)")
        let (stdinStatus, _, stdinErr) = try shell("\"$NB\" post e - --socket '\(broker.socket)' < '\(file)'")
        #expect(stdinStatus == 1 && stdinErr.contains("the payload from standard input is larger"), "\(stdinErr)")
        #expect(try broker.cli(["ping"]).0 == 0, "the broker is unharmed")
        #expect(try broker.cli(["put", "x", "@" + broker.folder.path + "/missing.json"]).2.contains("cannot read"))
        #expect(try broker.cli(["put", "x", "@"]).0 == 2)
        let broken = broker.folder.path + "/broken.json"
        try Data("{\"a\":".utf8).write(to: URL(fileURLWithPath: broken))
        let (brokenStatus, _, brokenErr) = try broker.cli(["invoke", "ch", "m", "@" + broken])
        #expect(brokenStatus == 1 && brokenErr.contains("the arguments from \(broken) is not valid JSON"), "\(brokenErr)")
    }

    @Test func timeoutsTakePlainSecondsAndArePrintedRounded() throws {
        let broker = try BrokerUnderTest(["--hop-timeout", "30"])
        let observer = try broker.spawn(["observe", "e", "--delay", "20s"])
        #expect(observer.waitFor { observer.stderr.contains("observer o1") })
        var (status, _, err) = try broker.cli(["post", "e", "--timeout", "1"])
        #expect(status == 1 && err.hasSuffix("timed out: no reply to 'post' within 1 s\n"), "\(err)")
        (status, _, err) = try broker.cli(["post", "e", "--timeout", "0.25"])
        #expect(status == 1 && err.hasSuffix("within 250 ms\n"), "\(err)")
        (status, _, err) = try broker.cli(["post", "e", "--timeout", "1.5s"])
        #expect(status == 1 && err.hasSuffix("within 1.5 s\n"), "\(err)")
        for bad in ["soon", "0", "0.0001", "1.", ".5", "1.2.3", "-1", "1e3"] {
            #expect(try run(["ping", "--timeout", bad]).0 == 2, "\(bad)")
        }
    }

    @Test func jsonComesShortOrPretty() throws {
        let broker = try BrokerUnderTest()
        #expect(try broker.cli(["put", "s", #"{"a":[1,{"b":{}}],"c":[],"d":"x,y:{"}"#]).0 == 0)
        let pretty = """
            {
              "a": [
                1,
                {
                  "b": {}
                }
              ],
              "c": [],
              "d": "x,y:{"
            }

            """
        #expect(try broker.cli(["peek", "s", "--json=pretty"]).1 == pretty)
        // -j is pretty on a terminal only; here stdout is a pipe.
        #expect(try broker.cli(["peek", "s", "-j"]).1 == #"{"a":[1,{"b":{}}],"c":[],"d":"x,y:{"}"# + "\n")
        #expect(try broker.cli(["peek", "s", "--json=short"]).1 == #"{"a":[1,{"b":{}}],"c":[],"d":"x,y:{"}"# + "\n")
        let (status, out, _) = try broker.cli(["status", "-j"])
        #expect(status == 0)
        #expect(try JSONValue(parsing: out)["server"] == "notifbus/0.1.0")
        #expect(try broker.cli(["status", "--json=wide"]).0 == 2)
        #expect(try broker.cli(["status", "-x"]).0 == 2)
    }

    @Test func aStaleSocketSaysNoBrokerRunsThere() throws {
        let broker = try BrokerUnderTest()
        broker.child.signal(SIGKILL)
        #expect(broker.child.waitExit() != nil)
        let (status, _, err) = try broker.cli(["ping"])
        #expect(status == 1)
        #expect(err.contains("Connection refused (no broker is running on this socket"), "\(err)")
    }

    @Test func monitorRefusesAnOpThatDoesNotExist() throws {
        let folder = TempFolder()
        let (status, _, err) = try run(["monitor", "--match", "op=nosuchop", "--socket", folder.path + "/none"])
        #expect(status == 2 && err.contains("--match op= takes an op of the protocol"), "\(err)")
        // A known op passes the check and goes on to connect.
        #expect(try run(["monitor", "--match", "op=post,dir=in", "--socket", folder.path + "/none"]).0 == 1)
    }

    @Test func listShowsTheClientsAndStatusOneOfThem() throws {
        let broker = try BrokerUnderTest()
        let observer = try broker.spawn(["observe", "e", "f", "--name", "mail", "--key", "k"])
        let handler = try broker.spawn(["handle", "ch", "m", "--result", "1"])
        #expect(observer.waitFor { observer.stderr.contains("observer o1") })
        #expect(handler.waitFor { handler.stderr.contains("handling ch") })
        let (status, out, _) = try broker.cli(["list"])
        #expect(status == 0)
        let rows = out.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(rows.first == ["CLIENT", "NAME", "PID", "UID", "OBSERVERS", "HANDLERS", "QUEUED", "STATE"])
        let mail = rows.first { $0.count == 8 && $0[1] == "mail" } ?? []
        #expect(Array(mail.dropFirst()) == ["mail", String(observer.pid), String(getuid()), "1", "0", "0", "-"], "\(out)")
        let handling = rows.first { $0.count == 8 && $0[1] == "notifbus-handle" } ?? []
        #expect(Array(handling.dropFirst()) == ["notifbus-handle", String(handler.pid), String(getuid()), "0", "1", "0", "-"], "\(out)")
        #expect(rows.contains { $0.count > 1 && $0[1] == "notifbus-list" }, "the list's own connection is listed")
        let listed = try JSONValue(parsing: try broker.cli(["list", "--json"]).1)
        #expect(listed.arrayValue?.compactMap { $0["name"]?.stringValue }.contains("mail") == true)

        // By name, by id and by pid alike.
        let id = mail.first ?? "?"
        for selector in ["mail", id, String(observer.pid)] {
            let (one, text, err) = try broker.cli(["status", selector])
            #expect(one == 0, "\(err)")
            #expect(text.hasPrefix("client    \(id) (mail), pid \(observer.pid)"), "\(text)")
            #expect(text.contains("observers 1\n  o1     priority 100    key k            e,f"), "\(text)")
        }
        let json = try JSONValue(parsing: try broker.cli(["status", handling.first ?? "?", "--json"]).1)
        #expect(json["handlers"]?.arrayValue?.first?["handler"] == "h1" && json["observers"] == [])
        let (missing, _, err) = try broker.cli(["status", "nobody"])
        #expect(missing == 1 && err.contains("no connected client is 'nobody'"), "\(err)")
    }

    @Test func bashCompletesTheArgumentsOfCommands() throws {
        let folder = TempFolder()
        let script = folder.path + "/notifbus.bash"
        try (try run(["completion", "bash"])).1.write(toFile: script, atomically: true, encoding: .utf8)
        // As bash hands them over: `op=p` arrives split at '=' (COMP_WORDBREAKS).
        let probe = try Child(
            "/bin/bash",
            [
                "-c",
                """
                source \(script)
                t() { COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=(); _notifbus; echo "${COMPREPLY[*]}"; }
                t notifbus categories ''
                t notifbus observe --reply ''
                t notifbus monitor --match ''
                t notifbus monitor --match op = p
                t notifbus bridge ''
                t notifbus push ''
                t notifbus push --layout ''
                t notifbus click --action d
                t notifbus notify --source ''
                t notifbus observe --pri
                """,
            ])
        #expect(probe.waitExit() == 0, "\(probe.stderr)")
        #expect(
            probe.stdoutLines == [
                "set get", "next complete stop", "op= client= name= channel= method= dir=", "ping post put peek", "nats",
                "post put invoke", "per-device shared", "default dismiss", "remote local", "--priority",
            ], "\(probe.stdout) \(probe.stderr)")
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/fish"), "fish is installed by scripts/setup.sh"))
    func fishCompletesTheArgumentsOfCommands() throws {
        let folder = TempFolder()
        let script = folder.path + "/notifbus.fish"
        try (try run(["completion", "fish"])).1.write(toFile: script, atomically: true, encoding: .utf8)
        let probe = try Child(
            "/usr/bin/fish",
            [
                "--no-config", "-c",
                """
                source \(script)
                echo (complete -C 'notifbus categories ')
                echo (complete -C 'notifbus observe --reply ')
                echo (complete -C 'notifbus monitor --match op=p')
                echo (complete -C 'notifbus bridge ')
                """,
            ])
        #expect(probe.waitExit() == 0, "\(probe.stderr)")
        #expect(
            probe.stdoutLines == ["get set", "complete next stop", "op=peek op=ping op=post op=put", "nats"],
            "\(probe.stdout) \(probe.stderr)")
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/zsh"), "zsh is installed by scripts/setup.sh"))
    func zshNamesTheArgumentsOfCommands() throws {
        let folder = TempFolder()
        let script = folder.path + "/_notifbus"
        let zsh = try run(["completion", "zsh"]).1
        try zsh.write(toFile: script, atomically: true, encoding: .utf8)
        #expect(try Child("/usr/bin/zsh", ["-n", script]).waitExit() == 0)
        #expect(zsh.contains("categories) _arguments '*:file:_files' '1:argument:(set get)'"))
        #expect(zsh.contains("'--reply:reply:(next complete stop)'"))
        #expect(zsh.contains("'--match:match:(op= client= name= channel= method= dir= op=hello"))
        #expect(zsh.contains("bridge) _arguments '1:engine:(nats)'"))
        #expect(zsh.contains("push) _arguments '1:action:(post put invoke)'"))
        // The bridges' options that take a value, as their help writes it, wait for it.
        let lines = zsh.split(separator: "\n").map(String.init)
        let desktop = try #require(lines.first { $0.hasPrefix("    desktop) ") })
        #expect(desktop.contains("'--socket:socket:_files'") && desktop.contains("'--app-id:app-id: '"), "\(desktop)")
        #expect(desktop.contains("'--unhandled:unhandled:(banner none)'") && desktop.contains("'--verbose'"), "\(desktop)")
        let bridge = try #require(lines.first { $0.hasPrefix("    bridge) ") })
        #expect(bridge.contains("'--device:device: '") && bridge.contains("'--create-stream'"), "\(bridge)")
    }

    @Test func theManPageCoversEveryCommand() throws {
        let (status, page, _) = try run(["manpage"])
        #expect(status == 0)
        for name in NewcomerCLITests.brokerCommands + ["broker", "list", "completion", "manpage", "desktop", "bridge", "push", "help"] {
            #expect(page.contains(".SS \(name)\n"), "\(name) missing from the man page")
        }
        // The bridges' sections hold their own help, read from the executables beside notifbus.
        #expect(page.contains("\\-\\-app\\-name NAME"), "the desktop bridge's options")
        #expect(page.contains("\\-\\-device ID"), "the NATS bridge's options")
        #expect(page.contains("\\-\\-msg\\-id ID"), "push's options")
    }

    @Test func installPutsEveryExecutableInPlace() throws {
        let folder = TempFolder()
        let built = URL(fileURLWithPath: Binaries.notifbus).deletingLastPathComponent().path
        let install = Binaries.repositoryRoot.appendingPathComponent("scripts/install.sh").path
        let prefix = folder.path + "/usr"
        let done = try Child("/bin/bash", ["-c", "NOTIFBUS_BUILD_DIR='\(built)' '\(install)' --prefix '\(prefix)'"])
        #expect(done.waitExit(.seconds(60)) == 0, "\(done.stdout) \(done.stderr)")
        for path in [
            "bin/notifbus", "bin/notifbus-desktop", "bin/notifbus-bridge", "lib/systemd/user/notifbus.socket",
            "lib/systemd/user/notifbus.service", "lib/systemd/user/notifbus-desktop.service",
        ] {
            #expect(FileManager.default.fileExists(atPath: prefix + "/" + path), "\(path) not installed")
        }
        let unit = (try? String(contentsOfFile: prefix + "/lib/systemd/user/notifbus-desktop.service", encoding: .utf8)) ?? ""
        #expect(unit.contains("ExecStart=\(prefix)/bin/notifbus desktop") && unit.contains("WantedBy=graphical-session.target"))
        // The installed notifbus runs the installed bridge.
        let help = try Child(prefix + "/bin/notifbus", ["desktop", "--help"])
        #expect(help.waitExit() == 0 && help.stdout.hasPrefix("Usage: notifbus desktop"))

        // A build that lacks a bridge is not installed in part.
        let partial = folder.path + "/partial"
        try FileManager.default.createDirectory(atPath: partial, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Binaries.notifbus, toPath: partial + "/notifbus")
        let refused = try Child("/bin/bash", ["-c", "NOTIFBUS_BUILD_DIR='\(partial)' '\(install)' --prefix '\(folder.path)/other'"])
        #expect(refused.waitExit(.seconds(60)) == 1)
        #expect(refused.stderr.contains("no notifbus-desktop binary in \(partial)"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/other/bin/notifbus"))
    }
}
