import NotifBusProtocol
import TestSupport
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
        #expect(r.nextCallDeadline == 200)
        #expect(r.popExpiredCall(now: 199) == nil)
        #expect(r.popExpiredCall(now: 250)?.id == b)
        #expect(r.popExpiredCall(now: 250) == nil)
        #expect(r.nextCallDeadline == 300)
        #expect(r.removeAllCalls().map(\.requestID) == [.integer(3)])
        #expect(r.returnCall(c, from: 2) == nil && r.nextCallDeadline == nil)
    }

    /// The next deadline is always the oldest call in flight's, however the calls before it
    /// ended (returned, timed out, or in any order), and nothing is kept of calls that ended.
    @Test func theNextDeadlineIsTheOldestCallInFlights() {
        var r = ChannelRouter()
        for n in 1...1_000 {
            let call = r.startCall(PendingCall(invoker: 1, requestID: .integer(Int64(n)), handlerClient: 2), deadline: Instant(n))
            #expect(r.nextCallDeadline == Instant(n))
            #expect(r.returnCall(call, from: 2) != nil)
            #expect(r.nextCallDeadline == nil)
        }
        let slow = r.startCall(PendingCall(invoker: 1, requestID: .integer(0), handlerClient: 3), deadline: 20_000)
        var later: [Int64] = []
        for n in 1...6_000 {
            later.append(r.startCall(PendingCall(invoker: 1, requestID: .integer(Int64(n)), handlerClient: 2), deadline: 20_000 + Instant(n)))
        }
        // All but the last ten of the later calls end, newest first, while the slow one stays.
        // (More ended ids than a search walks one by one: it starts from the table's oldest.)
        for call in later.dropLast(10).reversed() { #expect(r.returnCall(call, from: 2) != nil) }
        #expect(r.nextCallDeadline == 20_000)
        #expect(r.returnCall(slow, from: 3) != nil)
        #expect(r.nextCallDeadline == 25_991)
        #expect(r.popExpiredCall(now: 25_992)?.id == later[5_990])
        #expect(r.popExpiredCall(now: 25_992)?.id == later[5_991])
        #expect(r.popExpiredCall(now: 25_992) == nil)
        #expect(r.nextCallDeadline == 25_993)
        #expect(r.removeCalls(servedBy: 2).count == 8)
        #expect(r.nextCallDeadline == nil && r.popExpiredCall(now: .max) == nil)
    }

    /// Random starts, returns, expiries and handlers leaving, checked after each step against
    /// the calls a plain dictionary says are in flight: the next deadline is always the
    /// earliest of theirs.
    /// Seeded: a failure names its seed (Swift Testing prints a failing case's arguments).
    @Test(arguments: UInt64(1)...20) func theNextDeadlineFollowsAnyMixOfCallsEnding(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        do {
            var r = ChannelRouter()
            var live: [Int64: (deadline: Instant, handler: ConnectionID)] = [:]
            var now: Instant = 0
            for _ in 0..<2_000 {
                switch Int.random(in: 0..<10, using: &rng) {
                case 0...3:
                    let handler = Int.random(in: 1...3, using: &rng)
                    let deadline = now + 100
                    let id = r.startCall(PendingCall(invoker: 9, requestID: .integer(0), handlerClient: handler), deadline: deadline)
                    live[id] = (deadline, handler)
                case 4...6:
                    guard let id = live.keys.randomElement(using: &rng) else { break }
                    #expect(r.returnCall(id, from: live[id]!.handler) != nil)
                    live[id] = nil
                case 7:
                    now += UInt64.random(in: 0...60, using: &rng)
                    while let (id, _) = r.popExpiredCall(now: now) {
                        #expect(live[id].map { $0.deadline <= now } == true)
                        live[id] = nil
                    }
                    #expect(!live.values.contains { $0.deadline <= now })
                case 8:
                    let handler = Int.random(in: 1...3, using: &rng)
                    #expect(r.removeCalls(servedBy: handler).count == live.values.filter { $0.handler == handler }.count)
                    live = live.filter { $0.value.handler != handler }
                default:
                    now += 1
                }
                #expect(r.nextCallDeadline == live.values.map(\.deadline).min())
            }
        }
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
        #expect(r.returnCall(a, from: 2) == nil && r.returnCall(c, from: 2) == nil)
        #expect(r.nextCallDeadline == 100)
        #expect(r.removeAllCalls().map(\.requestID) == [.integer(2)])
    }
}

extension ChannelRouter {
    /// `route` for names given as text.
    mutating func route(channel: String, method: String) -> Route? {
        route(channel: JSONName(channel), method: JSONName(method))
    }
}
