// Plays Protocol/vectors/scenarios/ against the broker core through CoreHarness: no sockets,
// no sleeps, the fake clock driving every wait and timeout a millisecond at a time. Each
// expected frame is checked as the file says, and every frame the core sends must be expected.
import NotifBusCore
import NotifBusProtocol
import TestSupport
import Testing

/// Runs one scenario's steps on connections of a CoreHarness.
struct CoreScenarioPlayer {
    static let defaultTimeoutMs: Int64 = 2000

    let scenario: Scenario
    var harness: CoreHarness
    private var connections: [String: ConnectionID] = [:]
    private var frames: ScenarioMatcher
    /// Connections the scenario closed itself.
    private var closedByPeer: Set<ConnectionID> = []

    init(_ scenario: Scenario) throws {
        self.scenario = scenario
        frames = ScenarioMatcher(scenario: scenario.name)
        let flags = scenario.value["broker"]?.arrayValue?.compactMap(\.stringValue) ?? []
        var problem: String? = nil
        // The scenarios run against `notifbus broker` with the contract's defaults and no
        // --state-dir: start from those, not from the harness's test settings.
        harness = CoreHarness { configuration in
            configuration = BrokerConfiguration()
            configuration.brokerUID = 1000
            do {
                try CoreScenarioPlayer.apply(flags, to: &configuration)
            } catch {
                problem = "\(error)"
            }
        }
        if let problem { throw ScenarioFailure("\(scenario.name): \(problem)") }
    }

    /// The broker flags scenarios use, as `notifbus broker` reads them.
    static func apply(_ flags: [String], to configuration: inout BrokerConfiguration) throws {
        var i = 0
        func value() throws -> String {
            guard i + 1 < flags.count else { throw ScenarioFailure("\(flags[i]) needs a value") }
            i += 1
            return flags[i]
        }
        func integer() throws -> Int {
            let text = try value()
            guard let n = Int(text), n >= 0 else { throw ScenarioFailure("not a count: \(text)") }
            return n
        }
        func milliseconds() throws -> Int64 {
            let text = try value()
            for (suffix, factor) in [("ms", Int64(1)), ("s", 1000), ("m", 60_000)] where text.hasSuffix(suffix) {
                if let n = Int64(text.dropLast(suffix.count)), n > 0 { return n * factor }
            }
            throw ScenarioFailure("not a duration: \(text)")
        }
        while i < flags.count {
            switch flags[i] {
            case "--hop-timeout": configuration.hopTimeoutMs = try milliseconds()
            case "--call-timeout": configuration.callTimeoutMs = try milliseconds()
            case "--max-queue": configuration.maxQueue = try integer()
            case "--max-queue-per-client": configuration.maxQueuePerClient = try integer()
            default: throw ScenarioFailure("the core player does not know the broker flag \(flags[i])")
            }
            i += 1
        }
    }

    func fail(_ index: Int, _ step: JSONValue, _ why: String) -> ScenarioFailure {
        ScenarioFailure("\(scenario.name): step \(index) \(step.text): \(why)")
    }

    func connection(_ name: String?) throws -> ConnectionID {
        guard let name, let c = connections[name] else { throw ScenarioFailure("\(scenario.name): no connection \(name ?? "?")") }
        return c
    }

    func brokerClosed(_ c: ConnectionID) -> Bool { harness.closed.contains(c) }

    /// Connects in the listed order, each hello answered before the next connect.
    mutating func connectAll() throws {
        let greetAll = scenario.value["hello"]?.boolValue ?? true
        for entry in scenario.value["connections"]?.arrayValue ?? [] {
            let name = entry.stringValue ?? entry["name"]?.stringValue ?? ""
            let c = harness.connect(greet: false)
            connections[name] = c
            guard greetAll, entry["hello"]?.boolValue ?? true else { continue }
            harness.send(c, ScenarioMatcher.hello(name).text)
            let replies = harness.takeAll(c)
            guard replies.count == 1, try frames.matches(ScenarioMatcher.helloReply, replies[0], subset: false),
                let id = replies[0]["result"]?["client"]?.stringValue
            else {
                throw ScenarioFailure("\(scenario.name): hello of \(name) got \(replies.map(\.text))")
            }
            frames.clientIDs[name] = id
        }
    }

    mutating func run() throws {
        try connectAll()
        for (index, step) in (scenario.value["steps"]?.arrayValue ?? []).enumerated() {
            try play(index, step)
        }
        // Without sockets nothing races: the scenario accounts for every frame the core sent.
        if !harness.sent.isEmpty {
            throw ScenarioFailure("\(scenario.name): frames no step read: \(harness.sent.map(\.description).joined(separator: "; "))")
        }
    }

