// Entry point of the `notifbus` command: picks the subcommand and maps failures to exit
// statuses (0 success, 1 error with a one-line message, 2 bad usage).
import Glibc

let arguments = Array(CommandLine.arguments.dropFirst())
let status = await CLI.run(arguments)
exit(status)
