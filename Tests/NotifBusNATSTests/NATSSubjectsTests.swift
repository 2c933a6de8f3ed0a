// The NATS bridge's pure parts: reading inbound subjects and bodies into posts, puts or
// dead-letter reasons, splitting invoke subjects, and device ids. No NATS, no broker.
import NotifBusNATS
import NotifBusProtocol
import Testing

@Suite struct NATSSubjectsTests {
    let s = NATSSubjects(device: "d1")

    @Test func postAndPutForms() {
        #expect(
            s.classify(subject: "notifbus.d1.post.mail.sync", msgID: "m", body: Array(#"{"n":1}"#.utf8))
                == .success(.post(event: "mail.sync", payload: ["n": 1])))
        #expect(s.classify(subject: "notifbus.d1.post.ping", msgID: "m", body: []) == .success(.post(event: "ping", payload: .null)))
        #expect(
            s.classify(subject: "notifbus.d1.put.launch", msgID: "m", body: Array("null".utf8))
                == .success(.put(slot: "launch", value: .null)))
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
        #expect(code("notifbus.d1.put.notifbus-bridge.nats.d1", "m", "{}") == "reserved_slot")
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

    @Test func deviceIDs() {
        #expect(NATSSubjects.isValidDevice("laptop-2_x"))
        #expect(!NATSSubjects.isValidDevice(""))
        #expect(!NATSSubjects.isValidDevice("a.b"))
        #expect(!NATSSubjects.isValidDevice("a*"))
        #expect(!NATSSubjects.isValidDevice(String(repeating: "a", count: 65)))
    }
}
