// The notification profile without sockets: payload schemas, category sets, action rules,
// presentation options and launch retention.
import NotifBusProtocol
import Testing

let inviteAndMessage =
    #"[{"identifier":"INVITE","options":[],"actions":[{"identifier":"ACCEPT","title":"Accept","options":["foreground"]},{"identifier":"DECLINE","title":"Decline","options":["destructive"]}]},{"identifier":"MESSAGE","options":["customDismissAction","hiddenPreviewsShowTitle"],"actions":[{"identifier":"REPLY","title":"Reply","options":[],"textInput":{"buttonTitle":"Send","placeholder":"Message"}}]}]"#

func click(_ action: String, category: String?, text: String? = nil, id: Int = 1) -> String {
    let categoryField = category.map { ",\"categoryIdentifier\":\"\($0)\"" } ?? ""
    let textField = text.map { ",\"userText\":\"\($0)\"" } ?? ""
    return
        "{\"op\":\"post\",\"id\":\(id),\"name\":\"didReceive\",\"payload\":{\"actionIdentifier\":\"\(action)\"\(textField),\"notification\":{\"identifier\":\"n\(id)\",\"content\":{\"title\":\"t\"\(categoryField),\"userInfo\":{\"emailId\":\"e-\(id)\"}}}}}"
}

@Suite struct ProfileTests {
    static let defaultAction = ProfilePayload.defaultActionIdentifier
    static let dismissAction = ProfilePayload.dismissActionIdentifier

