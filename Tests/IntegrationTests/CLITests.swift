// The CLI's contract: help on every subcommand, exit 0/1/2, one-line errors.
import Foundation
import Testing

@Suite(.ownThread, .timeLimit(.minutes(5))) struct CLITests {
    static let subcommands = ["broker", "ping", "post", "observe", "status", "monitor", "invoke", "handle", "put", "take", "peek"]

    func run(_ args: [String]) throws -> (Int32, String, String) {
        let c = try Child(Binaries.notifbus, args)
        guard let status = c.waitExit() else { throw TestFailure("notifbus \(args) hung") }
        return (status, c.stdout, c.stderr)
    }

    @Test func topLevelHelp() throws {
        let (status, out, _) = try run(["--help"])
        #expect(status == 0)
        for name in CLITests.subcommands { #expect(out.contains("  \(name)"), "\(name) missing from help") }
        #expect(try run([]).0 == 2)
        #expect(try run(["frobnicate"]).0 == 2)
    }

    @Test(arguments: subcommands)
    func subcommandHelp(_ name: String) throws {
        let (status, out, _) = try run([name, "--help"])
        #expect(status == 0)
        #expect(out.hasPrefix("Usage: notifbus \(name)"))
        #expect(out.contains("--socket"))
    }

    /// The broker's help says what each signal does and names the buffer cap and the
    /// per-connection share of the queue.
    @Test func brokerHelpDescribesSignalsAndTheBufferCap() throws {
        let (status, out, _) = try run(["broker", "--help"])
        #expect(status == 0)
        for word in ["SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM", "--max-buffered-bytes", "--max-queue-per-client"] {
            #expect(out.contains(word), "\(word) missing from 'broker --help'")
        }
        let (bad, _, err) = try run(["broker", "--max-buffered-bytes", "0"])
        #expect(bad == 2)
        #expect(err.contains("max-buffered-bytes"))
        // A cap below one frame would cut off a client for sending a frame the broker allows.
        let (small, _, smallErr) = try run(["broker", "--max-frame", "4096", "--max-buffered-bytes", "4095"])
        #expect(small == 2)
        #expect(smallErr.contains("at least --max-frame"), "\(smallErr)")
        // A share of the queue is at least one post.
        let (noShare, _, noShareErr) = try run(["broker", "--max-queue-per-client", "0"])
        #expect(noShare == 2)
        #expect(noShareErr.contains("max-queue-per-client"), "\(noShareErr)")
    }

    @Test func usageErrorsExitTwo() throws {
        for args in [
            ["post"], ["post", "e", "{bad"], ["observe"], ["observe", "e", "--reply", "maybe"], ["invoke", "ch"],
            ["take", "s", "--wait", "soon"], ["handle", "ch"], ["handle", "ch", "--result", "1", "--error", "E"],
            ["ping", "--count", "0"], ["status", "--bogus"],
        ] {
            let (status, _, err) = try run(args)
            #expect(status == 2, "\(args)")
            #expect(err.split(separator: "\n").count == 1, "\(args): \(err)")
        }
    }

    @Test func unreachableBrokerExitsOne() throws {
        let folder = TempFolder()
        for args in [["ping"], ["post", "e"], ["status"], ["take", "s"]] {
            let (status, _, err) = try run(args + ["--socket", folder.path + "/none"])
            #expect(status == 1, "\(args)")
            #expect(err.split(separator: "\n").count == 1 && err.contains("cannot connect"), "\(args): \(err)")
        }
    }

    /// `--once KEY`: the same command run again prints the first outcome and changes
    /// nothing (a note on stderr says so); other arguments with the key fail `once_conflict`.
    @Test func onceKeysOnTheCommandLine() throws {
        let broker = try BrokerUnderTest()
        var r = try broker.cli(["put", "s", "1", "--once", "put-1"])
        #expect(r.0 == 0 && r.1 == "{\"delivered\":false,\"replaced\":false}\n" && r.2.isEmpty, "\(r)")
        _ = try broker.cli(["put", "s", "2"])
        r = try broker.cli(["put", "s", "1", "--once", "put-1"])
        #expect(r.0 == 0 && r.1 == "{\"delivered\":false,\"replaced\":false}\n" && r.2.contains("a repeat"), "\(r)")
        #expect(try broker.cli(["peek", "s"]).1 == "2\n")
        r = try broker.cli(["put", "s", "3", "--once", "put-1"])
        #expect(r.0 == 1 && r.2.contains("once_conflict"), "\(r)")

        #expect(try broker.cli(["take", "s", "--once", "take-1"]).1 == "2\n")
        _ = try broker.cli(["put", "s", "4"])
        r = try broker.cli(["take", "s", "--once", "take-1"])
        #expect(r.0 == 0 && r.1 == "2\n" && r.2.contains("a repeat"), "\(r)")
        #expect(try broker.cli(["peek", "s"]).1 == "4\n")

        let first = try broker.cli(["post", "e", "{\"n\":1}", "--once", "post-1"])
        let again = try broker.cli(["post", "e", "{\"n\":1}", "--once", "post-1"])
        #expect(first.0 == 0 && again.0 == 0 && first.1 == again.1 && again.2.contains("a repeat"), "\(first) \(again)")
        r = try broker.cli(["post", "e", "--once", ""])
        #expect(r.0 == 1 && r.2.contains("bad_request"), "\(r)")

        let file = broker.folder.path + "/categories.json"
        try Data(#"[{"identifier":"C","actions":[]}]"#.utf8).write(to: URL(fileURLWithPath: file))
        #expect(try broker.cli(["categories", "set", file, "--once", "cat-1"]).1 == "{\"count\":1}\n")
        r = try broker.cli(["categories", "set", file, "--once", "cat-1"])
        #expect(r.0 == 0 && r.1 == "{\"count\":1}\n" && r.2.contains("a repeat"), "\(r)")
        #expect(try run(["categories", "get", "--once", "cat-1"]).0 == 2)
        #expect(try broker.cli(["status"]).1.contains("posted 1"))
    }

    @Test func probesAgainstALiveBroker() throws {
        let broker = try BrokerUnderTest()
        var r = try broker.cli(["ping", "--count", "2"])
        #expect(r.0 == 0 && r.1.split(separator: "\n").count == 2 && r.1.contains("µs"))
        r = try broker.cli(["status"])
        #expect(r.0 == 0 && r.1.contains("counters") && r.1.contains("posted 0"))
        let monitor = try broker.spawn(["monitor", "--count", "2"])
        #expect(monitor.waitFor { monitor.stderr.contains("monitoring") })
        _ = try broker.cli(["put", "x", "1"])
        #expect(monitor.waitExit() == 0)
        #expect(monitor.stdout.contains(" -> ") && monitor.stdout.contains("\"op\":\"hello\""))
        // The environment variable is the default socket.
        let env = ProcessInfo.processInfo.environment.merging(["NOTIFBUS_SOCKET": broker.socket]) { $1 }
        let c = try Child(Binaries.notifbus, ["ping"], environment: env)
        #expect(c.waitExit() == 0)
    }
}
