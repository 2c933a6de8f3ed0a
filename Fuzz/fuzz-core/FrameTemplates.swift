// The frames a fuzz-core program sends: requests built from templates whose fields come from
// small pools (so that names collide and keys replace each other), answers and returns, with
// fuzz-chosen ids and numbers. Templates write JSON text; the broker sees only the bytes.

/// The request templates, numbered as a program selects them (`template % 16`).
enum Template: UInt8, CaseIterable {
    case hello, ping, subscribe, unsubscribe, post, handle, unhandle, invoke, put, take, peek
    case setCategories, getCategories, status, monitor
    /// Unknown op, missing op, an unknown field, or a field the op refuses.
    case junk
}

enum FrameTemplates {
    static let events = ["a", "b", "willPresent", "didReceive", "openSettings"]
    static let postNames = ["a", "b", "willPresent", "didReceive", "openSettings", "nobody"]
    static let keys: [String?] = [nil, "k1", "k2", nil]
    static let priorities: [Int64?] = [nil, 0, 10, 10, -5, 100, Int64(Int32.max), Int64(Int32.min)]
    static let channels = ["ch", "ci"]
    static let methods: [String?] = [nil, nil, "m", "n"]
    static let slots = ["launch", "s1", "s2"]
    static let categoryIDs = ["INVITE", "MESSAGE", "NONE"]
    /// Idempotency keys: few, so that requests repeat one another and collide.
    static let onceKeys = ["q0", "q1", "q2"]

    /// The `once` member (JSON text) a request's template byte picks: none for `t / 16`
    /// below 8, an empty key (refused) for 15, else one of `onceKeys`.
    static func onceKey(_ template: UInt8) -> String? {
        let k = template / 16
        if k < 8 { return nil }
        if k == 15 { return "\"\"" }
        return "\"\(onceKeys[Int(k) % onceKeys.count])\""
    }
    static let defaultAction = "com.apple.UNNotificationDefaultActionIdentifier"
    static let dismissAction = "com.apple.UNNotificationDismissActionIdentifier"

    /// Category sets: the spec's example (INVITE launches on ACCEPT, MESSAGE has text input
    /// and a custom dismiss action), none, a refused one, and one without foreground actions.
    static let categorySets = [
        #"[{"identifier":"INVITE","options":[],"actions":[{"identifier":"ACCEPT","title":"Accept","options":["foreground"]},{"identifier":"DECLINE","title":"Decline","options":["destructive"]}]},{"identifier":"MESSAGE","options":["customDismissAction"],"actions":[{"identifier":"REPLY","title":"Reply","options":[],"textInput":{"buttonTitle":"Send","placeholder":"Message"}}]}]"#,
        "[]",
        #"[{"identifier":"INVITE","actions":[]},{"identifier":"INVITE","actions":[]}]"#,
        #"[{"identifier":"INVITE","actions":[{"identifier":"ACCEPT","title":"Accept"}]}]"#,
    ]

    /// A request id: mostly fresh integers, some fresh strings (escaped or long), and a few
    /// unusable ones, which the broker must answer with an error frame instead.
    static func id(_ choice: UInt8, serial: Int) -> String? {
        switch choice {
        case 0..<200: return "\(serial)"
        case 200..<220: return "\"s\(serial)\""
        case 220..<230: return "\"\\u0073\\t\(serial)\""
        case 230..<240: return "\"\(String(repeating: "x", count: 240))\(serial)\""
        default: return [nil, "null", "-1", "1.5", "\"\"", "9007199254740992", "true", "[1]"][Int(choice) % 8]
        }
    }

    /// A request body. `observers` and `handlers` are ids the program has seen, to aim at.
    static func request(
        _ template: UInt8, id: String?, a: UInt8, b: UInt8, c: UInt8,
        observers: [Int], handlers: [Int]
    ) -> String {
        var fields: [String] = []
        func op(_ name: String) { fields.append("\"op\":\"\(name)\"") }
        func add(_ key: String, _ json: String?) { if let json { fields.append("\"\(key)\":\(json)") } }
        func string(_ s: String?) -> String? { s.map { "\"\($0)\"" } }

        let once = onceKey(template)
        switch Template(rawValue: template % 16)! {
        case .hello:
            op("hello")
            add("protocol", ["1", "1", "1", "2", "0", "\"1\"", "1.0", "null"][Int(a % 8)])
            if b % 3 != 0 { add("name", string("n\(b)")) }
        case .ping:
            op("ping")
        case .subscribe:
            op("subscribe")
            let chosen = events.indices.filter { a & (1 << $0) != 0 }.map { "\"\(events[$0])\"" }
            add("events", "[\(chosen.joined(separator: ","))]")
            add("priority", priorities[Int(b % 8)].map(String.init))
            add("key", c % 8 == 3 ? "null" : string(keys[Int(c % 4)]))
        case .unsubscribe:
            op("unsubscribe")
            let observer = observers.isEmpty ? "o\(b)" : "o\(observers[Int(b) % observers.count])"
            switch a % 4 {
            case 0: add("observer", string(observer))
            case 1: add("key", string(keys[Int(c % 4)] ?? "k1"))
            case 2:
                add("observer", string(observer))
                add("key", string("k1"))
            default: break
            }
        case .post:
            op("post")
            let name = postNames[Int(a) % postNames.count]
            add("name", string(name))
            // The key before the payload, as the clients write it, or after it.
            if template & 16 == 0 { add("once", once) }
            add("payload", payload(b, c))
            if template & 16 != 0 { add("once", once) }
        case .handle:
            op("handle")
            add("channel", string(channels[Int(a % 2)]))
            add("method", b % 4 == 1 ? "null" : string(methods[Int(b % 4)]))
        case .unhandle:
            op("unhandle")
            add("handler", string(handlers.isEmpty ? "h\(b)" : "h\(handlers[Int(b) % handlers.count])"))
        case .invoke:
            op("invoke")
            add("channel", string(channels[Int(a % 2)]))
            add("method", string(["m", "n", "x"][Int(b % 3)]))
            add("arguments", [nil, "null", "\(c)", "{\"k\":[\(c)]}"][Int(c % 4)])
        case .put:
            op("put")
            add("slot", string(slots[Int(a % 3)]))
            switch b % 5 {
            case 0: add("value", "null")
            case 1: add("value", "\(c)")
            case 2: add("value", "{\"v\":\"\(c)\"}")
            case 3: add("value", string(String(repeating: "v", count: Int(c))))
            default: break
            }
            add("once", once)
        case .take:
            op("take")
            add("slot", string(slots[Int(a % 3)]))
            add("wait", [nil, "0", "10", "100", "600000", "600001"][Int(b % 6)])
            add("once", once)
        case .peek:
            op("peek")
            add("slot", string(slots[Int(a % 3)]))
        case .setCategories:
            op("setCategories")
            add("categories", categorySets[Int(a) % categorySets.count])
            add("once", once)
        case .getCategories:
            op("getCategories")
        case .status:
            op("status")
        case .monitor:
            op("monitor")
        case .junk:
            switch a % 4 {
            case 0: op("frobnicate")
            case 1: break
            case 2:
                op("ping")
                add("extra", "\(b)")
            default:
                op("subscribe")
                add("events", "[\"a\",\"a\"]")
            }
        }
        add("id", id)
        return "{" + fields.joined(separator: ",") + "}"
    }

