// ErrorCode against Protocol/errors.json, the one table of the broker's error codes: the
// same codes, and closesConnection agreeing with the table's `closes` for every one.
import Foundation
import NotifBusProtocol
import Testing

struct ErrorTableEntry {
    let code: String
    let closes: Bool
}

enum ErrorTable {
    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Protocol/errors.json").standardized

    static func load() throws -> [ErrorTableEntry] {
        let root = try JSONValue(parsing: Array(try Data(contentsOf: file)))
        guard let codes = root["codes"]?.arrayValue else { throw VectorError("errors.json: no 'codes' list") }
        return try codes.map { entry in
            guard let code = entry["code"]?.stringValue, let closes = entry["closes"]?.boolValue else {
                throw VectorError("errors.json: malformed entry \(entry)")
            }
            return ErrorTableEntry(code: code, closes: closes)
        }
    }
}

@Suite struct ErrorTableTests {
    @Test func everyCodeOfTheTableIsAnErrorCodeAndNoOther() throws {
        let table = try ErrorTable.load()
        let codes = table.map(\.code)
        #expect(Set(codes).count == codes.count, "a code is listed twice in errors.json")
        #expect(Set(codes) == Set(ErrorCode.allCases.map(\.rawValue)))
    }

    @Test func closesConnectionAgreesWithTheTable() throws {
        let table = try ErrorTable.load()
        for entry in table {
            let code = try #require(ErrorCode(rawValue: entry.code), "\(entry.code) is not an ErrorCode")
            #expect(
                code.closesConnection == entry.closes, "\(entry.code): closesConnection is \(code.closesConnection), the table says \(entry.closes)")
        }
    }
}
