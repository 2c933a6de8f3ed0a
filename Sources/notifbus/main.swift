// Entry point of the `notifbus` command: picks the subcommand and maps failures to exit
// statuses (0 success, 1 error with a one-line message, 2 bad usage).
import Glibc

// A peer that goes away (a broker, an --exec child that never reads its stdin) must give
// an error, not kill the process.
signal(SIGPIPE, SIG_IGN)
let arguments = Array(CommandLine.arguments.dropFirst())
let status = await CLI.run(arguments)
exit(status)