    /// A post payload: absent, plain values, and notification-profile payloads that are
    /// valid, or break the schema, or name actions the categories may not hold.
    static func payload(_ choice: UInt8, _ c: UInt8) -> String? {
        let category = categoryIDs[Int(c) % categoryIDs.count]
        func notification(_ content: String) -> String {
            "{\"identifier\":\"n\(c)\",\"source\":\"remote\",\"content\":\(content)}"
        }
        func response(_ action: String, category: String, userText: String? = nil) -> String {
            let text = userText.map { ",\"userText\":\"\($0)\"" } ?? ""
            return
                "{\"actionIdentifier\":\"\(action)\"\(text),\"notification\":\(notification("{\"categoryIdentifier\":\"\(category)\",\"userInfo\":{\"c\":\(c)}}"))}"
        }
        switch choice % 12 {
        case 0: return nil
        case 1: return "{}"
        case 2: return "\(c)"
        case 3: return "{\"notification\":\(notification("{\"title\":\"t\",\"badge\":\(c)}"))}"
        case 4: return response(defaultAction, category: category)
        case 5: return response(dismissAction, category: category)
        case 6: return response("ACCEPT", category: "INVITE")
        case 7: return response("DECLINE", category: "INVITE")
        case 8: return response("REPLY", category: "MESSAGE", userText: "hi")
        case 9: return response("REPLY", category: "MESSAGE")
        case 10: return "{\"notification\":null}"
        default: return "{\"notification\":\(c)}"
        }
    }

    /// An answer to `event`: kinds 0 to 7 are next, stop, complete without a value, a valid
    /// willPresent completion, an invalid one, complete with null, a malformed next, and a
    /// next for another event.
    static func answer(event: Int64, kind: UInt8) -> String {
        switch kind % 8 {
        case 0: return "{\"op\":\"next\",\"event\":\(event)}"
        case 1: return "{\"op\":\"stop\",\"event\":\(event)}"
        case 2: return "{\"op\":\"complete\",\"event\":\(event)}"
        case 3: return "{\"op\":\"complete\",\"event\":\(event),\"value\":[\"banner\",\"sound\"]}"
        case 4: return "{\"op\":\"complete\",\"event\":\(event),\"value\":{\"x\":[1,2]}}"
        case 5: return "{\"op\":\"complete\",\"event\":\(event),\"value\":null}"
        case 6: return "{\"op\":\"next\",\"event\":\(event).0}"
        default: return "{\"op\":\"next\",\"event\":\(event &+ 1)}"
        }
    }

    /// A return for `call`: kinds 0 to 5 are a result, a null result, an error, an error with
    /// details, a malformed return with both, and a result with an unknown field.
    static func callReturn(call: Int64, kind: UInt8) -> String {
        switch kind % 6 {
        case 0: return "{\"op\":\"return\",\"call\":\(call),\"result\":{\"r\":\(call)}}"
        case 1: return "{\"op\":\"return\",\"call\":\(call),\"result\":null}"
        case 2: return "{\"op\":\"return\",\"call\":\(call),\"error\":{\"code\":\"oops\",\"message\":\"m\"}}"
        case 3: return "{\"op\":\"return\",\"call\":\(call),\"error\":{\"code\":\"not_implemented\",\"message\":\"m\",\"details\":null}}"
        case 4: return "{\"op\":\"return\",\"call\":\(call),\"result\":1,\"error\":{\"code\":\"x\",\"message\":\"m\"}}"
        default: return "{\"op\":\"return\",\"call\":\(call),\"result\":1,\"extra\":true}"
        }
    }
}
