// ConnectionSession alone, with no socket, thread or clock: request ids, replies matched to
// requests, the deadline the timer is armed for, a lost connection failing every pending
// request once, frames for an older socket going nowhere, and what keeps a lost connection
// reconnecting. Deadlines are made-up instants; the random walk replays from its seed.
import Dispatch
import NotifBusProtocol
import TestSupport
import Testing

@testable import NotifBusClient

/// The made-up instant `ms` milliseconds into a test.
private func at(_ ms: UInt64) -> DispatchTime { DispatchTime(uptimeNanoseconds: 1_000_000_000 + ms * 1_000_000) }

/// A request due at `deadline`, named by `name` (its timeout message) so that tests can tell
/// which request came back.
private func request(_ name: String, due deadline: DispatchTime) -> NotifBusConnection.PendingRequest {
    NotifBusConnection.PendingRequest(completion: { _ in }, deadline: deadline, timeoutMessage: name)
}

private let lost = "the broker closed the connection"

@Suite struct ConnectionSessionTests {
    /// Ids count up from 1 and go on counting on a new socket, so that a late reply from an
    /// older one finds no request.
    @Test func requestIDsAreNeverReused() {
        var session = ConnectionSession(socket: 5)
        session.configureReconnection(policy: .always, resendKeyed: true)
        #expect((0..<3).map { _ in session.newRequestID() } == [1, 2, 3])
        #expect(session.readerEnded(socket: 5, generation: session.generation, reason: lost)!.next == .reconnect)
        #expect(session.adopt(socket: 6) == 1)
        #expect(session.newRequestID() == 4)
    }

    /// A reader thread that cannot start closes the connection, and a reason given before
    /// stays the reason (`closedReason`, once set, stays set).
    @Test func aReaderThatCannotStartKeepsAnEarlierReason() {
        var fresh = ConnectionSession(socket: 5)
        fresh.readerCouldNotStart()
        #expect(fresh.closedReason == "cannot start the reader thread")
        #expect(!fresh.isOpen)
        var closed = ConnectionSession(socket: 5)
        _ = closed.closedByClient()
        closed.readerCouldNotStart()
        #expect(closed.closedReason == "closed by this client")
    }