    @Test func categoriesRoundTripExactly() {
        var h = CoreHarness()
        let c = h.connect()
        #expect(h.request(c, #"{"op":"getCategories","id":1}"#)["result"] == ["categories": []])
        #expect(h.request(c, "{\"op\":\"setCategories\",\"id\":2,\"categories\":\(inviteAndMessage)}")["result"] == ["count": 2])
        h.send(c, #"{"op":"getCategories","id":3}"#)
        #expect(h.take(c).raw == "{\"op\":\"reply\",\"id\":3,\"result\":{\"categories\":\(inviteAndMessage)}}")
    }

    @Test func rejectedCategorySetsLeaveTheOldOne() {
        var h = CoreHarness()
        let c = h.connect()
        _ = h.request(c, "{\"op\":\"setCategories\",\"id\":1,\"categories\":\(inviteAndMessage)}")
        let bad = [
            #"[{"identifier":"A"}]"#,
            #"[{"identifier":"A","actions":[],"options":["nope"]}]"#,
            #"[{"identifier":"A","actions":[],"colour":"red"}]"#,
            #"[{"identifier":"A","actions":[]},{"identifier":"A","actions":[]}]"#,
            #"[{"identifier":"A","actions":[{"identifier":"X","title":"x"},{"identifier":"X","title":"y"}]}]"#,
            #"[{"identifier":"A","actions":[{"identifier":"X"}]}]"#,
            #"[{"identifier":"A","actions":[{"identifier":"X","title":"x","options":["background"]}]}]"#,
            #"[{"identifier":"A","actions":[{"identifier":"X","title":"x","textInput":{"placeholder":"p"}}]}]"#,
            #"[{"identifier":"A","actions":[{"identifier":"X","title":"x","textInput":{"buttonTitle":"b","extra":1}}]}]"#,
            #"[{"identifier":"","actions":[]}]"#,
            #"[{"identifier":"A","actions":[],"intentIdentifiers":[""]}]"#,
            #"{"identifier":"A"}"#,
        ]
        for set in bad {
            #expect(errorCode(h.request(c, "{\"op\":\"setCategories\",\"id\":2,\"categories\":\(set)}")) == "bad_request", "\(set)")
        }
        h.send(c, #"{"op":"getCategories","id":3}"#)
        #expect(h.take(c).raw.contains(inviteAndMessage))
        #expect(
            h.request(c, #"{"op":"setCategories","id":4,"categories":[{"identifier":"A","actions":[],"options":null,"intentIdentifiers":["x"]}]}"#)[
                "result"] == ["count": 1])
    }

    @Test func payloadSchemas() {
        var h = CoreHarness()
        let c = h.connect()
        let bad = [
            #"{"op":"post","id":1,"name":"willPresent"}"#,
            #"{"op":"post","id":1,"name":"willPresent","payload":{}}"#,
            #"{"op":"post","id":1,"name":"willPresent","payload":{"notification":{"content":{}}}}"#,
            #"{"op":"post","id":1,"name":"willPresent","payload":{"notification":{"identifier":"n"}}}"#,
            #"{"op":"post","id":1,"name":"willPresent","payload":{"notification":{"identifier":"n","content":{"badge":"1"}}}}"#,
            #"{"op":"post","id":1,"name":"willPresent","payload":{"notification":{"identifier":"n","content":{"badge":1.5}}}}"#,
            #"{"op":"post","id":1,"name":"willPresent","payload":{"notification":{"identifier":"n","source":"push","content":{}}}}"#,
            #"{"op":"post","id":1,"name":"willPresent","payload":{"notification":{"identifier":"n","content":{"userInfo":[]}}}}"#,
            #"{"op":"post","id":1,"name":"didReceive","payload":{"notification":{"identifier":"n","content":{}}}}"#,
            #"{"op":"post","id":1,"name":"didReceive","payload":{"actionIdentifier":1,"notification":{"identifier":"n","content":{}}}}"#,
            #"{"op":"post","id":1,"name":"didReceive","payload":{"actionIdentifier":"a","userText":5,"notification":{"identifier":"n","content":{}}}}"#,
            #"{"op":"post","id":1,"name":"openSettings","payload":{"notification":5}}"#,
            #"{"op":"post","id":1,"name":"openSettings","payload":[]}"#,
        ]
        for text in bad { #expect(errorCode(h.request(c, text)) == "invalid_payload", "\(text)") }
        let good = [
            #"{"op":"post","id":1,"name":"openSettings"}"#,
            #"{"op":"post","id":1,"name":"openSettings","payload":{"notification":null}}"#,
            #"{"op":"post","id":1,"name":"willPresent","payload":{"notification":{"identifier":"n","source":"remote","content":{"title":"t","subtitle":null,"badge":3,"userInfo":{"a":1},"sound":"default"}}}}"#,
        ]
        for text in good { #expect(h.request(c, text)["result"]?["outcome"] == "unhandled", "\(text)") }
        #expect(h.request(c, #"{"op":"status","id":1}"#)["result"]?["counters"]?["posted"] == 3)
    }

    @Test func actionRules() {
        var h = CoreHarness()
        let c = h.connect()
        _ = h.request(c, "{\"op\":\"setCategories\",\"id\":1,\"categories\":\(inviteAndMessage)}")
        let invalid = [
            click(ProfileTests.dismissAction, category: "INVITE"),  // no customDismissAction
            click(ProfileTests.dismissAction, category: nil),
            click("ACCEPT", category: "MESSAGE"),  // not that category's action
            click("ACCEPT", category: nil),
            click("ACCEPT", category: "UNKNOWN"),
            click("REPLY", category: "MESSAGE"),  // text input needs userText
            click("ACCEPT", category: "INVITE", text: "hi"),  // no text input
            click(ProfileTests.defaultAction, category: "MESSAGE", text: "hi"),
        ]
        for text in invalid { #expect(errorCode(h.request(c, text)) == "invalid_action", "\(text)") }
        let valid = [
            click(ProfileTests.dismissAction, category: "MESSAGE"),
            click("REPLY", category: "MESSAGE", text: "on my way"),
            click("DECLINE", category: "INVITE"),
        ]
        for text in valid {
            let r = h.request(c, text)["result"]
            #expect(r?["outcome"] == "unhandled" && r?["retained"] == .null, "\(text)")
        }
        #expect(h.request(c, #"{"op":"peek","id":1,"slot":"launch"}"#)["result"] == .null)
    }

    @Test func launchRetentionForForegroundAndDefaultOnly() {
        var h = CoreHarness()
        let c = h.connect()
        _ = h.request(c, "{\"op\":\"setCategories\",\"id\":1,\"categories\":\(inviteAndMessage)}")
        var r = h.request(c, click("ACCEPT", category: "INVITE", id: 11))
        #expect(r["result"]?["retained"] == "launch")
        #expect(h.request(c, #"{"op":"peek","id":2,"slot":"launch"}"#)["result"]?["notification"]?["content"]?["userInfo"] == ["emailId": "e-11"])
        r = h.request(c, click(ProfileTests.defaultAction, category: nil, id: 12))
        #expect(r["result"]?["retained"] == "launch")
        // A newer launching click overwrites the older one; take returns it once.
        #expect(h.request(c, #"{"op":"take","id":3,"slot":"launch"}"#)["result"]?["notification"]?["identifier"] == "n12")
        #expect(h.request(c, #"{"op":"take","id":4,"slot":"launch"}"#)["result"] == .null)
        // Handled clicks are not retained.
        let o = h.connect()
        _ = h.subscribe(o, ["didReceive"])
        h.send(c, click(ProfileTests.defaultAction, category: nil, id: 13))
        let ev = h.expectEvent(o)
        h.send(o, "{\"op\":\"complete\",\"event\":\(ev.event)}")
        #expect(h.take(c).frame["result"]?["retained"] == .null)
    }

    @Test func launchRetentionUsesCategoriesInForceWhenPosted() {
        var h = CoreHarness()
        let c = h.connect(), o = h.connect()
        _ = h.subscribe(o, ["didReceive"])
        _ = h.request(c, "{\"op\":\"setCategories\",\"id\":1,\"categories\":\(inviteAndMessage)}")
        h.send(c, click("ACCEPT", category: "INVITE", id: 21))
        let ev = h.expectEvent(o)
        _ = h.request(c, #"{"op":"setCategories","id":2,"categories":[]}"#)
        h.send(o, "{\"op\":\"next\",\"event\":\(ev.event)}")
        #expect(h.take(c).frame["result"]?["retained"] == "launch")
    }

    @Test func retentionWakesAWaitingTaker() {
        var h = CoreHarness()
        let app = h.connect(), source = h.connect()
        h.send(app, #"{"op":"take","id":"launch?","slot":"launch","wait":3000}"#)
        let r = h.request(source, click(ProfileTests.defaultAction, category: nil, id: 31))
        #expect(r["result"]?["retained"] == "launch")
        #expect(h.take(app).frame["result"]?["notification"]?["identifier"] == "n31")
        #expect(h.request(app, #"{"op":"peek","id":1,"slot":"launch"}"#)["result"] == .null)
    }
}
