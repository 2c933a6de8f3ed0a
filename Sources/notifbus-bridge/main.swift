// notifbus-bridge: bridges a device's broker to a remote engine. `notifbus bridge nats ...`
// runs this executable; it links cnats, which the broker binary must never load. It also
// holds the servers' side, `notifbus push ...` (`notifbus-bridge push ...`).
import Glibc

let arguments = Array(CommandLine.arguments.dropFirst())
let usage =
    "usage: notifbus bridge nats --url nats://HOST:PORT[,...] --device ID [--layout shared|per-device] [--stream NAME] [--create-stream --replicas N] [--export EVENT]..."

func fail(_ message: String, status: Int32) -> Never {
    log(message)
    exit(status)
}

signal(SIGPIPE, SIG_IGN)
switch arguments.first {
case nil:
    fail(usage, status: 2)
case "--help", "-h", "help":
    print(
        "usage: notifbus bridge ENGINE [options]\n\nengines:\n  nats    NATS JetStream (notifbus bridge nats --help)\n\n"
            + "servers' side: notifbus push ... (notifbus push --help)")
    exit(0)
case "nats":
    let parsed: BridgeOptions?
    do { parsed = try BridgeOptions.parse(Array(arguments.dropFirst())) } catch { fail(error.message + "\n" + usage, status: 2) }
    guard let options = parsed else {
        print(BridgeOptions.help)
        exit(0)
    }
    let bridge: NATSBridge
    do { bridge = try NATSBridge(options: options) } catch { fail("\(error)", status: 1) }
    bridge.run()
case "push":
    let parsed: PushOptions?
    do { parsed = try PushOptions.parse(Array(arguments.dropFirst())) } catch {
        pushError(error.message + "\n" + "see 'notifbus push --help'")
        exit(2)
    }
    guard let options = parsed else {
        print(PushOptions.help)
        exit(0)
    }
    do { exit(try PushCommand.run(options)) } catch {
        pushError(error.message)
        exit(1)
    }
default:
    fail("unknown engine '\(arguments[0])' (known: nats)\n" + usage, status: 2)
}
