// The desktop bridge's rules without D-Bus: the exact Notify arguments for each kind of
// category and server, and the delivery table's one-answer-per-notification rule.
import NotifBusClient
import NotifBusDesktop
import NotifBusProtocol
import Testing

@Suite struct DesktopMappingTests {
    static let message = NotificationCategory(
        identifier: "MESSAGE",
        actions: [
            TextInputNotificationAction(identifier: "REPLY", title: "Reply", textInputButtonTitle: "Send", textInputPlaceholder: "Message"),
            NotificationAction(identifier: "DELETE", title: "Delete", options: [.destructive]),
        ],
        options: [.customDismissAction])

    static let mail = NotifBusClient.Notification(
        identifier: "m1",
        content: NotificationContent(
            title: "Ana", subtitle: "Lunch", body: "Friday <12:30>?",
            categoryIdentifier: "MESSAGE", threadIdentifier: "ana",
            userInfo: ["secret": "x"], badge: 3, sound: "message-new-instant"))

    @Test func inlineReplyWhereAdvertised() {
        let a = NotifyArguments(
            notification: Self.mail, category: Self.message, options: [.banner, .sound],
            capabilities: ["actions", "body", "inline-reply"], appName: "mail", replacesID: 0)
        #expect(
            a.description == """
                ("mail", 0, "", "Ana", "Lunch\\nFriday <12:30>?", ["default", "Open", "inline-reply", "Reply", "DELETE", "Delete"], \
                {"sound-name": <string "message-new-instant">, "urgency": <byte 1>, "x-dunst-stack-tag": <string "ana">, \
                "x-kde-reply-placeholder-text": <string "Message">, "x-kde-reply-submit-button-text": <string "Send">}, -1)
                """)
        #expect(a.routes["inline-reply"] == .inlineReply("REPLY"))
        #expect(!a.description.contains("secret"))
    }

    @Test func textButtonFallbackMarkupAndSilence() {
        let a = NotifyArguments(
            notification: Self.mail, category: Self.message, options: [.banner],
            capabilities: ["actions", "body", "body-markup"], appName: "mail", replacesID: 7)
        #expect(a.actions == ["default", "Open", "REPLY", "Reply", "DELETE", "Delete"])
        #expect(a.routes["REPLY"] == .textInputButton("REPLY"))
        #expect(a.body == "Lunch\nFriday &lt;12:30&gt;?")
        #expect(a.replacesID == 7)
        #expect(a.hints.contains { $0.name == "suppress-sound" && $0.value == .bool(true) })
        #expect(!a.hints.contains { $0.name == "sound-name" })
    }

    @Test func noActionsWithoutTheCapability() {
        let a = NotifyArguments(
            notification: Self.mail, category: Self.message, options: [.list],
            capabilities: ["body"], appName: "mail", replacesID: 0)
        #expect(a.actions.isEmpty)
        #expect(a.routes.isEmpty)
    }

    /// A category action named like a key the bridge uses itself gets a key of its own: a
    /// click on the body stays the default action, and the reply field stays the reply.
    @Test func actionsNamedLikeTheBridgesKeysGetTheirOwnKeys() {
        let clash = NotificationCategory(
            identifier: "CLASH",
            actions: [
                NotificationAction(identifier: "default", title: "Mark default"),
                NotificationAction(identifier: "inline-reply", title: "Not a reply"),
                NotificationAction(identifier: "action:default", title: "Prefixed"),
                TextInputNotificationAction(identifier: "REPLY", title: "Reply", textInputButtonTitle: "Send", textInputPlaceholder: nil),
            ])
        let a = NotifyArguments(
            notification: Self.mail, category: clash, options: [.banner],
            capabilities: ["actions", "inline-reply"], appName: "mail", replacesID: 0)
        #expect(
            a.actions == [
                "default", "Open", "action:default", "Mark default", "action:inline-reply", "Not a reply",
                "action:action:default", "Prefixed", "inline-reply", "Reply",
            ])
        #expect(
            a.routes == [
                "default": .defaultAction, "action:default": .action("default"),
                "action:inline-reply": .action("inline-reply"), "action:action:default": .action("action:default"),
                "inline-reply": .inlineReply("REPLY"),
            ])
        var t = DeliveryTable()
        t.record(Self.mail, desktopId: 3, category: clash, routes: a.routes)
        #expect(t.actionInvoked(desktopId: 3, key: "default")?.actionIdentifier == NotificationResponse.defaultActionIdentifier)
        t.record(Self.mail, desktopId: 4, category: clash, routes: a.routes)
        #expect(t.actionInvoked(desktopId: 4, key: "action:default")?.actionIdentifier == "default")
    }

    /// The Swift client reads the channel's results strictly: an id outside `u`'s range is
    /// an error, not a wrapped number.
    @Test func resultsReadStrictly() throws {
        let ok = try NotificationDelivery(json: ["presented": true, "options": ["banner"], "desktopId": 4_294_967_295])
        #expect(ok.desktopId == 4_294_967_295 && ok.options == .banner)
        #expect(try NotificationDelivery(json: ["presented": false, "options": [], "desktopId": .null]).desktopId == nil)
        for bad: JSONValue in [-1, 4_294_967_296] {
            #expect(throws: NotificationDecodingError.self) {
                try NotificationDelivery(json: ["presented": true, "options": ["banner"], "desktopId": bad])
            }
            #expect(throws: NotificationDecodingError.self) {
                try DeliveredNotification(json: ["notification": Self.mail.jsonValue, "desktopId": bad])
            }
        }
        #expect(throws: NotificationDecodingError.self) {
            try NotificationServerInfo(json: ["name": "n", "vendor": "v", "version": "1", "specVersion": "1.2", "capabilities": ["actions", 3]])
        }
    }

    func table() -> (DeliveryTable, NotifyArguments) {
        var t = DeliveryTable()
        let a = NotifyArguments(
            notification: Self.mail, category: Self.message, options: [.banner],
            capabilities: ["actions", "inline-reply"], appName: "mail", replacesID: 0)
        t.record(Self.mail, desktopId: 5, category: Self.message, routes: a.routes)
        return (t, a)
    }

    @Test func oneAnswerPerNotification() {
        var (t, _) = table()
        let r = t.actionInvoked(desktopId: 5, key: "DELETE")
        #expect(r?.actionIdentifier == "DELETE")
        #expect(r?.notification.content.userInfo["secret"] == "x")
        #expect(t.closed(desktopId: 5, reason: 2) == nil)
        #expect(t.actionInvoked(desktopId: 5, key: "default") == nil)
        #expect(t.count == 0)
    }

    @Test func replyAndDismissAndOtherCloses() {
        var (t, a) = table()
        #expect(t.actionInvoked(desktopId: 5, key: "inline-reply") == nil)
        let r = t.replied(desktopId: 5, text: "yes")
        #expect(r?.actionIdentifier == "REPLY" && r?.userText == "yes")
        #expect(t.replied(desktopId: 5, text: "again") == nil)
        t.record(Self.mail, desktopId: 6, category: Self.message, routes: a.routes)
        #expect(t.closed(desktopId: 6, reason: 2)?.actionIdentifier == NotificationResponse.dismissActionIdentifier)
        t.record(Self.mail, desktopId: 7, category: Self.message, routes: a.routes)
        #expect(t.closed(desktopId: 7, reason: 1) == nil)
        #expect(t.count == 0)
        t.record(Self.mail, desktopId: 8, category: nil, routes: a.routes)
        #expect(t.closed(desktopId: 8, reason: 2) == nil)
        _ = a
    }

    @Test func sameIdentifierReplacesAndCapacityHolds() {
        var (t, a) = table()
        t.record(Self.mail, desktopId: 9, category: Self.message, routes: a.routes)
        #expect(t.count == 1 && t.desktopId(forIdentifier: "m1") == 9)
        var small = DeliveryTable(capacity: 2)
        for i in 1...3 {
            let n = NotifBusClient.Notification(identifier: "n\(i)")
            small.record(n, desktopId: UInt32(i), category: nil, routes: a.routes)
        }
        #expect(small.delivered.map(\.desktopId) == [2, 3])
        #expect(small.remove(identifiers: ["n3", "nope"]).map(\.desktopId) == [3])
        #expect(small.reset() == 1)
    }
}

