// Entry point of mailclick-app, the Flutter side of the MailClick example: connects to the
// broker, registers the click handler and asks for the launch click (in the order the
// flags say), or with --desktop runs as the whole app on a desktop; then runs until
// SIGTERM, the end of --run-for, or the broker's departure.
import MailClickSupport
import NotifBusClient

let program = ExampleProgram(name: "mailclick-app")
let options = program.options(AppOptions.self)
let terminationSources = Console.exitOnTermination("app: closing")
let bus = await program.connect()
Console.line("app \(bus.clientID) started")

let app = MailApp(bus: bus, options: options)

/// Beside the native host (mailclick-host), in the order the flags say.
func runWithTheHost() async throws(NotifBusError) {
    if options.askFirst { await app.askLaunchClick(again: false) }
    try await app.handleClicks()
    if !options.askFirst { await app.askLaunchClick(again: false) }
    if options.askTwice { await app.askLaunchClick(again: true) }
}

do {
    if let desktopID = options.desktopID {
        try await app.runOnDesktop(appID: desktopID)
    } else {
        try await runWithTheHost()
    }
} catch {
    program.fail("cannot register", error)
}

await program.serve(bus, runForMs: options.runForMs, closing: "app: --run-for has passed, closing")
