// Entry point of the `notifbus` command: picks the subcommand and maps failures to exit
// statuses (0 success, 1 error with a one-line message, 2 bad usage).
import Dispatch
import Glibc

// A peer that goes away (a broker, an --exec child that never reads its stdin) must give
// an error, not kill the process.
signal(SIGPIPE, SIG_IGN)
switch CLI.plan(Array(CommandLine.arguments.dropFirst())) {
case .exit(let status):
    exit(status)
case .run(let command, let arguments):
    if let runOnMainThread = command.runOnMainThread {
        do { exit(try runOnMainThread(arguments)) } catch { exit(CLI.status(of: error, in: command)) }
    }
    Task {
        do { exit(try await command.run(arguments)) } catch { exit(CLI.status(of: error, in: command)) }
    }
    dispatchMain()
}
