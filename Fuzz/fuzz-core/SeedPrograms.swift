// Seed programs for fuzz-core: one short scenario per protocol feature, written with the
// same Instruction encoding the fuzzer reads, so that the checked-in corpus
// (Fuzz/corpus/core, written by `fuzz-core --write-seeds`) never drifts from the reader.
#if canImport(Glibc)
import Glibc
#endif

struct SeedProgram {
    let name: String
    let program: [UInt8]
}

/// Builds a program. Connection selectors below 0xF0 pick the n-th open connection.
struct ProgramBuilder {
    private(set) var bytes: [UInt8]
    private var serialID: UInt8 = 0

    /// `configuration`: queue length `k % 4`, client limit `2 + (k / 4) % 4`, one poster's
    /// share of the queue `1 + (k / 16) % 4`.
    init(configuration: UInt8 = 0x0D) { bytes = [configuration] }

    mutating func add(_ instruction: Instruction) { bytes += instruction.encoded }

    mutating func connect(uid: UInt8 = 0, greet: Bool = true) { add(.connect(uid: uid, flags: greet ? 3 : 0)) }

    /// A request from template `t`; ids default to fresh integers.
    mutating func send(_ c: UInt8, _ t: Template, id: UInt8 = 0, _ a: UInt8 = 0, _ b: UInt8 = 0, _ d: UInt8 = 0) {
        add(.send(connection: c, template: t.rawValue, id: id, a: a, b: b, c: d))
    }

    /// A request from template `t` with idempotency key `FrameTemplates.onceKeys[key]`.
    mutating func send(_ c: UInt8, _ t: Template, once key: UInt8, id: UInt8 = 0, _ a: UInt8 = 0, _ b: UInt8 = 0, _ d: UInt8 = 0) {
        // Template bytes 0x90, 0xA0, 0x80 pick q0, q1, q2 (FrameTemplates.onceKey).
        let nibble: UInt8 = [9, 10, 8][Int(key % 3)]
        add(.send(connection: c, template: t.rawValue | nibble << 4, id: id, a: a, b: b, c: d))
    }

    mutating func answer(_ c: UInt8, kind: UInt8, pick: UInt8 = 0) { add(.answer(connection: c, pick: pick, kind: kind)) }
    mutating func callReturn(_ c: UInt8, kind: UInt8, pick: UInt8 = 0) { add(.return(connection: c, pick: pick, kind: kind)) }
    mutating func raw(_ c: UInt8, _ text: String) { add(.raw(connection: c, body: Array(text.utf8))) }
    mutating func disconnect(_ c: UInt8) { add(.disconnect(connection: c)) }
    mutating func advance(ms: UInt8, tick: Bool = true) { add(.advance(ms: ms, flags: tick ? 1 : 0)) }
}

enum SeedPrograms {
    // Answer kinds (FrameTemplates.answer) and return kinds (FrameTemplates.callReturn).
    static let next: UInt8 = 0, stop: UInt8 = 1, complete: UInt8 = 2, presentBanner: UInt8 = 3, badCompletion: UInt8 = 4
    static let malformedNext: UInt8 = 6, wrongEvent: UInt8 = 7
    static let result: UInt8 = 0, error: UInt8 = 2, bothResultAndError: UInt8 = 4

    static func program(_ name: String, configuration: UInt8 = 0x0D, _ build: (inout ProgramBuilder) -> Void) -> SeedProgram {
        var builder = ProgramBuilder(configuration: configuration)
        build(&builder)
        return SeedProgram(name: name, program: builder.bytes)
    }

