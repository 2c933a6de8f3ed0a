import NotifBusProtocol
import Testing

// The one map from the broker's errors to wire codes: each error's code, and that exactly
// the refusals of a connection itself close it (by `ErrorCode.closesConnection`).
@testable import NotifBusCore

struct BrokerErrorTests {
    static let all: [BrokerError] = [
        .session(.forbidden(uid: 7)), .session(.tooManyClients(max: 2)), .session(.helloRequired),
        .session(.helloTimedOut(ms: 10)), .session(.alreadyGreeted), .session(.unsupportedProtocol(2)),
        .session(.frameOutOfRange(length: 0, max: 9)), .session(.shuttingDown),
        .session(.overBudget(held: 2, limit: 1)),
        .chain(.tooManyObservers), .chain(.keyHeld(key: "k", by: 1)), .chain(.noSuchObserver), .chain(.queueFull(max: 1)),
        .chain(.connectionQueueFull(waiting: 1, share: 1)), .chain(.queueBytesFull(max: 1)),
        .chain(.connectionQueueBytesFull(max: 1)), .chain(.invalidCompletion),
        .channel(.tooManyHandlers), .channel(.routeHeld(channel: "c", method: nil, by: 2)), .channel(.noSuchHandler),
        .channel(.tooManyCalls(max: 1)), .channel(.noHandler(channel: "c", method: "m")), .channel(.handlerGone),
        .channel(.timedOut(ms: 5)),
        .slot(.tooManySlots(max: 1)), .slot(.tooManyBytes(max: 1)), .slot(.tooManyTakes(max: 1)),
        .category(.userTextWithoutTextInput), .category(.unknownAction(action: "a", category: "c")),
        .storageFailed, .badJSON("x"), .rejected(.unknownOp, "y"),
    ]

    @Test func eachErrorHasItsCode() {
        let codes = BrokerErrorTests.all.map(\.code.rawValue)
        #expect(
            codes == [
                "forbidden", "too_many_clients", "hello_required", "hello_required", "bad_request", "unsupported_protocol",
                "frame_too_large", "shutting_down", "overloaded",
                "bad_request", "superseded", "not_found", "queue_full", "queue_full", "queue_full", "queue_full", "bad_request",
                "bad_request", "superseded", "not_found", "bad_request", "not_implemented", "handler_gone", "timeout",
                "bad_request", "bad_request", "bad_request", "invalid_action", "invalid_action", "storage_failed", "bad_json", "unknown_op",
            ])
    }

    @Test func onlyRefusalsOfTheConnectionItselfClose() {
        let closing = BrokerErrorTests.all.filter(\.code.closesConnection)
        #expect(
            closing == [
                .session(.forbidden(uid: 7)), .session(.tooManyClients(max: 2)), .session(.helloRequired),
                .session(.helloTimedOut(ms: 10)), .session(.unsupportedProtocol(2)),
                .session(.frameOutOfRange(length: 0, max: 9)), .session(.overBudget(held: 2, limit: 1)),
            ])
    }

    @Test func heldKeysAndRoutesNameTheirHolder() {
        let key = BrokerError.chain(.keyHeld(key: "k", by: 4)).frame(.integer(1)).encoded()
        #expect(
            String(decoding: key[4...], as: UTF8.self)
                == #"{"op":"reply","id":1,"error":{"code":"superseded","message":"key 'k' is held by o4, registered since; the resumed registration yields","details":{"by":"o4"}}}"#
        )
        let route = BrokerError.channel(.routeHeld(channel: "c", method: "m", by: 2)).frame(.integer(1)).encoded()
        #expect(String(decoding: route[4...], as: UTF8.self).contains(#""message":"route 'c' method 'm' is held by h2"#))
    }
}