    /// Lets `ms` milliseconds pass on the fake clock, one at a time, stopping early once
    /// `until` holds; returns whether it did.
    mutating func wait(ms: Int64, until: (CoreHarness) -> Bool = { _ in false }) -> Bool {
        if until(harness) { return true }
        for _ in 0..<max(ms, 0) {
            harness.advance(ms: 1)
            if until(harness) { return true }
        }
        return false
    }

    mutating func play(_ index: Int, _ step: JSONValue) throws {
        let timeout = step["timeout"]?.intValue ?? Self.defaultTimeoutMs
        if let name = step["send"]?.stringValue {
            let c = try connection(name)
            guard !brokerClosed(c), !closedByPeer.contains(c) else { throw fail(index, step, "the connection is closed") }
            harness.send(c, try frames.substitute(step["frame"] ?? .null).text)
        } else if let name = step["expect"]?.stringValue {
            let c = try connection(name)
            guard wait(ms: timeout, until: { !$0.nothingSent(to: c) || $0.closed.contains(c) }), !harness.nothingSent(to: c) else {
                throw fail(index, step, brokerClosed(c) ? "the broker closed the connection" : "got no frame within \(timeout) ms")
            }
            let got = harness.take(c).frame
            let subset = step["match"]?.stringValue == "subset"
            guard try frames.matches(step["frame"] ?? .null, got, subset: subset) else { throw fail(index, step, "got \(got.text)") }
        } else if let name = step["expectNothing"]?.stringValue {
            let c = try connection(name)
            _ = wait(ms: step["within"]?.intValue ?? 0)
            if let got = harness.takeAll(c).first { throw fail(index, step, "got \(got.text)") }
            if brokerClosed(c) { throw fail(index, step, "the connection was closed") }
        } else if let name = step["expectClosed"]?.stringValue {
            let c = try connection(name)
            _ = wait(ms: timeout, until: { !$0.nothingSent(to: c) || $0.closed.contains(c) })
            if let got = harness.takeAll(c).first { throw fail(index, step, "expected end of stream, got \(got.text)") }
            guard brokerClosed(c) else { throw fail(index, step, "still open after \(timeout) ms") }
        } else if let name = step["close"]?.stringValue {
            let c = try connection(name)
            closedByPeer.insert(c)
            harness.disconnect(c)
        } else if let ms = step["sleep"]?.intValue {
            _ = wait(ms: ms)
        } else {
            throw fail(index, step, "unknown step")
        }
    }
}

@Suite struct ScenarioCoreTests {
    @Test func scenariosArePresent() {
        #expect(Scenario.problems == [])
    }

    @Test(arguments: Scenario.all) func scenario(_ scenario: Scenario) throws {
        var player = try CoreScenarioPlayer(scenario)
        try player.run()
    }

    /// The player fails where the core does not do what a scenario says: a wrong frame, a
    /// frame that never comes, a frame where nothing may come, a frame no step reads.
    @Test func playerRejectsWhatTheCoreDoesNot() throws {
        func play(_ steps: [JSONValue]) throws {
            let value: JSONValue = ["name": "player self-check", "connections": ["a"], "steps": .array(steps)]
            var player = try CoreScenarioPlayer(Scenario(name: "player self-check", value: value))
            try player.run()
        }
        let ping: JSONValue = ["send": "a", "frame": ["op": "ping", "id": 1]]
        try play([ping, ["expect": "a", "frame": ["op": "reply", "id": 1, "result": [:]]]])
        #expect(throws: ScenarioFailure.self) { try play([ping, ["expect": "a", "frame": ["op": "reply", "id": 2, "result": [:]]]]) }
        #expect(throws: ScenarioFailure.self) { try play([["expect": "a", "frame": "$any", "timeout": 50]]) }
        #expect(throws: ScenarioFailure.self) { try play([ping, ["expectNothing": "a", "within": 10]]) }
        #expect(throws: ScenarioFailure.self) { try play([ping]) }
        #expect(throws: ScenarioFailure.self) { try play([["expectClosed": "a", "timeout": 50]]) }
        #expect(throws: ScenarioFailure.self) {
            try CoreScenarioPlayer(Scenario(name: "unknown flag", value: ["broker": ["--state-dir", "/x"], "steps": []]))
        }
    }
}
