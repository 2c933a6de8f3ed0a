import NotifBusProtocol
import Testing

// ChannelRouter on its own, with a fake clock: method routes before whole channels,
// the latest registration wins (also over a route just looked up), returns only from the
// handler, calls expiring in order, a handler's calls found when its connection goes.
@testable import NotifBusCore

struct ChannelRouterTests {
    @Test func aMethodRouteBeatsTheWholeChannel() {
        var r = ChannelRouter()
        let whole = r.register(HandlerKey(channel: "c", method: nil), client: 1).id
        let specific = r.register(HandlerKey(channel: "c", method: "m"), client: 2).id
        #expect(r.route(channel: "c", method: "m")?.id == specific)
        #expect(r.route(channel: "c", method: "other")?.id == whole)
        #expect(r.route(channel: "d", method: "m") == nil)
        _ = r.remove(specific)
        #expect(r.route(channel: "c", method: "m")?.id == whole)
    }

    @Test func theLatestRegistrationWins() {
        var r = ChannelRouter()
        let key = HandlerKey(channel: "c", method: "m")
        let old = r.register(key, client: 1)
        let new = r.register(key, client: 2)
        #expect(new.replaced?.id == old.id && r.holder(of: key) == new.id)
        #expect(r.find("h\(old.id)") == nil && r.find("h\(new.id)") == new.id)
        #expect(r.handlers.count == 1)
    }

    @Test func onlyTheHandlersConnectionReturnsACall() {
        var r = ChannelRouter()
        let call = r.startCall(PendingCall(invoker: 1, requestID: .integer(5), handlerClient: 2), deadline: 100)
        #expect(r.returnCall(call, from: 3) == nil)
        #expect(r.returnCall(call, from: 2)?.requestID == .integer(5))
        #expect(r.returnCall(call, from: 2) == nil)
    }

    @Test func callsExpireInOrderAndReturnedOnesAreSkipped() {
        var r = ChannelRouter()
        let a = r.startCall(PendingCall(invoker: 1, requestID: .integer(1), handlerClient: 2), deadline: 100)
        let b = r.startCall(PendingCall(invoker: 1, requestID: .integer(2), handlerClient: 2), deadline: 200)
        let c = r.startCall(PendingCall(invoker: 1, requestID: .integer(3), handlerClient: 2), deadline: 300)
        _ = r.returnCall(a, from: 2)
        #expect(r.nextCallDeadline == 100)
        #expect(r.popExpiredCall(now: 99) == nil)
        #expect(r.popExpiredCall(now: 250)?.id == b)
        #expect(r.popExpiredCall(now: 250) == nil)
        #expect(r.removeAllCalls().map(\.requestID) == [.integer(3)])
        #expect(r.removeCall(c) == nil && r.nextCallDeadline == nil)
    }

    @Test func aRouteLookedUpFollowsEveryChangeOfTheRoutes() {
        var r = ChannelRouter()
        #expect(r.route(channel: "c", method: "m") == nil)
        let whole = r.register(HandlerKey(channel: "c", method: nil), client: 1).id
        #expect(r.route(channel: "c", method: "m")?.id == whole)
        let specific = r.register(HandlerKey(channel: "c", method: "m"), client: 2).id
        #expect(r.route(channel: "c", method: "m")?.id == specific)
        #expect(r.route(channel: "c", method: "n")?.id == whole)
        _ = r.remove(whole)
        #expect(r.route(channel: "c", method: "n") == nil)
        #expect(r.route(channel: "c", method: "m")?.id == specific)
    }

    @Test func aHandlersCallsAreFoundInCreationOrder() {
        var r = ChannelRouter()
        let a = r.startCall(PendingCall(invoker: 1, requestID: .integer(1), handlerClient: 2), deadline: 100)
        _ = r.startCall(PendingCall(invoker: 1, requestID: .integer(2), handlerClient: 3), deadline: 100)
        let c = r.startCall(PendingCall(invoker: 4, requestID: .integer(3), handlerClient: 2), deadline: 100)
        #expect(r.removeCalls(servedBy: 2).map(\.requestID) == [.integer(1), .integer(3)])
        #expect(r.removeCall(a) == nil && r.removeCall(c) == nil)
        #expect(r.removeAllCalls().map(\.requestID) == [.integer(2)])
    }
}
