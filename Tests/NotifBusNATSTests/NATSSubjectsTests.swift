// The NATS bridge's pure parts: reading inbound subjects and bodies into posts, puts or
// dead-letter reasons (bodies kept as their bytes), keys, splitting invoke subjects, and
// device ids. No NATS, no broker.
import NotifBusNATS
import NotifBusProtocol
import Testing

@Suite struct NATSSubjectsTests {
    let s = NATSSubjects(device: "d1")

    @Test func postAndPutForms() {
        let body = Array(" {\"n\":1e9, \"x\":[1.50]}\n".utf8)
        #expect(s.classify(subject: "notifbus.d1.post.mail.sync", msgID: "m", body: body) == .success(.post(event: "mail.sync", payload: body)))
        #expect(s.classify(subject: "notifbus.d1.post.ping", msgID: "m", body: []) == .success(.post(event: "ping", payload: nil)))
        #expect(
            s.classify(subject: "notifbus.d1.put.launch", msgID: "m", body: Array("null".utf8))
                == .success(.put(slot: "launch", value: Array("null".utf8))))
        // Deeper than a tree parse goes: the broker takes it, so the bridge does not judge it.
        let deep = Array(String(repeating: "[", count: 2000).utf8) + Array(String(repeating: "]", count: 2000).utf8)
        #expect(s.classify(subject: "notifbus.d1.put.deep", msgID: "m", body: deep) == .success(.put(slot: "deep", value: deep)))
    }

    @Test func keysFromMessageIDs() {
        #expect(s.onceKey("push-7f3a") == "nats/d1/push-7f3a")
        let longest = String(repeating: "i", count: s.maxMsgIDBytes)
        #expect(s.onceKey(longest).utf8.count == 256)
        #expect(s.classify(subject: "notifbus.d1.post.x", msgID: longest, body: []) == .success(.post(event: "x", payload: nil)))
        let wide = NATSSubjects(device: String(repeating: "d", count: 64))
        #expect(wide.maxMsgIDBytes == 186)
    }

    @Test func deadLetterReasonsInOrder() {
        func code(_ subject: String, _ id: String?, _ body: String) -> String? {
            if case .failure(let r) = s.classify(subject: subject, msgID: id, body: Array(body.utf8)) { return r.code }
            return nil
        }
        #expect(code("notifbus.d1.take.x", nil, "{") == "no_msg_id")
        #expect(code("notifbus.d1.post.x", "", "{}") == "no_msg_id")
        #expect(code("notifbus.d1.take.x", "m", "{") == "unknown_subject")
        #expect(code("notifbus.d2.post.x", "m", "{}") == "unknown_subject")
        #expect(code("notifbus.d1.post." + String(repeating: "a", count: 257), "m", "{}") == "bad_name")
        #expect(code("notifbus.d1.take.x", String(repeating: "i", count: 249), "{") == "long_msg_id")
        #expect(code("notifbus.d1.put.notifbus-bridge.nats.d1", "m", "{}") == nil)
        #expect(code("notifbus.d1.post.x", "m", "{oops") == "bad_json")
        #expect(code("notifbus.d1.put.x", "m", "") == "bad_json")
        #expect(code("notifbus.d1.post.x", "m", "1 2") == "bad_json")
    }

    @Test func invokeSubjects() {
        #expect(s.invokeTarget("notifbus.d1.invoke.mail.actions.archive")! == ("mail.actions", "archive"))
        #expect(s.invokeTarget("notifbus.d1.invoke.chan.m")! == ("chan", "m"))
        #expect(s.invokeTarget("notifbus.d1.invoke.onlyone") == nil)
        #expect(s.invokeTarget("notifbus.d2.invoke.a.b") == nil)
    }

    @Test func sharedLayout() {
        let shared = NATSSubjects(device: "d1", layout: .shared)
        #expect(shared.classify(subject: "notifbus.d1.in.post.mail.sync", msgID: "m", body: []) == .success(.post(event: "mail.sync", payload: nil)))
        #expect(
            shared.classify(subject: "notifbus.d1.in.put.launch", msgID: "m", body: Array("1".utf8))
                == .success(.put(slot: "launch", value: Array("1".utf8))))
        // The per-device form, and another device's, are not this device's in the shared layout.
        for subject in ["notifbus.d1.post.mail", "notifbus.d2.in.post.mail", "notifbus.d1.in.take.x"] {
            guard case .failure(let r) = shared.classify(subject: subject, msgID: "m", body: []) else {
                Issue.record("\(subject) was taken")
                continue
            }
            #expect(r.code == "unknown_subject")
        }
        #expect(shared.inboundSubjects == ["notifbus.*.in.>"])
        #expect(shared.consumerFilter == "notifbus.d1.in.>")
        #expect(shared.outboundSubjects == ["notifbus.*.result", "notifbus.*.dead", "notifbus.*.event.>"])
        #expect(shared.result == "notifbus.d1.result" && shared.onceKey("x") == "nats/d1/x")
        #expect(s.consumerFilter == nil && s.inboundSubjects == ["notifbus.d1.post.>", "notifbus.d1.put.>"])
    }

    @Test func deviceIDs() {
        #expect(NATSSubjects.isValidDevice("laptop-2_x"))
        #expect(!NATSSubjects.isValidDevice(""))
        #expect(!NATSSubjects.isValidDevice("a.b"))
        #expect(!NATSSubjects.isValidDevice("a*"))
        #expect(!NATSSubjects.isValidDevice(String(repeating: "a", count: 65)))
    }
}
