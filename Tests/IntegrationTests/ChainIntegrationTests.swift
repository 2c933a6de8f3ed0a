// The chain across real processes: `notifbus observe` children, a SIGKILLed observer, a
// hung observer, a client sending garbage while others work, and SIGTERM with posts queued.
import Foundation
import Glibc
import NotifBusProtocol
import Testing

@Suite(.ownThread, .timeLimit(.minutes(5))) struct ChainIntegrationTests {
    /// Starts an observer process and waits until it is subscribed.
    func observer(_ broker: BrokerUnderTest, _ args: [String]) throws -> Child {
        let child = try broker.spawn(["observe"] + args)
        guard child.waitFor(.seconds(10), { child.stderr.contains("notifbus: observer o") }) else {
            throw TestFailure("observer did not start: \(child.stderr)")
        }
        return child
    }

    @Test func chainAcrossProcessesInPriorityOrder() throws {
        let broker = try BrokerUnderTest()
        let passer = try observer(broker, ["willPresent", "--priority", "10"])
        let presenter = try observer(broker, ["willPresent", "--priority", "20", "--reply", "complete", "--value", #"["banner","sound"]"#])
        let (status, out, err) = try broker.cli(["post", "willPresent", #"{"notification":{"identifier":"n1","content":{"title":"Hi"}}}"#])
        #expect(status == 0, "\(err)")
        let result = try JSONValue(parsing: out.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(result["outcome"] == "completed")
        #expect(result["value"] == ["banner", "sound"])
        #expect(result["trace"]?.arrayValue?.map { $0["reply"] } == ["next", "complete"])
        #expect(passer.stdoutLines.count == 1 && presenter.stdoutLines.count == 1)
        let event = try JSONValue(parsing: passer.stdoutLines[0])
        #expect(event["name"] == "willPresent" && event["payload"]?["notification"]?["identifier"] == "n1")
    }

    @Test func killedObserverMidHopIsGonePromptly() throws {
        let broker = try BrokerUnderTest(["--hop-timeout", "30s"])
        let victim = try observer(broker, ["e", "--priority", "1", "--delay", "20s"])
        _ = try observer(broker, ["e", "--priority", "2", "--reply", "stop"])
        let poster = try RawClient(broker.socket)
        try poster.hello()
        poster.send(#"{"op":"post","id":1,"name":"e"}"#)
        #expect(victim.waitFor { victim.stdoutLines.count == 1 })
        victim.signal(SIGKILL)
        // `gone`, not `timeout`: the chain went on when the connection closed, not when the
        // 30 s hop timeout ran out.
        let reply = poster.read(timeout: .seconds(5))
        #expect(reply?["result"]?["trace"]?.arrayValue?.map { $0["reply"] } == ["gone", "stop"])
        #expect(reply?["result"]?["outcome"] == "stopped")
        let counters = poster.request(#"{"op":"status","id":2}"#)?["result"]?["counters"]
        #expect(counters?["gone"] == 1 && counters?["hopTimeouts"] == 0, "\(String(describing: counters))")
    }

    @Test func hungObserverTimesOut() throws {
        let broker = try BrokerUnderTest(["--hop-timeout", "300ms"])
        _ = try observer(broker, ["e", "--priority", "1", "--delay", "10s"])
        _ = try observer(broker, ["e", "--priority", "2", "--reply", "complete", "--value", "42"])
        // `timeout`, then the next observer's answer: the hop ended at the hop timeout, not when
        // the hung observer would have answered.
        let (status, out, _) = try broker.cli(["post", "e"])
        #expect(status == 0)
        let result = try JSONValue(parsing: out.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(result["trace"]?.arrayValue?.map { $0["reply"] } == ["timeout", "complete"])
        #expect(result["value"] == 42)
        let statusOut = try broker.cli(["status", "--json"]).1
        #expect(try JSONValue(parsing: statusOut.trimmingCharacters(in: .whitespacesAndNewlines))["counters"]?["hopTimeouts"] == 1)
    }

    @Test func garbageFromOneClientHarmsNoOther() throws {
        let broker = try BrokerUnderTest()
        _ = try observer(broker, ["e", "--reply", "complete", "--value", "\"ok\""])
        let good = try RawClient(broker.socket)
        try good.hello()
        let noisy = try RawClient(broker.socket)
        try noisy.hello()
        for i in 0..<50 {
            noisy.send("this is not json \(i)")
            #expect(errorCode(noisy.read()) == "bad_json")
            let reply = good.request("{\"op\":\"post\",\"id\":\(i),\"name\":\"e\"}")
            #expect(reply?["result"]?["value"] == "ok")
        }
        // A length prefix beyond the limit closes only that connection.
        noisy.sendRaw([0x7F, 0xFF, 0xFF, 0xFF, 0x00])
        #expect(errorCode(noisy.read()) == "frame_too_large")
        #expect(noisy.isClosedByPeer())
        let raw = try RawClient(broker.socket)
        raw.sendRaw(Array(repeating: 0xAB, count: 4096))  // random bytes before hello
        #expect(raw.isClosedByPeer())
        #expect(good.request(#"{"op":"ping","id":"still"}"#)?["result"] == [:])
    }

    @Test func sigtermWithPostsQueued() throws {
        let broker = try BrokerUnderTest()
        let slow = try observer(broker, ["e", "--delay", "30s"])
        let poster = try RawClient(broker.socket)
        try poster.hello()
        for i in 1...5 { poster.send("{\"op\":\"post\",\"id\":\(i),\"name\":\"e\"}") }
        // One post running (its event at the slow observer), four waiting behind it.
        #expect(slow.waitFor { slow.stdoutLines.count == 1 })
        let watcher = try RawClient(broker.socket)
        try watcher.hello()
        #expect(slow.waitFor { watcher.request(#"{"op":"status","id":1}"#)?["result"]?["queue"]?["pending"] == 4 })
        broker.child.signal(SIGTERM)
        var codes: [String?] = []
        for _ in 1...5 { codes.append(errorCode(poster.read(timeout: .seconds(3)))) }
        // The running post too: shutting down does not wait for the hop it is in.
        #expect(codes == Array(repeating: "shutting_down", count: 5))
        #expect(poster.isClosedByPeer())
        #expect(broker.child.waitExit(.seconds(10)) == 0)
        #expect(!FileManager.default.fileExists(atPath: broker.socket))
    }
}
