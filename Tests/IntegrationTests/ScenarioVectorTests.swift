// Plays the multi-connection scenarios of Protocol/vectors/scenarios/ against the built
// broker, one fresh broker per scenario, over raw sockets (RawClient). The format is
// described at the end of Protocol/README.md; the Python and JavaScript suites play the
// same files. Every wait is bounded.
import Foundation
import Glibc
import NotifBusProtocol
import TestSupport
import Testing

/// Runs one scenario's steps on connections to `socket`.
final class ScenarioPlayer {
    static let defaultTimeoutMs: Int64 = 2000

    let scenario: Scenario
    let socket: String
    private var connections: [String: RawClient] = [:]
    private var frames: ScenarioMatcher

    init(_ scenario: Scenario, socket: String) {
        self.scenario = scenario
        self.socket = socket
        frames = ScenarioMatcher(scenario: scenario.name)
    }

    func fail(_ index: Int, _ step: JSONValue, _ why: String) -> TestFailure {
        TestFailure("\(scenario.name): step \(index) \(step.text): \(why)")
    }

    /// Connects in the listed order, each hello answered before the next connect.
    func connectAll() throws {
        let greetAll = scenario.value["hello"]?.boolValue ?? true
        for entry in scenario.value["connections"]?.arrayValue ?? [] {
            let name = entry.stringValue ?? entry["name"]?.stringValue ?? ""
            let client = try RawClient(socket)
            connections[name] = client
            guard greetAll, entry["hello"]?.boolValue ?? true else { continue }
            client.send(ScenarioMatcher.hello(name).text)
            let reply = client.read(timeout: .milliseconds(Self.defaultTimeoutMs))
            guard let reply, try frames.matches(ScenarioMatcher.helloReply, reply, subset: false),
                let id = reply["result"]?["client"]?.stringValue
            else {
                throw TestFailure("\(scenario.name): hello of \(name) got \(reply?.text ?? "nothing")")
            }
            frames.clientIDs[name] = id
        }
    }

    func connection(_ name: String?) throws -> RawClient {
        guard let name, let client = connections[name] else { throw TestFailure("\(scenario.name): no connection \(name ?? "?")") }
        return client
    }

    /// Whether the peer has closed this socket, looking without consuming anything.
    static func peerClosed(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    func run() throws {
        try connectAll()
        for (index, step) in (scenario.value["steps"]?.arrayValue ?? []).enumerated() {
            try play(index, step)
        }
    }

    func play(_ index: Int, _ step: JSONValue) throws {
        let timeout = Duration.milliseconds(step["timeout"]?.intValue ?? Self.defaultTimeoutMs)
        if let name = step["send"]?.stringValue {
            try connection(name).send(frames.substitute(step["frame"] ?? .null).text)
        } else if let name = step["expect"]?.stringValue {
            guard let got = try connection(name).read(timeout: timeout) else {
                throw fail(index, step, "got no frame (closed, or nothing within \(timeout))")
            }
            let subset = step["match"]?.stringValue == "subset"
            guard try frames.matches(step["frame"] ?? .null, got, subset: subset) else { throw fail(index, step, "got \(got.text)") }
        } else if let name = step["expectNothing"]?.stringValue {
            let client = try connection(name)
            if let got = client.read(timeout: .milliseconds(step["within"]?.intValue ?? 0)) {
                throw fail(index, step, "got \(got.text)")
            }
            if Self.peerClosed(client.fd) { throw fail(index, step, "the connection was closed") }
        } else if let name = step["expectClosed"]?.stringValue {
            let client = try connection(name)
            if let got = client.read(timeout: timeout) { throw fail(index, step, "expected end of stream, got \(got.text)") }
            guard Self.peerClosed(client.fd) else { throw fail(index, step, "still open after \(timeout)") }
        } else if let name = step["close"]?.stringValue {
            // The player holds the only reference: dropping it closes the socket (RawClient's deinit).
            _ = try connection(name)
            connections[name] = nil
        } else if let ms = step["sleep"]?.intValue {
            usleep(UInt32(ms) * 1000)
        } else {
            throw fail(index, step, "unknown step")
        }
    }
}

@Suite(.serialized, .ownThread, .timeLimit(.minutes(5))) struct ScenarioVectorTests {
    @Test func scenariosArePresent() {
        #expect(Scenario.problems == [])
    }

    @Test(arguments: Scenario.all) func scenario(_ scenario: Scenario) throws {
        let flags = scenario.value["broker"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let broker = try BrokerUnderTest(flags)
        defer { broker.child.stop() }
        try ScenarioPlayer(scenario, socket: broker.socket).run()
    }
}
