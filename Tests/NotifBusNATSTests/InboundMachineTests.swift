// The bridge's exactly-once machine, one input at a time: the requests it writes (key, body
// bytes as they came, size checked against maxFrame before sending), what it does with each
// kind of answer (result, interrupted, a refusal that may change, a final one, a lost
// connection), the order of its units, its keep-alives and its memory of finished sequences.
import NotifBusNATS
import NotifBusProtocol
import Testing

@Suite struct InboundMachineTests {
    typealias Machine = InboundMachine

    func machine(inflight: Int = 4, ackWaitMs: Int64 = 3000) -> Machine {
        Machine(settings: .init(device: "d1", stream: "S", inflight: inflight, ackWaitMs: ackWaitMs))
    }

    func post(_ seq: UInt64, _ id: String?, _ body: String = #"{"n":1}"#, event: String = "mail") -> Machine.Message {
        .init(sequence: seq, subject: "notifbus.d1.post." + event, msgID: id, body: Array(body.utf8), handle: Int(seq) * 10)
    }

    func put(_ seq: UInt64, _ id: String, _ body: String, slot: String = "launch") -> Machine.Message {
        .init(sequence: seq, subject: "notifbus.d1.put." + slot, msgID: id, body: Array(body.utf8), handle: Int(seq) * 10)
    }

    func sends(_ actions: [Machine.Action]) -> [(group: Int64, requests: [Machine.Request])] {
        actions.compactMap { if case .send(let g, let r) = $0 { return (g, r) } else { return nil } }
    }

    func finishes(_ actions: [Machine.Action]) -> [(unit: Int64, publish: [OutboundMessage], ack: [Int])] {
        actions.compactMap { if case .finish(let u, let p, let a) = $0 { return (u, p, a) } else { return nil } }
    }

    func has(_ actions: [Machine.Action], _ wanted: (Machine.Action) -> Bool) -> Bool { actions.contains(where: wanted) }

    func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    func header(_ m: OutboundMessage, _ name: String) -> String? { m.headers.first { $0.0 == name }?.1 }

    func result(_ text: String) -> Machine.Answer { .result(Array(text.utf8)) }

    @Test func startsByFetchingAndSendsKeyedRequestsWithTheBodiesAsTheyCame() {
        var m = machine()
        #expect(has(m.handle(.tick, now: 0)) { if case .fetch = $0 { true } else { false } })
        _ = m.handle(.brokerConnected(maxFrame: 1 << 20), now: 0)
        let body = #"{"n": 1e9, "x":[1.50,-0.0]}"#
        let actions = m.handle(.fetched([post(1, "m1", body), put(2, "p1", "null"), post(3, "m3", "")]), now: 1)
        let sent = sends(actions)
        #expect(sent.count == 2 && sent[0].requests.count == 2 && sent[1].requests.count == 1)
        #expect(sent[0].requests[0].op == "post")
        #expect(text(sent[0].requests[0].members) == #","name":"mail","once":"nats/d1/m1","payload":{"n": 1e9, "x":[1.50,-0.0]}"#)
        #expect(text(sent[0].requests[1].members) == #","slot":"launch","once":"nats/d1/p1","value":null"#)
        #expect(text(sent[1].requests[0].members) == #","name":"mail","once":"nats/d1/m3""#)
        // The next batch is asked for while this one is applied.
        #expect(has(actions) { if case .fetch = $0 { true } else { false } })
    }

