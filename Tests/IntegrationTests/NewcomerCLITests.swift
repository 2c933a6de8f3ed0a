// The CLI as a new user meets it: version and per-command help, the common --timeout and
// --json, errors that say what is wrong (a folder, a mute socket, a refused uid), state
// folders created with their parents, monitor's stamps and filter, introspect, completion,
// the man page and notify's option order. Each test starts its own broker.
import Foundation
import Glibc
import NotifBusProtocol
import Testing

@Suite(.ownThread, .timeLimit(.minutes(5))) struct NewcomerCLITests {
    func run(_ args: [String], environment: [String: String]? = nil) throws -> (Int32, String, String) {
        let c = try Child(Binaries.notifbus, args, environment: environment)
        guard let status = c.waitExit(.seconds(20)) else { throw TestFailure("notifbus \(args) hung") }
        return (status, c.stdout, c.stderr)
    }

    static let brokerCommands = [
        "ping", "post", "observe", "status", "monitor", "invoke", "handle", "put", "take", "peek",
        "categories", "notify", "click", "introspect",
    ]

    @Test func versionHasTheUsualShape() throws {
        for flag in ["--version", "-V", "version"] {
            let (status, out, _) = try run([flag])
            #expect(status == 0)
            #expect(out == "notifbus 0.1.0\n", "\(flag): \(out)")
        }
    }

    @Test(arguments: brokerCommands)
    func helpCommandPrintsTheCommandsHelpWithCommonOptions(_ name: String) throws {
        let (status, out, _) = try run(["help", name])
        #expect(status == 0)
        #expect(out == (try run([name, "--help"])).1)
        #expect(out.hasPrefix("Usage: notifbus \(name)"))
        #expect(out.contains("--timeout DUR") && out.contains("--json"), "\(name) help lacks the common options")
    }

    @Test func helpOfAnUnknownCommandIsAUsageError() throws {
        let (status, _, err) = try run(["help", "frobnicate"])
        #expect(status == 2)
        #expect(err.contains("unknown command 'frobnicate'"))
    }

    @Test func observeHelpShowsTheDefaultPriority() throws {
        let (_, out, _) = try run(["observe", "--help"])
        #expect(out.contains("--priority defaults to \(Limits.defaultPriority)"))
    }

    @Test func everyBrokerCommandAcceptsTimeoutAndJSON() throws {
        let folder = TempFolder()
        // A bad --timeout is a usage error (2) for every command; a good one reaches the
        // connect, which fails (1) on a missing socket: the flag was accepted.
        for name in NewcomerCLITests.brokerCommands {
            #expect(try run([name, "--timeout", "soon"]).0 == 2, "\(name)")
            let args = NewcomerCLITests.minimalArguments(name) + ["--timeout", "1s", "--json", "--socket", folder.path + "/none"]
            let (status, _, err) = try run(args)
            #expect(status == 1 && err.contains("cannot connect"), "\(name): \(status) \(err)")
        }
    }

    static func minimalArguments(_ name: String) -> [String] {
        switch name {
        case "post", "observe": return [name, "e"]
        case "invoke": return [name, "ch", "m"]
        case "handle": return [name, "ch", "--result", "1"]
        case "put": return [name, "s", "1"]
        case "take", "peek": return [name, "s"]
        case "categories": return [name, "get"]
        case "notify", "click": return [name, "--id", "m1"]
        default: return [name]
        }
    }

    @Test func aFolderOrAFileIsNotASocket() throws {
        let folder = TempFolder()
        var (status, _, err) = try run(["ping", "--socket", folder.path])
        #expect(status == 1 && err.contains("is a folder, not a socket"), "\(err)")
        let file = folder.path + "/plain"
        _ = FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        (status, _, err) = try run(["status", "--socket", file])
        #expect(status == 1 && err.contains("\(file): is not a socket"), "\(err)")
    }

    @Test func timeoutBoundsAMuteSocket() throws {
        let folder = TempFolder()
        let listener = try MuteListener(folder.path + "/mute")
        let (status, _, err) = try run(["ping", "--timeout", "300ms", "--socket", listener.path])
        #expect(status == 1)
        #expect(err.contains("timed out: no reply to 'hello' within 300 ms"), "\(err)")
        withExtendedLifetime(listener) {}
    }

    @Test(.enabled(if: getuid() == 0, "needs root to run a client as another uid"))
    func aRefusedUIDIsNamedWithTheFixAndLogged() throws {
        let folder = TempFolder()
        chmod(folder.path, 0o755)
        let broker = try BrokerUnderTest(["--socket-mode", "0666"], folder: folder)
        let c = try Child(
            "/usr/bin/setpriv",
            [
                "--reuid=65534", "--regid=65534", "--clear-groups", Binaries.notifbus,
                "ping", "--socket", broker.socket,
            ])
        #expect(c.waitExit() == 1)
        #expect(c.stderr.contains("forbidden: uid 65534 may not use this broker"), "\(c.stderr)")
        #expect(c.stderr.contains("--allow-uid 65534"), "\(c.stderr)")
        #expect(
            broker.child.waitFor { broker.child.stderr.contains("refused pid") && broker.child.stderr.contains("uid 65534") },
            "\(broker.child.stderr)")
        // A peer that keeps knocking cannot flood the log: refusals are logged like every
        // repeated line, at most one a second with a count of those held back.
        let flood = try Child(
            "/usr/bin/setpriv",
            [
                "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
                """
                import socket, sys
                for _ in range(15):
                    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.recv(4096); s.close()
                """, broker.socket,
            ])
        #expect(flood.waitExit(.seconds(60)) == 0, "\(flood.stderr)")
        #expect(try broker.cli(["ping"]).0 == 0)  // the broker still serves its own user
        #expect(broker.child.waitFor { broker.child.stderr.contains("more like it") }, "\(broker.child.stderr)")
        let refusedLines = broker.child.stderr.split(separator: "\n").filter { $0.contains("refused pid") }.count
        #expect(refusedLines < 16, "16 refusals, \(refusedLines) lines: \(broker.child.stderr)")
    }

    /// A full broker is named as such, with what to do about it, not as a lost connection.
    @Test func aFullBrokerIsNamedWithTheFix() throws {
        let broker = try BrokerUnderTest(["--max-clients", "1"])
        // The readiness probe's connection may still hold the one place for a moment.
        var holder: RawClient? = nil
        #expect(
            broker.child.waitFor {
                guard let c = try? RawClient(broker.socket), (try? c.hello()) != nil else { return false }
                holder = c
                return true
            })
        let (status, _, err) = try broker.cli(["ping"])
        #expect(status == 1)
        #expect(err.contains("too_many_clients: the broker serves at most 1 clients"), "\(err)")
        #expect(err.contains("--max-clients"), "\(err)")
        withExtendedLifetime(holder) {}
    }

    @Test func stateDirParentsAreCreatedPrivate() throws {
        let folder = TempFolder()
        let state = folder.path + "/home/.local/state/notifbus"
        let broker = try BrokerUnderTest(["--state-dir", state], folder: folder)
        #expect(try broker.cli(["put", "kept", "1"]).0 == 0)
        for path in [folder.path + "/home", folder.path + "/home/.local", folder.path + "/home/.local/state", state] {
            var st = stat()
            #expect(stat(path, &st) == 0 && st.st_mode & 0o777 == 0o700, "\(path)")
        }
    }

    @Test func pingJSONAndWait() throws {
        let broker = try BrokerUnderTest()
        let (status, out, _) = try broker.cli(["ping", "--json", "--count", "2"])
        #expect(status == 0)
        let lines = out.split(separator: "\n")
        #expect(lines.count == 2)
        for line in lines {
            let json = try JSONValue(parsing: String(line))
            #expect(json["server"]?.stringValue == "notifbus/0.1.0" && json["rttUs"]?.doubleValue != nil)
        }
        // --wait gives up after its time on a socket that never appears.
        let folder = TempFolder()
        let (late, _, err) = try run(["ping", "--wait", "200ms", "--socket", folder.path + "/later"])
        #expect(late == 1 && err.contains("cannot connect"))
    }

    @Test func monitorStampsLinesAndFilters() throws {
        let broker = try BrokerUnderTest()
        #expect(try broker.cli(["monitor", "--match", "colour=red"]).0 == 2)
        // A direction other than in or out would match nothing, silently: it is a usage error.
        let (badDir, _, dirErr) = try broker.cli(["monitor", "--match", "dir=up"])
        #expect(badDir == 2 && dirErr.contains("in") && dirErr.contains("out"), "\(dirErr)")
        let monitor = try broker.spawn(["monitor", "--match", "op=put,client=c9999", "--match", "op=take", "--count", "1"])
        #expect(monitor.waitFor { monitor.stderr.contains("monitoring") })
        _ = try broker.cli(["put", "x", "1"])
        _ = try broker.cli(["take", "x"])
        #expect(monitor.waitExit() == 0)
        let lines = monitor.stdoutLines
        #expect(lines.count == 1, "\(lines)")
        let line = lines.first ?? ""
        #expect(line.range(of: #"^\d\d:\d\d:\d\d\.\d{6} c\d+ -> \{.*"op":"take""#, options: .regularExpression) != nil, "\(line)")
        let json = try broker.spawn(["monitor", "--json", "--match", "name=alert", "--count", "1"])
        #expect(json.waitFor { json.stderr.contains("monitoring") })
        _ = try broker.cli(["post", "other"])
        _ = try broker.cli(["post", "alert"])
        #expect(json.waitExit() == 0)
        let seen = try JSONValue(parsing: json.stdoutLines.first ?? "")
        #expect(seen["frame"]?["name"]?.stringValue == "alert")
        #expect(seen["time"]?.stringValue?.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$"#, options: .regularExpression) != nil)
    }

    @Test func introspectShowsChainsHandlersSlotsAndCategories() throws {
        let broker = try BrokerUnderTest()
        let late = try broker.spawn(["observe", "willPresent", "--priority", "50", "--name", "late"])
        #expect(late.waitFor { late.stderr.contains("observer o1") })
        let early = try broker.spawn(["observe", "willPresent", "didReceive", "--priority", "5", "--key", "chat", "--name", "early"])
        #expect(early.waitFor { early.stderr.contains("observer o2") })
        let handler = try broker.spawn(["handle", "mail", "open", "--result", "1", "--name", "mailer"])
        #expect(handler.waitFor { handler.stderr.contains("handling") })
        #expect(try broker.cli(["put", "launch", "{}"]).0 == 0)
        let categories = Binaries.repositoryRoot.appendingPathComponent("Examples/categories.json").path
        #expect(try broker.cli(["categories", "set", categories]).0 == 0)

        let (status, tree, _) = try broker.cli(["introspect"])
        #expect(status == 0)
        let early2 = try #require(tree.range(of: "o2 priority 5 key chat"))
        let late2 = try #require(tree.range(of: "o1 priority 50"))
        #expect(early2.lowerBound < late2.lowerBound, "chain order: \(tree)")
        #expect(tree.contains("didReceive") && tree.contains("open: h1") && tree.contains("mailer"))
        #expect(tree.contains("launch") && tree.contains("MESSAGE") && tree.contains("REPLY (text input)"))

        let json = try JSONValue(parsing: try broker.cli(["introspect", "--json"]).1)
        let chain = json["events"]?["willPresent"]?.arrayValue?.compactMap { $0["observer"]?.stringValue }
        #expect(chain == ["o2", "o1"])
        #expect(json["events"]?["didReceive"]?.arrayValue?.first?["name"]?.stringValue == "early")
        #expect(json["channels"]?["mail"]?["open"]?["handler"]?.stringValue == "h1")
        #expect(json["slots"] == ["launch"])
        #expect(json["categories"]?.arrayValue?.first?["identifier"]?.stringValue == "MESSAGE")
    }

    @Test func completionScriptsAndManPageComeFromTheHelp() throws {
        let (bashStatus, bash, _) = try run(["completion", "bash"])
        #expect(bashStatus == 0 && bash.contains("complete -F _notifbus notifbus") && bash.contains("--hop-timeout"))
        let folder = TempFolder()
        let script = folder.path + "/notifbus.bash"
        try bash.write(toFile: script, atomically: true, encoding: .utf8)
        // The script loads in bash and offers the commands and a command's options.
        let probe = try Child(
            "/bin/bash",
            [
                "-c",
                """
                source \(script)
                COMP_WORDS=(notifbus obs); COMP_CWORD=1; _notifbus; echo "${COMPREPLY[*]}"
                COMP_WORDS=(notifbus observe --pri); COMP_CWORD=2; _notifbus; echo "${COMPREPLY[*]}"
                """,
            ])
        #expect(probe.waitExit() == 0)
        #expect(probe.stdoutLines == ["observe", "--priority"], "\(probe.stdout) \(probe.stderr)")
        let (zshStatus, zsh, _) = try run(["completion", "zsh"])
        #expect(zshStatus == 0 && zsh.hasPrefix("#compdef notifbus") && zsh.contains("introspect"))
        let (fishStatus, fish, _) = try run(["completion", "fish"])
        #expect(fishStatus == 0 && fish.contains("-a monitor") && fish.contains("-l match"))
        #expect(try run(["completion", "tcsh"]).0 == 2)
        let (manStatus, man, _) = try run(["manpage"])
        #expect(manStatus == 0 && man.hasPrefix(".TH NOTIFBUS 1"))
        for name in NewcomerCLITests.brokerCommands { #expect(man.contains(".SS \(name)"), "\(name) missing from the man page") }
        #expect(man.contains("\\-\\-priority defaults to 100"))
        // roff reads Latin-1 by default: the help's "…" and "µs" are written as \[uXXXX].
        let nonASCII = man.unicodeScalars.filter { !$0.isASCII }
        #expect(nonASCII.isEmpty, "non-ASCII in the man page: \(String(String.UnicodeScalarView(nonASCII)))")
        #expect(man.contains("\\[u2026]"))
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/fish"), "fish is installed by scripts/setup.sh"))
    func fishCompletionOffersCommandsAndOptions() throws {
        let folder = TempFolder()
        let script = folder.path + "/notifbus.fish"
        try (try run(["completion", "fish"])).1.write(toFile: script, atomically: true, encoding: .utf8)
        let probe = try Child(
            "/usr/bin/fish", ["--no-config", "-c", "source \(script); complete -C 'notifbus intro'; complete -C 'notifbus monitor --mat'"])
        #expect(probe.waitExit() == 0)
        #expect(
            probe.stdoutLines == ["introspect\tshow events, channels, slots and categories by name", "--match"],
            "\(probe.stdout) \(probe.stderr)")
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/zsh"), "zsh is installed by scripts/setup.sh"))
    func zshCompletionIsValidZsh() throws {
        let folder = TempFolder()
        let script = folder.path + "/_notifbus"
        try (try run(["completion", "zsh"])).1.write(toFile: script, atomically: true, encoding: .utf8)
        let check = try Child("/usr/bin/zsh", ["-n", script])
        #expect(check.waitExit() == 0, "\(check.stderr)")
    }

    @Test func notifyKeepsTheObserversOptionOrder() throws {
        let broker = try BrokerUnderTest()
        let observer = try broker.spawn(["observe", "willPresent", "--reply", "complete", "--value", #"["sound","badge","banner"]"#])
        #expect(observer.waitFor { observer.stderr.contains("observer o1") })
        let (status, out, _) = try broker.cli(["notify", "--id", "m1", "--title", "Hi"])
        #expect(status == 0)
        #expect(out.contains("present with sound, badge, banner"), "\(out)")
    }
}

/// A Unix socket that accepts connections and never answers: a broker that hangs.
final class MuteListener {
    let path: String
    let fd: Int32

    init(_ path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard fd >= 0, bound == 0, listen(fd, 8) == 0 else { throw TestFailure("cannot listen on \(path)") }
    }

    deinit { close(fd) }
}
