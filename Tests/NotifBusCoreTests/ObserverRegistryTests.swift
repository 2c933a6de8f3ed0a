import NotifBusProtocol
import Testing

// ObserverRegistry on its own: chain order (priority, then subscription), unique keys
// (the newest holder wins), removal, chains handed out as copies, and a chain looked up
// again following every change.
@testable import NotifBusCore

struct ObserverRegistryTests {
    @Test func chainsArePriorityThenSubscriptionOrder() {
        var r = ObserverRegistry()
        let a = r.add(client: 1, events: ["e", "f"], priority: 100, key: nil).id
        let b = r.add(client: 2, events: ["e"], priority: 10, key: nil).id
        let c = r.add(client: 3, events: ["e"], priority: 100, key: nil).id
        let d = r.add(client: 3, events: ["e"], priority: -5, key: nil).id
        #expect(r.chain(for: "e") == [d, b, a, c])
        #expect(r.chain(for: "f") == [a])
        #expect(r.chain(for: "none") == [])
        #expect(r.count == 4)
    }

    @Test func aChainLookedUpAgainFollowsEveryChange() {
        var r = ObserverRegistry()
        #expect(r.chain(for: "e") == [])
        let a = r.add(client: 1, events: ["e"], priority: 100, key: nil).id
        #expect(r.chain(for: "e") == [a], "a subscription after a lookup of the same name")
        #expect(r.chain(for: "e") == [a])
        let b = r.add(client: 2, events: ["e"], priority: 1, key: nil).id
        #expect(r.chain(for: "e") == [b, a])
        _ = r.remove(b)
        #expect(r.chain(for: "e") == [a])
        _ = r.add(client: 3, events: ["f"], priority: 1, key: nil)
        #expect(r.chain(for: "f").count == 1 && r.chain(for: "e") == [a])
        _ = r.remove(a)
        #expect(r.chain(for: "e") == [])
    }

    @Test func aKeyHasOneHolderAndTheNewestWins() {
        var r = ObserverRegistry()
        let first = r.add(client: 1, events: ["e"], priority: 100, key: "k")
        #expect(first.replaced == nil && r.holder(ofKey: "k") == first.id)
        let second = r.add(client: 2, events: ["f"], priority: 100, key: "k")
        #expect(second.replaced?.id == first.id && second.replaced?.client == 1)
        #expect(r.holder(ofKey: "k") == second.id)
        #expect(r[first.id] == nil && r.chain(for: "e") == [])
        #expect(r.chain(for: "f") == [second.id])
    }

    @Test func removalLeavesNoTrace() {
        var r = ObserverRegistry()
        let id = r.add(client: 1, events: ["e", "f"], priority: 1, key: "k").id
        #expect(r.find("o\(id)") == id)
        #expect(r.remove(id)?.events == ["e", "f"])
        #expect(r.remove(id) == nil)
        #expect(r.find("o\(id)") == nil && r.holder(ofKey: "k") == nil)
        #expect(r.chain(for: "e") == [] && r.chain(for: "f") == [] && r.count == 0)
        #expect(r.find("h1") == nil && r.find("oX") == nil && r.find("") == nil)
    }

    /// An event walking a chain keeps the chain it started with.
    @Test func aChainHandedOutIsACopy() {
        var r = ObserverRegistry()
        let a = r.add(client: 1, events: ["e"], priority: 1, key: nil).id
        let walked = r.chain(for: "e")
        _ = r.add(client: 1, events: ["e"], priority: 0, key: nil)
        _ = r.remove(a)
        #expect(walked == [a])
    }
}
