// Entry point of mailclick-app, the Flutter side of the MailClick example: connects to the
// broker, registers the click handler and asks for the launch click (in the order the
// flags say), then runs until SIGTERM, the end of --run-for, or the broker's departure.
import Glibc
import NotifBusClient

let options: AppOptions
do {
    options = try AppOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    Console.error("mailclick-app: \(error); see --help")
    exit(2)
}
if options.help {
    Console.line(AppOptions.usage)
    exit(0)
}

let terminationSources = Console.exitOnTermination("app: closing")
let bus: NotifBusConnection
do {
    bus = try await NotifBusConnection.connect(name: "mailclick-app")
} catch {
    Console.error("mailclick-app: \(error)")
    exit(1)
}
Console.line("app \(bus.clientID) started")

let app = MailApp(bus: bus, options: options)
do {
    if options.askFirst { await app.askLaunchClick(again: false) }
    try await app.handleClicks()
    if !options.askFirst { await app.askLaunchClick(again: false) }
    if options.askTwice { await app.askLaunchClick(again: true) }
} catch {
    Console.error("mailclick-app: cannot register: \(error)")
    exit(1)
}

let clock = ContinuousClock()
let deadline = clock.now + .milliseconds(options.runForMs)
while bus.isOpen && clock.now < deadline {
    try? await Task.sleep(for: .milliseconds(100))
}
if bus.isOpen {
    Console.line("app: --run-for has passed, closing")
    bus.close()
    exit(0)
}
Console.error("mailclick-app: the connection to the broker was lost")
exit(1)
