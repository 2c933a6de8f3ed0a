// Entry point of mailclick-host, the native side of the MailClick example: connects to the
// broker, starts the host, and runs until SIGTERM, the end of --run-for, or the broker's
// departure. Exit status: 0 done, 1 broker trouble, 2 bad usage.
import MailClickSupport

let program = ExampleProgram(name: "mailclick-host")
let options = program.options(HostOptions.self)
let terminationSources = Console.exitOnTermination("native host: closing")
let bus = await program.connect()

let host = NativeHost(bus: bus, options: options)
do {
    let observer = try await host.start()
    Console.line(
        "native host \(bus.clientID): observing \(MailChannel.clickEvent) as \(observer.id) "
            + "(key \(options.key), priority \(options.priority)); answering \(MailChannel.launchEmailID)")
} catch {
    program.fail("cannot register", error)
}
await program.serve(bus, runForMs: options.runForMs, closing: "native host: --run-for has passed, closing")