@Suite struct NULTextTests {
    @Test func everyContentTextThatGoesOnTheBusIsNamed() {
        let fields: [(String, (inout NotificationContent) -> Void)] = [
            ("content.title", { $0.title = "before\u{0}after" }),
            ("content.subtitle", { $0.subtitle = "\u{0}" }),
            ("content.body", { $0.body = "a\u{0}" }),
            ("content.sound", { $0.sound = "bell\u{0}" }),
            ("content.threadIdentifier", { $0.threadIdentifier = "t\u{0}1" }),
        ]
        for (name, change) in fields {
            var content = NotificationContent(title: "Ana", body: "Lunch")
            change(&content)
            #expect(NotifyArguments.fieldWithNUL(in: content) == name)
        }
        // userInfo never goes on the bus: a NUL there is the app's own business.
        #expect(NotifyArguments.fieldWithNUL(in: NotificationContent(title: "Ana", userInfo: ["k": "a\u{0}b"])) == nil)
    }

    @Test func categoryTextsAreNamedWithTheirAction() {
        let reply = { (button: String, placeholder: String?) in
            NotificationCategory(
                identifier: "MESSAGE",
                actions: [
                    TextInputNotificationAction(identifier: "REPLY", title: "Reply", textInputButtonTitle: button, textInputPlaceholder: placeholder)
                ])
        }
        #expect(NotifyArguments.fieldWithNUL(in: reply("Send", "Message")) == nil)
        #expect(NotifyArguments.fieldWithNUL(in: reply("Se\u{0}nd", nil)) == "category MESSAGE action REPLY: textInput.buttonTitle")
        #expect(NotifyArguments.fieldWithNUL(in: reply("Send", "\u{0}")) == "category MESSAGE action REPLY: textInput.placeholder")
        let titled = NotificationCategory(identifier: "INVITE", actions: [NotificationAction(identifier: "ACCEPT", title: "Acc\u{0}ept")])
        #expect(NotifyArguments.fieldWithNUL(in: titled) == "category INVITE action ACCEPT: title")
        let keyed = NotificationCategory(identifier: "INVITE", actions: [NotificationAction(identifier: "ACC\u{0}EPT", title: "Accept")])
        #expect(NotifyArguments.fieldWithNUL(in: keyed) == "category INVITE action ACC\u{0}EPT: identifier")
    }
}
