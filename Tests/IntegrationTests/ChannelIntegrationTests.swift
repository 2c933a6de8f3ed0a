// Method channels and slots across processes: routing, 100 concurrent calls answered out
// of order, a handler killed mid-call, call timeouts, take-once, waiting takes, and slots
// surviving SIGKILL of the broker with --state-dir.
import Foundation
import Glibc
import NotifBusClient
import NotifBusProtocol
import Testing

@Suite(.timeLimit(.minutes(5))) struct ChannelIntegrationTests {
    func handler(_ broker: BrokerUnderTest, _ args: [String]) throws -> Child {
        let child = try broker.spawn(["handle"] + args)
        guard child.waitFor(.seconds(10), { child.stderr.contains("notifbus: handling") }) else {
            throw TestFailure("handler did not start: \(child.stderr)")
        }
        return child
    }

    @Test(.ownThread) func routingAcrossProcesses() throws {
        let broker = try BrokerUnderTest()
        _ = try handler(broker, ["ni", "--result", #""channel""#])
        _ = try handler(broker, ["ni", "current_email_id", "--result", #"{"emailId":"e-7"}"#])
        _ = try handler(broker, ["errs", "--error", "E_BAD:it broke"])
        var r = try broker.cli(["invoke", "ni", "current_email_id"])
        #expect(r.0 == 0 && r.1 == "{\"emailId\":\"e-7\"}\n")
        r = try broker.cli(["invoke", "ni", "anything", "[1,2]"])
        #expect(r.0 == 0 && r.1 == "\"channel\"\n")
        r = try broker.cli(["invoke", "nobody", "m"])
        #expect(r.0 == 1 && r.2.contains("not_implemented"))
        r = try broker.cli(["invoke", "errs", "m"])
        #expect(r.0 == 1 && r.2.contains("E_BAD: it broke"))
    }

    @Test(.ownThread) func execHandler() throws {
        let broker = try BrokerUnderTest()
        _ = try handler(
            broker, ["calc", "double", "--exec", #"python3 -c 'import json,sys; c=json.load(sys.stdin); print(json.dumps(c["arguments"]*2))'"#])
        _ = try handler(broker, ["calc", "fail", "--exec", "echo nope >&2; exit 3"])
        var r = try broker.cli(["invoke", "calc", "double", "21"])
        #expect(r.0 == 0 && r.1 == "42\n", "\(r)")
        r = try broker.cli(["invoke", "calc", "fail"])
        #expect(r.0 == 1 && r.2.contains("exec_failed: nope"), "\(r)")
    }

    @Test func hundredConcurrentCallsOutOfOrder() async throws {
        let broker = try BrokerUnderTest()
        let server = try await NotifBusConnection.connect(socket: broker.socket, name: "server")
        defer { server.close() }
        try await server.methodChannel("math").setMethodCallHandler { call in
            let n = call.arguments.intValue ?? -1
            // Later calls answer sooner, so returns arrive out of order.
            try await Task.sleep(for: .milliseconds(Int(200 - 2 * n)))
            return .integer(n * n)
        }
        var clients: [NotifBusConnection] = []
        for i in 0..<4 { clients.append(try await NotifBusConnection.connect(socket: broker.socket, name: "client\(i)")) }
        defer { for c in clients { c.close() } }
        let results = try await withThrowingTaskGroup(of: (Int64, JSONValue).self) { group in
            for n in Int64(0)..<100 {
                let channel = clients[Int(n) % clients.count].methodChannel("math")
                group.addTask { (n, try await channel.invokeMethod("square", arguments: .integer(n))) }
            }
            var all: [(Int64, JSONValue)] = []
            for try await r in group { all.append(r) }
            return all
        }
        #expect(results.count == 100)
        for (n, value) in results { #expect(value == .integer(n * n)) }
    }

    @Test(.ownThread) func handlerKilledMidCallIsHandlerGone() throws {
        let broker = try BrokerUnderTest(["--call-timeout", "30s"])
        let slow = try handler(broker, ["ch", "--exec", "sleep 20; echo 1"])
        let caller = try broker.spawn(["invoke", "ch", "m"])
        #expect(slow.waitFor { slow.stdoutLines.count == 1 })
        slow.signal(SIGKILL)
        // `handler_gone`, not `timeout`: the call ended when the handler's connection closed,
        // not when the 30 s call timeout ran out.
        #expect(caller.waitExit(.seconds(10)) == 1)
        #expect(caller.stderr.contains("handler_gone") && !caller.stderr.contains("timeout"), "\(caller.stderr)")
    }

    @Test(.ownThread) func callTimeout() throws {
        let broker = try BrokerUnderTest(["--call-timeout", "300ms"])
        _ = try handler(broker, ["ch", "--exec", "sleep 5; echo 1", "--exec-timeout", "10s"])
        // The broker's call timeout answers while the handler still runs its command (whose
        // answer, had it come first, would be the result 1), and counts it.
        let r = try broker.cli(["invoke", "ch", "m"])
        #expect(r.0 == 1 && r.2.contains("timeout"), "\(r)")
        let counters = try JSONValue(parsing: try broker.cli(["status", "--json"]).1.trimmingCharacters(in: .whitespacesAndNewlines))["counters"]
        #expect(counters?["callTimeouts"] == 1, "\(String(describing: counters))")
    }

    @Test(.ownThread) func takeOnceAcrossProcessesAndWaiting() throws {
        let broker = try BrokerUnderTest()
        #expect(try broker.cli(["put", "launch", #"{"emailId":"e-1"}"#]).1 == "{\"delivered\":false,\"replaced\":false}\n")
        #expect(try broker.cli(["peek", "launch"]).1 == "{\"emailId\":\"e-1\"}\n")
        #expect(try broker.cli(["take", "launch"]).1 == "{\"emailId\":\"e-1\"}\n")
        #expect(try broker.cli(["take", "launch"]).1 == "null\n")
        // A take that waits is fulfilled by a later put from another process.
        let waiter = try broker.spawn(["take", "launch", "--wait", "10s"])
        usleep(300_000)
        #expect(try broker.cli(["put", "launch", #""late""#]).1 == "{\"delivered\":true,\"replaced\":false}\n")
        #expect(waiter.waitExit() == 0)
        #expect(waiter.stdout == "\"late\"\n")
        // And one that is not fulfilled answers null after its wait, and waits no more: the
        // next put finds no taker and stays in the slot. (When the wait ends is the core's to
        // hold, against its fake clock: ChannelTests.)
        #expect(try broker.cli(["take", "launch", "--wait", "300ms"]).1 == "null\n")
        #expect(try broker.cli(["put", "launch", #""kept""#]).1 == "{\"delivered\":false,\"replaced\":false}\n")
        #expect(try broker.cli(["peek", "launch"]).1 == "\"kept\"\n")
    }

    @Test(.ownThread) func slotsSurviveSIGKILLWithStateDir() throws {
        let folder = TempFolder()
        let state = folder.path + "/state"
        var broker: BrokerUnderTest? = try BrokerUnderTest(["--state-dir", state], folder: folder)
        for i in 0..<20 { _ = try broker!.cli(["put", "slot\(i)", "{\"n\":\(i)}"]) }
        _ = try broker!.cli(["take", "slot0"])
        _ = try broker!.cli(["put", "slot1", "null"])
        broker!.child.signal(SIGKILL)
        broker!.child.waitExit()
        broker = nil
        var st = stat()
        #expect(stat(state, &st) == 0 && st.st_mode & 0o777 == 0o700)
        #expect(stat(state + "/state.journal", &st) == 0 && st.st_mode & 0o777 == 0o600)
        let restarted = try BrokerUnderTest(["--state-dir", state], folder: folder)
        #expect(try restarted.cli(["peek", "slot0"]).1 == "null\n")
        #expect(try restarted.cli(["peek", "slot1"]).1 == "null\n")
        for i in 2..<20 { #expect(try restarted.cli(["take", "slot\(i)"]).1 == "{\"n\":\(i)}\n") }
    }

    @Test(.ownThread) func corruptJournalIsReportedAndSetAside() throws {
        let folder = TempFolder()
        let state = folder.path + "/state"
        do {
            let broker = try BrokerUnderTest(["--state-dir", state], folder: folder)
            _ = try broker.cli(["put", "good", "1"])
            _ = try broker.cli(["put", "also", "2"])
        }
        // Tear the last record in half.
        let path = state + "/state.journal"
        var data = try Data(contentsOf: URL(fileURLWithPath: path))
        data.removeLast(3)
        try data.write(to: URL(fileURLWithPath: path))
        let restarted = try BrokerUnderTest(["--state-dir", state], folder: folder)
        #expect(restarted.child.waitFor { restarted.child.stderr.contains("truncated record") })
        #expect(try restarted.cli(["peek", "good"]).1 == "1\n")
        let kept = try FileManager.default.contentsOfDirectory(atPath: state).filter { $0.contains("corrupt") }
        #expect(kept.count == 1)
    }
}
