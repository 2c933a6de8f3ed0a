// The multi-connection scenarios of Protocol/vectors/scenarios/ as loaded from their files,
// shared by the player that runs them against the built broker (IntegrationTests) and the
// one that runs them against the core (NotifBusCoreTests). It reads files only; playing the
// steps is each player's own.
import Foundation
import NotifBusProtocol
import Testing

/// One scenario as loaded from its file.
public struct Scenario: Sendable, CustomTestStringConvertible {
    public let name: String
    public let value: JSONValue
    public var testDescription: String { name }

    public init(name: String, value: JSONValue) {
        self.name = name
        self.value = value
    }

    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Protocol/vectors/scenarios").standardized

    /// Every scenario of every file, files in name order; a file holds one object or a list.
    /// A file that cannot be read or parsed stands as a scenario named `unreadable FILE`.
    public static let all: [Scenario] = {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return files.filter { $0.hasSuffix(".json") }.sorted().flatMap { file -> [Scenario] in
            guard let data = try? Data(contentsOf: folder.appendingPathComponent(file)),
                let root = try? JSONValue(parsing: Array(data))
            else { return [Scenario(name: "unreadable \(file)", value: .null)] }
            return (root.arrayValue ?? [root]).map { Scenario(name: $0["name"]?.stringValue ?? file, value: $0) }
        }
    }()

    /// What is wrong with `all`, or nothing: fewer than 12 scenarios (a floor below the
    /// folder's count, so that a lost or emptied folder is noticed), a name used twice, a
    /// file that could not be read.
    public static var problems: [String] {
        let names = all.map(\.name)
        var problems: [String] = []
        if names.count < 12 { problems.append("only \(names.count) scenarios in \(folder.path)") }
        var seen: Set<String> = []
        for name in names where !seen.insert(name).inserted { problems.append("\(name) is used twice") }
        problems += names.filter { $0.hasPrefix("unreadable") }
        return problems
    }
}

/// Why a scenario failed, or could not be played.
public struct ScenarioFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