    static let all: [SeedProgram] = [
        program("hello-ping") { p in
            p.connect()
            p.send(0, .ping)
        },
        program("chain-priority-next-complete") { p in
            p.connect(); p.connect(); p.connect()
            p.send(0, .subscribe, 1, 2)  // "a", priority 10
            p.send(1, .subscribe, 1, 4)  // "a", priority -5: runs first
            p.send(2, .post, 0, 2)  // post "a" with a number payload
            p.answer(1, kind: next)
            p.answer(0, kind: complete)
        },
        program("chain-stop-and-unhandled") { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 3)  // "a" and "b"
            p.send(1, .post, 1, 1)  // "b"
            p.answer(0, kind: stop)
            p.send(1, .post, 5)  // "nobody": unhandled at once
        },
        program("hop-timeout") { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 1)
            p.send(1, .post, 0)
            p.advance(ms: 60)
        },
        program("hop-budget-skips") { p in
            p.connect(); p.connect(); p.connect()
            p.send(0, .subscribe, 1)
            p.send(1, .subscribe, 1)
            p.send(0, .subscribe, 1)  // the third hop: skipped once c0 timed out
            p.send(2, .post, 0)
            p.advance(ms: 60)  // c0's hop times out; c1's hop starts
            p.answer(1, kind: next)  // c0's second observer is traced skipped
        },
        program("unresponsive-until-it-speaks", configuration: 0x1F) { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 1)
            p.send(1, .post, 0)  // runs: c0's hop
            p.send(1, .post, 0)  // both wait (a share of 2)
            p.send(1, .post, 0)
            p.advance(ms: 60)  // c0's hop times out: the waiting two skip it
            p.send(1, .status)  // c0 is listed unresponsive
            p.send(1, .post, 0)  // skipped at once
            p.send(0, .ping)  // c0 speaks: responsive again
            p.send(1, .post, 0)  // c0 gets its hop
            p.answer(0, kind: next, pick: 1)  // the latest event c0 was sent
        },
        program("queue-share", configuration: 0x1F) { p in
            p.connect(); p.connect(); p.connect()
            p.send(0, .subscribe, 1)
            p.send(1, .post, 0)  // runs
            p.send(1, .post, 0)  // waits
            p.send(1, .post, 0)  // waits: c1's share of 2 is used up
            p.send(1, .post, 0)  // queue_full
            p.send(2, .post, 0)  // another poster still waits
            p.send(2, .status)
            p.answer(0, kind: next)  // c1's next post starts: it has room again
            p.send(1, .post, 1)
        },
        program("tick-at-exact-deadline") { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 1)
            p.send(1, .post, 0)
            p.advance(ms: 10, tick: false)
            p.add(.tickAtDeadline)
            p.answer(0, kind: next)  // late: ignored
        },
        program("answers-ignored-and-malformed") { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 1)
            p.send(1, .post, 0)
            p.answer(1, kind: next)  // another connection
            p.answer(0, kind: wrongEvent)
            p.answer(0, kind: malformedNext)
            p.answer(0, kind: complete)
            p.answer(0, kind: complete)  // a second answer
        },
        program("key-eviction") { p in
            p.connect(); p.connect(); p.connect()
            p.send(0, .subscribe, 1, 0, 1)  // key k1
            p.send(1, .subscribe, 1, 0, 1)  // key k1 again: evicts the first
            p.send(2, .post, 0)
            p.answer(1, kind: complete)
        },
        program("unsubscribe-by-observer-and-key") { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 1, 0, 2)  // key k2
            p.send(0, .subscribe, 2)
            p.send(1, .unsubscribe, 0, 1)  // by observer
            p.send(1, .unsubscribe, 1, 0, 2)  // by key k2
            p.send(1, .unsubscribe, 2)  // both: bad_request
            p.send(1, .unsubscribe, 3)  // neither
        },
        program("observer-removed-mid-hop") { p in
            p.connect(); p.connect(); p.connect()
            p.send(0, .subscribe, 1, 2)
            p.send(1, .subscribe, 1, 5)
            p.send(2, .post, 0)
            p.send(2, .unsubscribe, 0, 0)  // removes the observer whose hop runs
            p.answer(1, kind: next)
        },
        program("disconnect-mid-hop") { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 1)
            p.send(1, .post, 0)
            p.disconnect(0)
        },
        program("poster-disconnects", configuration: 0x0E) { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 1)
            p.send(1, .post, 0)
            p.send(1, .post, 0)
            p.disconnect(1)
            p.answer(0, kind: next)
        },
        program("queue-full", configuration: 0x0C) { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 1)
            p.send(1, .post, 0)
            p.send(1, .post, 0)  // queue of 0: queue_full
        },
        program("queue-drains-in-order", configuration: 0x3F) { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 3)
            p.send(1, .post, 0)
            p.send(1, .post, 1)
            p.send(1, .post, 0)
            p.answer(0, kind: next)
            p.answer(0, kind: stop, pick: 1)
            p.advance(ms: 200)
        },
        program("will-present-completions") { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 4, 1)  // willPresent, priority 0
            p.send(0, .subscribe, 4, 2)  // willPresent, priority 10
            p.send(1, .post, 2, 3)  // a valid willPresent payload
            p.answer(0, kind: badCompletion)
            p.answer(0, kind: presentBanner, pick: 1)
            p.send(1, .post, 2, 0)  // no payload: invalid_payload
        },
        program("launch-retention") { p in
            p.connect(); p.connect()
            p.send(0, .take, 0, 2)  // waits 10 ms on "launch"
            p.send(1, .post, 3, 4)  // didReceive, default action, no observer
            p.send(1, .post, 3, 4)
            p.send(0, .take, 0)  // the second payload
            p.send(0, .peek, 0)
        },
        program("did-receive-handled") { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 8)  // didReceive
            p.send(1, .post, 3, 4)  // default action: would launch if unhandled
            p.answer(0, kind: complete)
            p.send(1, .post, 3, 4)
            p.answer(0, kind: stop)
        },
        program("categories-and-actions") { p in
            p.connect(); p.connect()
            p.send(0, .setCategories, 0)
            p.send(0, .getCategories)
            p.send(1, .post, 3, 6)  // ACCEPT: launches
            p.send(1, .post, 3, 7)  // DECLINE: does not
            p.send(1, .post, 3, 8)  // REPLY with text
            p.send(1, .post, 3, 9)  // REPLY without text: invalid_action
            p.send(1, .post, 3, 5, 1)  // dismiss in MESSAGE
            p.send(1, .post, 3, 5, 0)  // dismiss in INVITE: invalid_action
            p.send(0, .setCategories, 2)  // refused: the set stays
            p.send(0, .setCategories, 3)
            p.send(1, .post, 3, 6)  // ACCEPT without foreground
        },
        program("open-settings") { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 16)
            p.send(1, .post, 4, 10)
            p.answer(0, kind: complete)
            p.send(1, .post, 4, 11)  // invalid payload
        },
        program("invoke-and-return") { p in
            p.connect(); p.connect()
            p.send(0, .handle, 0, 2)  // ch/m
            p.send(1, .invoke, 0, 0, 3)  // ch/m with arguments
            p.callReturn(0, kind: result)
            p.send(1, .invoke, 0, 0, 1)
            p.callReturn(0, kind: error)
            p.callReturn(0, kind: result)  // late: ignored
        },
        program("invoke-routes-and-not-implemented") { p in
            p.connect(); p.connect()
            p.send(0, .handle, 0, 0)  // whole channel ch
            p.send(1, .invoke, 0, 1)  // ch/n: the channel handler
            p.send(1, .invoke, 1, 1)  // ci/n: not_implemented
            p.callReturn(0, kind: bothResultAndError)
            p.callReturn(0, kind: 3)
        },
        program("call-timeout-and-limit") { p in
            p.connect(); p.connect()
            p.send(0, .handle, 0, 2)
            p.send(1, .invoke, 0, 0)
            p.send(1, .invoke, 0, 0)
            p.send(1, .invoke, 0, 0)  // a third in flight: bad_request
            p.advance(ms: 90)
            p.callReturn(0, kind: result)
        },
        program("handler-gone-and-replaced") { p in
            p.connect(); p.connect(); p.connect()
            p.send(0, .handle, 0, 2)
            p.send(2, .invoke, 0, 0)
            p.send(1, .handle, 0, 2)  // replaces: c1 is told
            p.send(2, .invoke, 0, 0)
            p.callReturn(0, kind: result)  // still allowed for the call it received
            p.disconnect(1)  // handler_gone
            p.send(1, .unhandle, 0, 0)
        },
        program("slots-put-take-peek") { p in
            p.connect()
            p.send(0, .put, 1, 1, 7)
            p.send(0, .put, 1, 2, 7)  // replaced
            p.send(0, .peek, 1)
            p.send(0, .take, 1)
            p.send(0, .take, 1)  // null
            p.send(0, .put, 1, 0)  // null into an empty slot
            p.send(0, .put, 1, 4)  // no value: bad_request
        },
        program("take-waits-for-put") { p in
            p.connect(); p.connect()
            p.send(0, .take, 2, 3)  // waits 100 ms on s2
            p.send(0, .take, 2, 2)  // and 10 ms
            p.send(0, .take, 2, 3)  // a third: bad_request
            p.send(1, .put, 2, 1, 9)  // delivered to the oldest
            p.advance(ms: 20)
            p.send(0, .take, 2, 5)  // wait out of range
        },
        program("slot-limits") { p in
            p.connect()
            p.send(0, .put, 0, 3, 200)
            p.send(0, .put, 1, 3, 100)  // 300 bytes in all: refused
            p.send(0, .put, 1, 1, 1)
            p.send(0, .put, 2, 1, 1)
            p.send(0, .put, 0, 0)
            p.send(0, .take, 0, 4)  // waits ten minutes
            p.advance(ms: 255)
        },
        program("monitor") { p in
            p.connect(); p.connect()
            p.send(0, .monitor)
            p.send(1, .ping)
            p.send(1, .subscribe, 1)
            p.send(0, .post, 0)
            p.answer(1, kind: complete)
            p.disconnect(0)
            p.send(0, .status)
        },
        program("status-with-everything") { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 31, 6, 1)
            p.send(0, .handle, 1, 3)
            p.send(1, .put, 0, 1, 1)
            p.send(1, .post, 0)
            p.send(1, .status)
        },
        program("too-many-clients", configuration: 0x00) { p in
            p.connect(); p.connect(); p.connect()
            p.disconnect(0)
            p.connect()
        },
        program("forbidden-uid") { p in
            p.connect(uid: 3)
            p.connect(uid: 2)
            p.connect(uid: 1)
        },
        program("hello-required-and-bad-hello") { p in
            p.connect(greet: false); p.connect(greet: false); p.connect(greet: false)
            p.raw(0, "{")  // bad_json: stays open
            p.send(0, .hello, 5)  // protocol "1": bad_request, stays open
            p.send(0, .hello, 3)  // protocol 2: unsupported_protocol, closes
            p.send(0, .ping)  // hello_required, closes
            p.answer(0, kind: next)  // hello_required
        },
        program("second-hello") { p in
            p.connect()
            p.send(0, .hello)
            p.send(0, .hello, 3)
        },
        program("oversized-frames") { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 1)
            p.send(1, .post, 0)
            p.add(.oversized(connection: 0, choice: 0))
            p.add(.oversized(connection: 0, choice: 1))
        },
        program("request-ids") { p in
            p.connect()
            for id: UInt8 in [0, 205, 225, 235, 240, 241, 242, 243, 244, 245, 246, 247] { p.send(0, .ping, id: id) }
        },
        program("junk-requests") { p in
            p.connect()
            for a: UInt8 in 0..<4 { p.send(0, .junk, a) }
            p.send(0, .subscribe)  // no events
        },
        program("raw-frames") { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 1)
            p.send(1, .post, 0)
            p.raw(1, "[1]")
            p.raw(1, #"{"op":"ping","id":"r\u0031"}"#)
            p.raw(0, #"{"op":"complete","event":1,"value":{"deep":[[[[]]]]}}"#)
            p.raw(0, #"{"op":"return","call":1,"result":1}"#)
        },
        program("shutdown-with-everything-pending", configuration: 0x0F) { p in
            p.connect(); p.connect(); p.connect()
            p.send(0, .subscribe, 1)
            p.send(0, .handle, 0, 2)
            p.send(1, .post, 0)
            p.send(1, .post, 0)
            p.send(2, .invoke, 0, 0)
            p.send(2, .take, 1, 3)
            p.add(.shutdown)
            p.advance(ms: 100)
        },
        program("writes-held-then-written-and-failed") { p in
            p.connect(); p.connect()
            p.add(.storage(flags: 1))  // writes stay in flight
            p.send(0, .put, 1, 1, 7)  // s1
            p.send(0, .put, 2, 2, 8)  // s2: in flight together
            p.send(0, .peek, 1)  // waits for s1
            p.send(1, .take, 1)  // another connection: waits for s1 too
            p.send(1, .ping)  // behind its take
            p.send(0, .post, 0)  // posts never wait
            p.add(.storage(flags: 5))  // s1 written
            p.add(.storage(flags: 7))  // s2 fails; the take of s1 now in flight
            p.add(.storage(flags: 7))  // the take fails too: the value stays
            p.send(1, .peek, 1)
            p.send(0, .setCategories, 0)
            p.send(1, .getCategories)
            p.add(.storage(flags: 0))  // everything written
        },
        program("writes-failing-launch-retention-and-limits") { p in
            p.connect(); p.connect()
            p.add(.storage(flags: 1))
            p.send(0, .put, 1, 3, 100)  // 100 bytes in flight...
            p.send(1, .put, 2, 3, 200)  // ...so 200 more pass the 256-byte limit
            p.send(0, .post, 3, 4)  // didReceive: retained once written
            p.send(1, .take, 0, 3)  // waits behind the retention on "launch"
            p.add(.storage(flags: 7))  // the put of s1 fails
            p.add(.storage(flags: 6))  // the retention fails: retained null
            p.send(0, .post, 3, 4)
            p.add(.storage(flags: 0))
            p.send(1, .take, 0)
        },
        program("shutdown-with-writes-in-flight") { p in
            p.connect(); p.connect()
            p.add(.storage(flags: 1))
            p.send(0, .put, 1, 1, 3)
            p.send(0, .take, 1)  // waits behind the put
            p.send(1, .setCategories, 1)
            p.add(.shutdown)  // closes only once the writes are reported
            p.add(.storage(flags: 4))
            p.advance(ms: 10)
            p.add(.storage(flags: 0))
        },
        program("held-requests-keep-their-order") { p in
            p.connect(); p.connect()
            p.add(.storage(flags: 1))
            p.send(0, .put, 1, 1, 5)  // s1 in flight
            p.send(0, .handle, 0, 0)  // held behind it
            p.send(0, .invoke, 0, 0)  // behind the handle: it reaches the handle
            p.send(0, .subscribe, 1)  // held
            p.send(0, .post, 0)  // behind the subscribe: the event reaches it
            p.send(0, .setCategories, 0)
            p.send(0, .post, 3, 6)  // a didReceive judged by the set sent before it
            p.send(1, .post, 3, 6)  // another connection's click: the set has not started, so refused
            p.add(.storage(flags: 5))  // s1 written: the held requests start
            p.answer(0, kind: next)
            p.callReturn(0, kind: result)
            p.add(.storage(flags: 0))
            p.answer(0, kind: next)
        },
        program("held-takes-and-a-taker-that-left") { p in
            p.connect(); p.connect(); p.connect()
            p.add(.storage(flags: 1))
            p.send(0, .put, 2, 1, 1)  // s2 in flight
            p.send(0, .take, 0, 4)  // a take of "launch" held behind it keeps its place
            p.send(1, .take, 0, 4)  // a later taker
            p.send(2, .put, 0, 1, 7)  // waits for the held take rather than pass it
            p.add(.storage(flags: 5))  // s2 written: the first taker gets 7
            p.send(2, .put, 0, 1, 8)  // the second gets 8
            p.send(2, .put, 1, 1, 9)  // s1 = 9
            p.add(.storage(flags: 5))
            p.send(1, .take, 1)  // its removal in flight...
            p.disconnect(1)  // ...and the taker leaves
            p.add(.storage(flags: 5))  // removal written: 9 is written back
            p.send(1, .peek, 1)  // waits for the write-back
            p.send(1, .put, 1, 1, 2)
            p.add(.shutdown)  // the put waiting behind the write-back: shutting_down
            p.add(.storage(flags: 0))
        },
        // Idempotency keys (decision 43).
        program("keyed-post-repeated-while-running-and-after") { p in
            p.connect(); p.connect(); p.connect()
            p.send(0, .subscribe, 1)  // "a"
            p.send(1, .post, once: 0, 0, 2, 5)  // post "a" with payload 5 and key q0: runs
            p.send(2, .post, once: 0, 0, 2, 5)  // the same from another connection: waits
            p.send(1, .post, once: 0, 0, 2, 5)  // and again from the first
            p.answer(0, kind: next)  // all three get the one result
            p.send(2, .post, once: 0, 0, 2, 5)  // answered at once
            p.send(2, .post, once: 0, 0, 2, 6)  // another payload: once_conflict
            p.send(2, .put, once: 0, 1, 1, 5)  // another op: once_conflict
            p.send(0, .status)
        },
        program("keyed-put-take-categories-repeated") { p in
            p.connect(); p.connect()
            p.send(0, .put, once: 1, 1, 1, 7)  // s1 = 7, key q1
            p.send(1, .put, once: 1, 1, 1, 7)  // a repeat: s1 is not written again
            p.send(1, .put, 1, 1, 8)  // s1 = 8
            p.send(0, .put, once: 1, 1, 1, 7)  // still a repeat: s1 stays 8
            p.send(0, .take, once: 2, 1)  // takes 8, key q2
            p.send(1, .take, once: 2, 1, 3)  // a repeat with a wait: 8 again, nothing taken
            p.send(1, .put, once: 2, 1, 1, 1)  // q2 is a take's: once_conflict
            p.send(0, .setCategories, once: 0, 1)
            p.send(1, .setCategories, once: 0, 1)
            p.send(1, .peek, 1)
        },
        program("keyed-takes-waiting-then-handed-a-value") { p in
            p.connect(); p.connect(); p.connect()
            p.send(0, .take, once: 0, 2, 3)  // waits on s2, key q0
            p.send(1, .take, once: 0, 2, 3)  // the same take again, waiting beside it
            p.send(2, .put, 2, 1, 9)  // handed to the first; the second gets it as a repeat
            p.send(2, .put, 2, 1, 4)  // stays in s2
            p.send(1, .take, once: 0, 2)  // a repeat: 9
            p.send(2, .peek, 2)
        },
        program("keyed-hand-over-written-failed-and-held") { p in
            p.connect(); p.connect(); p.connect()
            p.add(.storage(flags: 1))
            p.send(0, .take, once: 1, 2, 3)  // waits on s2, key q1
            p.send(1, .put, once: 2, 2, 1, 9)  // handed over: both keys written first
            p.send(2, .take, 2, 2)  // waits for the slot's write
            p.add(.storage(flags: 7))  // the write fails: both refused, nothing held
            p.send(1, .put, once: 2, 2, 1, 9)  // applied as new: s2 = 9
            p.add(.storage(flags: 5))
            p.send(0, .take, once: 1, 2, 3)  // takes 9 under q1, written
            p.add(.storage(flags: 0))
        },
        program("keyed-post-cut-by-a-restart") { p in
            p.connect(); p.connect()
            p.send(0, .subscribe, 1)
            p.send(1, .post, once: 1, 0, 2, 3)  // its "running" record written, then its event
            p.add(.restart(flags: 0))  // cut mid-chain
            p.connect(); p.connect()
            p.send(0, .post, once: 1, 0, 2, 3)  // interrupted, as a repeat
            p.send(1, .post, once: 1, 0, 2, 4)  // another payload: once_conflict
            p.send(0, .status)
        },
        program("keyed-writes-lost-and-landed-in-restarts") { p in
            p.connect()
            p.add(.storage(flags: 1))
            p.send(0, .put, once: 0, 1, 1, 5)  // in flight...
            p.add(.restart(flags: 0))  // ...and lost: q0 was never held
            p.connect()
            p.add(.storage(flags: 1))
            p.send(0, .put, once: 0, 1, 1, 5)  // applied as new, in flight...
            p.send(0, .post, once: 2, 5)  // a post with no observer: its "ended" record in flight
            p.add(.restart(flags: 1))  // ...and landed, never answered
            p.connect()
            p.add(.storage(flags: 0))
            p.send(0, .put, once: 0, 1, 1, 5)  // a repeat
            p.send(0, .post, once: 2, 5)  // a repeat of the post's result
            p.send(0, .peek, 1)
        },
        // What the seeded explorer found (Explorer.swift), kept as programs one can read.
        program("keyed-held-take-keeps-its-place") { p in
            p.connect(); p.connect()
            p.add(.storage(flags: 1))
            p.send(1, .setCategories, 1)  // c1 has a write in flight
            p.send(1, .take, once: 2, 2, 2)  // so its keyed take of s2 is held, in place
            p.send(0, .take, 2, 3)  // a later take of s2 waits behind it
            p.add(.storage(flags: 0))
        },
        program("keyed-take-null-after-another-op-took-the-key") { p in
            p.connect(); p.connect()
            p.send(0, .take, once: 2, 0, 2)  // waits on launch, key q2
            p.send(1, .setCategories, once: 2, 1)  // q2 is a setCategories' now
            p.advance(ms: 20)  // the take's wait runs out: null, nothing applied
        },
        program("keyed-hand-over-keeps-its-slot-busy") { p in
            p.connect(); p.connect()
            p.add(.storage(flags: 1))
            p.send(0, .take, once: 2, 0, 5)  // waits on launch, key q2
            p.send(0, .put, 0, 1, 58)  // handed over: the key is written, launch is busy
            p.send(1, .take, 0, 2)  // waits for that write
            p.add(.storage(flags: 0))
        },
        program("keyed-hand-over-frees-the-takers-place") { p in
            p.connect(); p.connect()
            p.add(.storage(flags: 1))
            p.send(1, .take, 0, 2)  // waits on launch
            p.send(0, .put, once: 1, 0, 2, 1)  // handed over with q1: written first
            p.send(1, .take, 1, 2)
            p.send(1, .take, 1, 2)  // the one handed a value waits no more
            p.disconnect(0)
            p.add(.storage(flags: 0))
        },
    ]

    /// Writes each program as a file named after it; false after printing a failure.
    static func write(to folder: String) -> Bool {
        for seed in all {
            let path = "\(folder)/\(seed.name)"
            guard let file = fopen(path, "wb") else {
                print("cannot write \(path)")
                return false
            }
            let written = seed.program.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
            fclose(file)
            guard written == seed.program.count else {
                print("cannot write \(path)")
                return false
            }
        }
        print("wrote \(all.count) seed programs to \(folder)")
        return true
    }
}
