// How a scenario's expected frames are compared with the frames a broker sent: the
// placeholders ("$any", "$client:NAME") and the two ways to match (exact, or subset). It
// judges values only; reading them off a socket or out of the core is each player's part.
import NotifBusProtocol

/// Fills in and matches one scenario's expected frames, knowing each connection's client id
/// once its hello was answered.
public struct ScenarioMatcher {
    /// The scenario's name, for failures.
    public let scenario: String
    /// The client id the broker gave each connection, by the scenario's name for it.
    public var clientIDs: [String: String] = [:]

    public init(scenario: String) {
        self.scenario = scenario
    }

    /// Replaces every "$client:NAME" with that connection's client id.
    public func substitute(_ value: JSONValue) throws -> JSONValue {
        switch value {
        case .string(let s) where s.hasPrefix("$client:"):
            guard let id = clientIDs[String(s.dropFirst("$client:".count))] else {
                throw ScenarioFailure("\(scenario): no client id for \(s)")
            }
            return .string(id)
        case .array(let items): return .array(try items.map(substitute))
        case .object(let members): return .object(try members.mapValues(substitute))
        default: return value
        }
    }

    /// Whether `actual` fits `expected`: "$any" fits any value; `subset` skips unlisted keys.
    public func matches(_ expected: JSONValue, _ actual: JSONValue, subset: Bool) throws -> Bool {
        switch expected {
        case .string("$any"):
            return true
        case .object(let want):
            guard case .object(let got) = actual else { return false }
            if !subset && Set(want.keys) != Set(got.keys) { return false }
            for (key, value) in want {
                guard let other = got[key], try matches(value, other, subset: subset) else { return false }
            }
            return true
        case .array(let want):
            guard case .array(let got) = actual, got.count == want.count else { return false }
            for (e, a) in zip(want, got) where try !matches(e, a, subset: subset) { return false }
            return true
        default:
            return try substitute(expected) == actual
        }
    }

    /// The reply a hello must get in a scenario: the protocol spoken, anything for the rest.
    public static let helloReply: JSONValue = [
        "op": "reply", "id": "hello", "result": ["protocol": 1, "server": "$any", "client": "$any", "maxFrame": "$any"],
    ]

    /// The hello a scenario's connection `name` sends.
    public static func hello(_ name: String) -> JSONValue {
        ["op": "hello", "id": "hello", "protocol": 1, "name": .string(name)]
    }
}