    @Test func publishesTheBrokersResultsThenAcksTheWholeUnit() {
        var m = machine()
        _ = m.handle(.brokerConnected(maxFrame: 1 << 20), now: 0)
        let sent = sends(m.handle(.fetched([post(1, "m1"), put(2, "p1", "1"), post(3, "m3")]), now: 0))
        #expect(finishes(m.handle(.answers(group: sent[0].group, [result(#"{"event":7,"outcome":"completed"}"#), result("{}")]), now: 1)).isEmpty)
        let done = finishes(m.handle(.answers(group: sent[1].group, [result(#"{"event":8}"#)]), now: 2))
        #expect(done.count == 1 && done[0].ack == [10, 20, 30])
        #expect(
            done[0].publish.map { text($0.body) } == [
                #"{"msgId":"m1","event":"mail","result":{"event":7,"outcome":"completed"}}"#, #"{"msgId":"m3","event":"mail","result":{"event":8}}"#,
            ])
        #expect(done[0].publish.map { header($0, "Nats-Msg-Id") } == ["result:m1", "result:m3"])
        #expect(done[0].publish.allSatisfy { $0.subject == "notifbus.d1.result" })
    }

    @Test func aFrameOverMaxFrameIsDeadLetteredWithoutBeingSent() {
        var m = machine()
        let body = "[" + String(repeating: "1,", count: 100) + "1]"
        // The bound: {"op":"post","id":<16 digits>} plus the members.
        let members = #","name":"mail","once":"nats/d1/big","payload":"# + body
        let bound = #"{"op":"post","id":}"#.utf8.count + 16 + members.utf8.count
        _ = m.handle(.brokerConnected(maxFrame: bound - 1), now: 0)
        let actions = m.handle(.fetched([post(1, "big", body), post(2, "small", "1")]), now: 0)
        let sent = sends(actions)
        #expect(sent.count == 1 && sent[0].requests.count == 1 && text(sent[0].requests[0].members).contains("small"))
        let done = finishes(m.handle(.answers(group: sent[0].group, [result("{}")]), now: 1))
        let dead = done[0].publish[0]
        #expect(dead.subject == "notifbus.d1.dead" && text(dead.body) == body)
        #expect(header(dead, "Notifbus-Reason") == "too_large")
        #expect(header(dead, "Notifbus-Detail") == "its broker frame takes up to \(bound) bytes; the broker's maxFrame is \(bound - 1)")
        #expect(header(dead, "Nats-Msg-Id") == "dead:S:1" && header(dead, "Notifbus-Msg-Id") == "big")
        // At exactly maxFrame it goes.
        var n = machine()
        _ = n.handle(.brokerConnected(maxFrame: bound), now: 0)
        #expect(sends(n.handle(.fetched([post(1, "big", body)]), now: 0)).count == 1)
    }

    @Test func finalRefusalsAreDeadLetteredAndInterruptedIsAResult() {
        var m = machine()
        _ = m.handle(.brokerConnected(maxFrame: 1 << 20), now: 0)
        let sent = sends(m.handle(.fetched([post(1, "a"), put(2, "b", "1"), post(3, "c")]), now: 0))
        _ = m.handle(
            .answers(
                group: sent[0].group,
                [
                    .refused(code: "invalid_payload", message: "bad\nnews", details: Array(#"{"f":1}"#.utf8)),
                    .refused(code: "once_conflict", message: "x", details: nil),
                ]),
            now: 1)
        let done = finishes(
            m.handle(.answers(group: sent[1].group, [.refused(code: "interrupted", message: "cut", details: Array("{}".utf8))]), now: 2))
        let publish = done[0].publish
        #expect(publish.count == 3)
        #expect(header(publish[0], "Notifbus-Reason") == "invalid_payload" && header(publish[0], "Notifbus-Detail") == "badnews")
        #expect(header(publish[1], "Notifbus-Reason") == "once_conflict" && publish[1].subject == "notifbus.d1.dead")
        #expect(text(publish[2].body) == #"{"msgId":"c","event":"mail","error":{"code":"interrupted","message":"cut","details":{}}}"#)
    }

    @Test func aRefusalThatMayChangeIsSentAgainAfterAPauseWithTheSameBytes() {
        var m = machine(inflight: 2)
        _ = m.handle(.brokerConnected(maxFrame: 1 << 20), now: 0)
        let first = sends(m.handle(.fetched([put(1, "p", "[1e9]"), post(2, "q")]), now: 0))
        #expect(first.count == 2)
        let refused = m.handle(.answers(group: first[0].group, [.refused(code: "storage_failed", message: "disk full", details: nil)]), now: 10)
        #expect(sends(refused).isEmpty && m.deadline == 60)
        // The second group's answer comes during the pause: nothing is sent until it ends.
        #expect(sends(m.handle(.answers(group: first[1].group, [result("{}")]), now: 20)).isEmpty)
        #expect(sends(m.handle(.tick, now: 59)).isEmpty)
        let again = sends(m.handle(.tick, now: 60))
        #expect(again.count == 1 && again[0].requests == first[0].requests)
        // Refused again: the pause doubles.
        _ = m.handle(.answers(group: again[0].group, [.refused(code: "queue_full", message: "full", details: nil)]), now: 61)
        #expect(m.deadline == 161)
        let third = sends(m.handle(.tick, now: 161))
        let done = finishes(m.handle(.answers(group: third[0].group, [result("{}")]), now: 162))
        #expect(done.count == 1 && done[0].publish.count == 1 && done[0].ack == [10, 20])
    }

    @Test func aLostConnectionReconnectsAndSendsEverythingAgainInOrder() {
        var m = machine(inflight: 4)
        _ = m.handle(.brokerConnected(maxFrame: 1 << 20), now: 0)
        let sent = sends(m.handle(.fetched([post(1, "a"), post(2, "b"), post(3, "c"), post(4, "d")]), now: 0))
        #expect(sent.count == 2)
        let lost = m.handle(.answers(group: sent[0].group, [result("{}"), .lost]), now: 1)
        #expect(has(lost) { if case .reconnect = $0 { true } else { false } })
        // The other group fails with the connection; no second reconnect, nothing sent meanwhile.
        let more = m.handle(.answers(group: sent[1].group, [.lost, .lost]), now: 2)
        #expect(!has(more) { if case .reconnect = $0 { true } else { false } } && sends(more).isEmpty)
        let resent = sends(m.handle(.brokerConnected(maxFrame: 1 << 20), now: 3))
        #expect(resent.flatMap { $0.requests } == [sent[0].requests[1]] + sent[1].requests)
    }

    @Test func unitsFinishInFetchOrder() {
        var m = machine(inflight: 2)
        _ = m.handle(.brokerConnected(maxFrame: 1 << 20), now: 0)
        let a = sends(m.handle(.fetched([post(1, "a")]), now: 0))
        let b = sends(m.handle(.fetched([put(2, "b", "1")]), now: 0))
        #expect(finishes(m.handle(.answers(group: b[0].group, [result("{}")]), now: 1)).isEmpty)
        let done = finishes(m.handle(.answers(group: a[0].group, [result("{}")]), now: 2))
        #expect(done.map(\.ack) == [[10], [20]])
    }

    @Test func keepsHeldMessagesAliveEveryThirdOfAckWait() {
        var m = machine(ackWaitMs: 3000)
        _ = m.handle(.brokerConnected(maxFrame: 1 << 20), now: 0)
        _ = m.handle(.fetched([post(1, "a")]), now: 100)
        #expect(m.deadline == 1100)
        let alive = m.handle(.tick, now: 1100)
        #expect(has(alive) { if case .keepAlive(let h) = $0 { h == [10] } else { false } })
        #expect(m.deadline == 2100)
    }

    @Test func aRedeliveryOfAFinishedSequenceIsAckedWithoutTheBroker() {
        var m = machine()
        _ = m.handle(.brokerConnected(maxFrame: 1 << 20), now: 0)
        let sent = sends(m.handle(.fetched([post(1, "a")]), now: 0))
        let unit = finishes(m.handle(.answers(group: sent[0].group, [result("{}")]), now: 1))[0].unit
        _ = m.handle(.finished(unit: unit), now: 2)
        #expect(m.isIdle)
        // The ack was lost: JetStream delivers sequence 1 again, under a new handle.
        let again = m.handle(
            .fetched([.init(sequence: 1, subject: "notifbus.d1.post.mail", msgID: "a", body: Array("{}".utf8), handle: 99)]), now: 5000)
        #expect(sends(again).isEmpty)
        #expect(finishes(again).map { $0.ack } == [[99]] && finishes(again)[0].publish.isEmpty)
    }

    @Test func malformedMessagesAreDeadLetteredAtOnce() {
        var m = machine()
        _ = m.handle(.brokerConnected(maxFrame: 1 << 20), now: 0)
        let actions = m.handle(
            .fetched([post(1, nil), post(2, "x", "{oops"), .init(sequence: 3, subject: "notifbus.d1.take.x", msgID: "y", body: [], handle: 30)]),
            now: 0)
        #expect(sends(actions).isEmpty)
        #expect(finishes(actions).first?.publish.map { header($0, "Notifbus-Reason") } == ["no_msg_id", "bad_json", "unknown_subject"])
    }
}
