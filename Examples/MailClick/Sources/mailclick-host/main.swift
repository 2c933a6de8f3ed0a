// Entry point of mailclick-host, the native side of the MailClick example: connects to the
// broker, starts the host, and runs until SIGTERM, the end of --run-for, or the broker's
// departure. Exit status: 0 done, 1 broker trouble, 2 bad usage.
import Glibc
import NotifBusClient

let options: HostOptions
do {
    options = try HostOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    Console.error("mailclick-host: \(error); see --help")
    exit(2)
}
if options.help {
    Console.line(HostOptions.usage)
    exit(0)
}

let terminationSources = Console.exitOnTermination("native host: closing")
let bus: NotifBusConnection
do {
    bus = try await NotifBusConnection.connect(name: "mailclick-host")
} catch {
    Console.error("mailclick-host: \(error)")
    exit(1)
}

let host = NativeHost(bus: bus, options: options)
do {
    let observer = try await host.start()
    Console.line("native host \(bus.clientID): observing \(MailChannel.clickEvent) as \(observer.id) "
        + "(key \(options.key), priority \(options.priority)); answering \(MailChannel.launchEmailID)")
} catch {
    Console.error("mailclick-host: cannot register: \(error)")
    exit(1)
}

let clock = ContinuousClock()
let deadline = clock.now + .milliseconds(options.runForMs)
while bus.isOpen && clock.now < deadline {
    try? await Task.sleep(for: .milliseconds(100))
}
if bus.isOpen {
    Console.line("native host: --run-for has passed, closing")
    bus.close()
    exit(0)
}
Console.error("mailclick-host: the connection to the broker was lost")
exit(1)