    /// A task waiting for the course to change is woken by the change, once, and a waiter
    /// whose bound passed first is no longer there to wake.
    @Test func aChangeOfCourseWakesItsWaitersOnce() async {
        var session = ConnectionSession(socket: 5)
        session.configureReconnection(policy: .always, resendKeyed: true)
        var woken = 0
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            session.addChangeWaiter(session.newChangeWaiterKey(), waiter)
            let late = session.newChangeWaiterKey()
            session.addChangeWaiter(late, waiter)
            #expect(session.removeChangeWaiter(late) != nil)
            #expect(session.woken.isEmpty)
            _ = session.readerEnded(socket: 5, generation: session.generation, reason: lost)
            let waking = session.takeWoken()
            _ = session.adopt(socket: 6)
            #expect(session.takeWoken().isEmpty)
            woken = waking.count
            waking.first?.resume()
        }
        #expect(woken == 1)
    }

    /// A reply takes its own request out, once; a reply for no pending request finds nothing.
    @Test func aReplyTakesItsRequestOnce() {
        var session = ConnectionSession(socket: 5)
        _ = session.register(request("one", due: at(100)), id: 1)
        _ = session.register(request("two", due: at(100)), id: 2)
        #expect(session.takeRequest(2)?.timeoutMessage == "two")
        #expect(session.takeRequest(2) == nil)
        #expect(session.takeRequest(9) == nil)
        #expect(Array(session.pending.keys) == [1])
    }

    /// The timer is armed only for a deadline earlier than the armed one; a reply leaves it
    /// armed; when it fires it fails what is due, earliest first, and is armed for what is left.
    @Test func theTimerFollowsTheEarliestDeadline() {
        var session = ConnectionSession(socket: 5)
        #expect(session.register(request("a", due: at(100)), id: 1) == at(100))
        #expect(session.register(request("b", due: at(200)), id: 2) == nil)
        #expect(session.register(request("c", due: at(100)), id: 3) == nil)
        #expect(session.register(request("d", due: at(50)), id: 4) == at(50))
        #expect(session.timerArmings == 2 && session.armedDeadline == at(50))

        // "d" is answered: the timer stays armed for it, and finds nothing due.
        #expect(session.takeRequest(4) != nil)
        #expect(session.armedDeadline == at(50))
        var fired = session.expire(now: at(50))
        #expect(fired.due.isEmpty && fired.rearm == at(100) && session.timerArmings == 3)

        fired = session.expire(now: at(150))
        #expect(fired.due.map(\.timeoutMessage) == ["a", "c"] && fired.rearm == at(200))
        fired = session.expire(now: at(250))
        #expect(fired.due.map(\.timeoutMessage) == ["b"] && fired.rearm == nil)
        #expect(session.armedDeadline == nil && session.pending.isEmpty && session.timerArmings == 4)
    }

    /// The socket's end fails every pending request and drops every handler; nothing is left
    /// for a reply or a deadline to finish a second time.
    @Test func aLostConnectionFailsEveryPendingRequestOnce() {
        var session = ConnectionSession(socket: 5)
        for id in Int64(1)...3 { _ = session.register(request("r\(id)", due: at(UInt64(id) * 10)), id: id) }
        session.observerAdded("o1", events: ["e"], priority: 0, key: nil, handler: { _ in .next }, onEvicted: { _ in })
        session.handlerAdded("h1", channel: "c", method: nil, handler: { _ in .null })

        let end = session.readerEnded(socket: 5, generation: session.generation, reason: lost)!
        #expect(end.next == .finish && end.reason == lost && session.closedReason == lost)
        #expect(end.failed.map(\.timeoutMessage).sorted() == ["r1", "r2", "r3"])
        #expect(session.pending.isEmpty)
        #expect((Int64(1)...3).allSatisfy { session.takeRequest($0) == nil })
        #expect(session.expire(now: at(1000)).due.isEmpty)
        #expect(session.observerHandler(for: "o1") == nil && session.callHandler(for: "h1") == nil)
        #expect(session.requestRefusal(on: nil) == lost)
        #expect(!session.isOpen)
    }

    /// The reader of a socket given up on ends after a newer socket was adopted: the question
    /// (is it the present reader?) and the change are one step, so it fails none of the new
    /// socket's requests and drops none of its handlers.
    @Test func anOlderReadersEndChangesNothing() {
        var session = ConnectionSession(socket: 5)
        session.configureReconnection(policy: .always, resendKeyed: true)
        let old = session.generation
        #expect(session.readerEnded(socket: 5, generation: old, reason: lost)?.next == .reconnect)
        #expect(session.adopt(socket: 6) == old + 1)
        _ = session.register(request("on the new socket", due: at(100)), id: 1)
        session.handlerAdded("h1", channel: "c", method: nil, handler: { _ in .null })

        #expect(session.readerEnded(socket: 5, generation: old, reason: lost) == nil)
        #expect(Array(session.pending.keys) == [1])
        #expect(session.callHandler(for: "h1") != nil)
        #expect(session.socket == 6 && session.closedReason == nil)
    }

    /// A frame meant for an older socket goes out on no socket, and a request bound to one
    /// is refused; while there is no socket, nothing goes out.
    @Test func framesForAnOlderSocketGoNowhere() {
        var session = ConnectionSession(socket: 5)
        session.configureReconnection(policy: .always, resendKeyed: true)
        #expect(session.socket(for: 0) == .success(5) && session.socket(for: nil) == .success(5))
        #expect(session.requestRefusal(on: 0) == nil)

        #expect(session.readerEnded(socket: 5, generation: session.generation, reason: lost)!.next == .reconnect)
        #expect(session.socket == -1)
        #expect(session.socket(for: nil) == .failure(.connectionLost("the connection to the broker was lost")))
        #expect(session.requestRefusal(on: nil) == NotifBusConnection.notSent)

        #expect(session.adopt(socket: 6) == 1)
        #expect(session.socket(for: 0) == .failure(.connectionLost("the connection was replaced")))
        #expect(session.requestRefusal(on: 0) == "the connection was replaced")
        #expect(session.socket(for: 1) == .success(6) && session.socket(for: nil) == .success(6))
        #expect(session.requestRefusal(on: 1) == nil)

        // Back only on the socket that was made again.
        let back = [(0, 5), (1, 5), (1, 6)].map { session.reconnected(generation: $0.0, socket: Int32($0.1)) }
        #expect(back == [false, false, true])
        #expect(session.isOpen)
    }

    /// A keyed request in flight keeps a connection with nothing else reconnecting, until it
    /// is over; without `resendKeyed` it does not count.
    @Test(arguments: [true, false]) func aKeyedRequestInFlightKeepsTheConnection(resendKeyed: Bool) {
        var session = ConnectionSession(socket: 5)
        session.configureReconnection(policy: .whenHoldingRegistrations, resendKeyed: resendKeyed)
        #expect(session.keyedRequestStarted() == resendKeyed)
        #expect(session.replacement(since: 0) == nil)  // the reader has not decided yet
        let end = session.readerEnded(socket: 5, generation: session.generation, reason: lost)!
        guard resendKeyed else {
            #expect(end.next == .finish && session.replacement(since: 0) == false)
            return
        }
        #expect(end.next == .reconnect && session.closedReason == nil)
        #expect(session.isReconnecting && session.holdsNewRequests && !session.isOpen)
        #expect(session.replacement(since: 0) == true)

        // An attempt's socket ends before it is back: the reconnect goes on.
        #expect(session.adopt(socket: 6) == 1)
        #expect(session.readerEnded(socket: 6, generation: session.generation, reason: lost)!.next == .keepTrying)
        #expect(session.adopt(socket: 7) == 2)
        let back = session.reconnected(generation: 2, socket: 7)
        #expect(back)
        #expect(session.replacement(since: 0) == true)  // another socket carries it now

        session.keyedRequestEnded()
        #expect(session.readerEnded(socket: 7, generation: session.generation, reason: lost)!.next == .finish)
        #expect(session.replacement(since: 2) == false)
    }

    /// Registrations outlive the socket in `resumption`: made again under new ids, or
    /// dropped when a newer registration took their place.
    @Test func registrationsAreMadeAgainUnderNewIDs() {
        var session = ConnectionSession(socket: 5)
        session.configureReconnection(policy: .whenHoldingRegistrations, resendKeyed: true)
        session.observerAdded("o1", events: ["e"], priority: 3, key: "k", handler: { _ in .next }, onEvicted: { _ in })
        session.handlerAdded("h1", channel: "c", method: "m", handler: { _ in .null })
        session.handlerAdded("h2", channel: "c", method: "m", handler: { _ in .null })  // replaces h1
        #expect(session.callHandler(for: "h1") == nil && session.channelRegistration(NotifBusConnection.registrationKey("c", "m")) == "h2")

        #expect(session.readerEnded(socket: 5, generation: session.generation, reason: lost)!.next == .reconnect)
        #expect(session.observerHandler(for: "o1") == nil)
        let entries = session.resumption.entries
        #expect(entries.map(\.handle) == ["o1", "h2"])

        #expect(session.adopt(socket: 6) == 1)
        session.registrationResumed(entries[0], as: "o9")
        #expect(session.currentID(of: "o1") == "o9" && session.observerHandler(for: "o9") != nil)
        session.registrationSuperseded(entries[1])
        #expect(session.resumption.entries.map(\.handle) == ["o1"])
        #expect(session.currentID(of: "h2") == "h2")

        // An eviction drops the observer and hands back its own handler.
        let evicted = session.evicted(.observer("o9", by: "o12"))
        #expect(evicted.specific != nil && session.observerHandler(for: "o9") == nil)
    }

    /// A close while reconnecting stops it: no socket is adopted, and the end follows.
    @Test func aCloseWhileReconnectingStopsIt() {
        var session = ConnectionSession(socket: 5)
        session.configureReconnection(policy: .always, resendKeyed: true)
        #expect(session.readerEnded(socket: 5, generation: session.generation, reason: lost)!.next == .reconnect)
        #expect(session.closedByClient() == -1)
        #expect(session.closedByClient() == nil)
        #expect(session.adopt(socket: 6) == nil)
        #expect(session.abandonReconnecting() == "closed by this client")
        #expect(!session.isReconnecting && session.replacement(since: 0) == false)
        #expect(session.ended().isEmpty && session.hasEnded)
    }

    /// Random mixes of requests, replies, timer firings and lost sockets: each request is
    /// finished exactly once, a firing fails only what is due (earliest first), and the
    /// timer is always armed no later than the earliest pending deadline.
    @Test(arguments: UInt64(1)...20) func everyRequestFinishesOnceInAnyOrder(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        var session = ConnectionSession(socket: 100)
        session.configureReconnection(policy: .always, resendKeyed: true)
        var now: UInt64 = 0
        var registered: Set<Int64> = []
        var finished: Set<Int64> = []
        func finish(_ names: [String], _ step: Int) {
            for name in names {
                let id = Int64(name)!
                #expect(finished.insert(id).inserted, "seed \(seed), step \(step): request \(id) finished twice")
            }
        }
        for step in 0..<400 {
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<45:
                let id = session.newRequestID()
                #expect(!registered.contains(id), "seed \(seed), step \(step): id \(id) reused")
                registered.insert(id)
                let deadline = at(now + UInt64.random(in: 1...500, using: &rng))
                let armedBefore = session.armedDeadline
                let arm = session.register(request(String(id), due: deadline), id: id)
                #expect(
                    (arm != nil) == (armedBefore == nil || deadline < armedBefore!),
                    "seed \(seed), step \(step): armed \(String(describing: arm)) with \(String(describing: armedBefore)) before")
            case 45..<75:
                // A reply, for a pending request or one finished already.
                guard let id = registered.randomElement(using: &rng) else { continue }
                finish(session.takeRequest(id).map { [$0.timeoutMessage] } ?? [], step)
            case 75..<95:
                now += UInt64.random(in: 0...200, using: &rng)
                let (due, rearm) = session.expire(now: at(now))
                let deadlines = due.map(\.deadline)
                #expect(deadlines.allSatisfy { $0 <= at(now) } && deadlines == deadlines.sorted(), "seed \(seed), step \(step)")
                #expect(session.pending.values.allSatisfy { $0.deadline > at(now) }, "seed \(seed), step \(step)")
                #expect(rearm == session.pending.values.map(\.deadline).min(), "seed \(seed), step \(step)")
                finish(due.map(\.timeoutMessage), step)
            default:
                let socket = session.socket
                let end = session.readerEnded(socket: socket, generation: session.generation, reason: lost)!
                #expect(end.next == .reconnect && session.pending.isEmpty, "seed \(seed), step \(step)")
                finish(end.failed.map(\.timeoutMessage), step)
                let generation = session.adopt(socket: socket + 1)
                #expect(generation.map { session.reconnected(generation: $0, socket: socket + 1) } == true, "seed \(seed), step \(step)")
            }
            if let earliest = session.pending.values.map(\.deadline).min() {
                #expect(session.armedDeadline.map { $0 <= earliest } == true, "seed \(seed), step \(step): the timer fires too late")
            }
        }
        #expect(session.closedByClient() != nil)
        let end = session.readerEnded(socket: session.socket, generation: session.generation, reason: lost)!
        #expect(end.next == .finish)
        finish(end.failed.map(\.timeoutMessage), 400)
        #expect(finished == registered, "seed \(seed): \(registered.subtracting(finished).count) requests never finished")
    }
}
