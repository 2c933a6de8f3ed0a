// The Swift client's conveniences against a live broker: Codable values through JSONValue
// (put and take, a post's payload and result), waiting for a connection to close, the
// hello bound by the request timeout, and a refusal thrown with the broker's code.
import Foundation
import Glibc
import NotifBusClient
import Testing

@Suite(.timeLimit(.minutes(2))) struct ClientConveniencesTests {
    struct Launch: Codable, Equatable {
        struct Item: Codable, Equatable { var id: Int64; var tags: [String] }
        var emailId: String
        var unread: Int
        var score: Double
        var pinned: Bool
        var folder: String?
        var items: [Item]
        var extra: [String: Int]
    }

    @Test func codableValuesRoundTripThroughSlotsAndPosts() async throws {
        let broker = try BrokerUnderTest()
        let bus = try await NotifBusConnection.connect(socket: broker.socket, name: "codable")
        defer { bus.close() }
        let launch = Launch(
            emailId: "e-1", unread: 3, score: 0.5, pinned: true, folder: nil,
            items: [.init(id: 7, tags: ["a", "b"])], extra: ["k": 1])
        let encoded = try JSONValue(encoding: launch)
        #expect(encoded["emailId"] == "e-1" && encoded["folder"] == nil && encoded["items"]?.arrayValue?.first?["tags"] == ["a", "b"])
        try await bus.put("launch", encoded)
        let taken = try await bus.take("launch")
        #expect(try taken?.decode(Launch.self) == launch)

        try await bus.addObserver(events: ["codable"], priority: 1) { event in
            guard let item = try? event.payload.decode(Launch.Item.self) else { return .next }
            return .complete(try? JSONValue(encoding: Launch.Item(id: item.id + 1, tags: item.tags.reversed())))
        }
        let result = try await bus.post("codable", payload: try JSONValue(encoding: Launch.Item(id: 1, tags: ["x", "y"])))
        #expect(try result.value.decode(Launch.Item.self) == Launch.Item(id: 2, tags: ["y", "x"]))
    }

    @Test func decodingErrorsNameThePath() throws {
        let json: JSONValue = ["id": 1, "tags": ["a", 2]]
        do {
            _ = try json.decode(Launch.Item.self)
            Issue.record("decoded a number as a string")
        } catch let DecodingError.typeMismatch(_, context) {
            #expect(context.codingPath.map(\.stringValue) == ["tags", "1"])
        }
        #expect(throws: DecodingError.self) { _ = try (["tags": []] as JSONValue).decode(Launch.Item.self) }
        #expect(throws: EncodingError.self) { _ = try JSONValue(encoding: Double.nan) }
        #expect(throws: EncodingError.self) { _ = try JSONValue(encoding: UInt64.max) }
        #expect(try JSONValue(encoding: [1, 2]) == [1, 2])
        #expect(try (3.0 as JSONValue).decode(Int.self) == 3)
    }

    @Test func waitForCloseReturnsWhenTheConnectionEnds() async throws {
        let broker = try BrokerUnderTest()
        let bus = try await NotifBusConnection.connect(socket: broker.socket)
        let waiter = Task { await bus.waitForClose() }
        try await Task.sleep(for: .milliseconds(100))
        broker.child.signal(SIGTERM)
        let reason = await waiter.value
        #expect(!bus.isOpen)
        #expect(!reason.isEmpty)
        // Once closed, it returns at once.
        #expect(await bus.waitForClose() == reason)

        let other = try BrokerUnderTest()
        let closing = try await NotifBusConnection.connect(socket: other.socket)
        closing.close()
        #expect(await closing.waitForClose() == "closed by this client")
    }

    @Test func helloIsBoundByTheRequestTimeout() async throws {
        let folder = TempFolder()
        let listener = try MuteListener(folder.path + "/mute")
        do {
            _ = try await NotifBusConnection.connect(socket: listener.path, requestTimeout: .milliseconds(300))
            Issue.record("a mute socket greeted")
        } catch {
            // The bound it names is the request timeout, not a fixed one.
            guard case .timedOut(let what) = error else { throw error }
            #expect(what == "no reply to 'hello' within 300 ms", "\(what)")
        }
        withExtendedLifetime(listener) {}
    }

    @Test func aRefusalIsThrownWithTheBrokersCode() async throws {
        let broker = try BrokerUnderTest(["--max-clients", "1"])
        var first: NotifBusConnection? = nil
        for _ in 0..<100 where first == nil {
            first = try? await NotifBusConnection.connect(socket: broker.socket)
            if first == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let held = try #require(first)
        defer { held.close() }
        do {
            _ = try await NotifBusConnection.connect(socket: broker.socket)
            Issue.record("a second client was admitted")
        } catch {
            #expect(error.code == "too_many_clients", "\(error)")
        }
    }
}
