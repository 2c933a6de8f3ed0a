// Invariants of one frame body: the message decoder agrees with the JSON tree and with the
// spec's rules (§3: field sets, id usability, the order checks run in), typed results carry
// exactly what the body says, the direct path agrees with the full decoder, and every tree
// survives encode → parse unchanged.
import FuzzDriver
import FuzzJSONView
import NotifBusProtocol

enum BodyCheck {
    /// Fields each request op accepts besides `op` and `id` (protocol-v1.md §3 with `once`
    /// of §3.8, and
    /// status's `page` from Protocol/PROTOCOL.md decision 31), restated here so that the
    /// decoder's own table is checked against the spec, not against itself.
    static let requestFields: [String: Set<String>] = [
        "hello": ["protocol", "name"], "ping": [], "subscribe": ["events", "priority", "key", "resume"],
        "unsubscribe": ["observer", "key"], "post": ["name", "payload", "once"], "handle": ["channel", "method", "resume"],
        "unhandle": ["handler"], "invoke": ["channel", "method", "arguments"], "put": ["slot", "value", "once"],
        "take": ["slot", "wait", "once"], "peek": ["slot"], "setCategories": ["categories", "once"], "getCategories": [],
        "status": ["page"], "monitor": [],
    ]
    /// Fields each answer accepts besides `op`.
    static let answerFields: [String: Set<String>] = [
        "next": ["event"], "complete": ["event", "value"], "stop": ["event"], "return": ["call", "result", "error"],
    ]
    static let profileEvents: Set<String> = ["willPresent", "didReceive", "openSettings"]
    static let presentationOptions: Set<String> = ["badge", "sound", "list", "banner", "alert"]

    static func run(_ body: [UInt8]) {
        let tree: JSONValue?
        var tooDeep = false
        do {
            tree = try JSONValue(parsing: body)
        } catch {
            tree = nil
            tooDeep = error.reason.hasPrefix("nesting deeper")
        }
        if let tree { checkRoundTrip(tree) }

        let decoded = MessageDecoder.decode(body)
        // The direct path, wherever it decodes, gives what the full decoder gives.
        body.withUnsafeBytes { buffer in
            guard let direct = MessageDecoder.decodeDirect(buffer) else { return }
            let full = MessageDecoder.decodeFull(buffer)
            if direct.summary != full.summary {
                violation("the direct path decodes \(direct.summary), the full decoder \(full.summary)")
            }
        }
        let view = JSONObjectView(body)
        if let mismatch = view?.kindMismatch() { violation(mismatch) }
        if case .badJSON(let reason) = decoded {
            if reason.isEmpty { violation("bad JSON without a reason") }
            if view != nil { violation("the decoder calls an object bad JSON: \(reason)") }
            if case .object? = tree { violation("the tree parser accepts an object the decoder calls bad JSON: \(reason)") }
            return
        }
        guard let view else { violation("the decoder accepted a body the scanner does not take for an object") }
        if tree == nil && !tooDeep { violation("the decoder accepted a body the tree parser rejects") }
        if let tree, tree.objectValue == nil { violation("the tree of an accepted body is not an object") }

        let op = view.string("op")
        switch decoded {
        case .badJSON:
            preconditionFailure("handled above")
        case .decoded(let inbound, let isHello):
            if isHello != (op == "hello") { violation("isHello is \(isHello) for op \(String(describing: op))") }
            switch inbound {
            case .request(let id, let request):
                guard let op, let allowed = requestFields[op] else { violation("a request decoded from op \(String(describing: op))") }
                if opName(request) != op { violation("op '\(op)' decoded as \(opName(request))") }
                if let key = view.firstOffendingKey(allowed: allowed.union(["op", "id"])) {
                    violation("a request with field '\(key)' was accepted")
                }
                checkID(id, against: view)
                checkRequest(request, view)
            case .answer(let answer):
                checkAnswer(answer, op: op, view)
            case .callReturn(let ret):
                checkReturn(ret, op: op, view)
            }
        case .rejected(let rejection, let isHello):
            if isHello != (op == "hello") { violation("isHello is \(isHello) for op \(String(describing: op))") }
            checkRejection(rejection, op: op, view)
        }
    }

    // MARK: Rejections and ids

    /// §3: answers are judged on their fields alone; requests on id, then op, then
    /// unknown op, then unknown or repeated fields, then the op's own fields.
    static func checkRejection(_ rejection: Rejection, op: String?, _ view: JSONObjectView) {
        if rejection.message.isEmpty { violation("a rejection without a message") }
        checkErrorFrame(rejection)
        if let op, let allowed = answerFields[op] {
            if rejection.id != nil { violation("an answer rejected with an id") }
            if rejection.reason != .malformed { violation("an answer rejected for \(rejection.reason)") }
            if let key = view.firstOffendingKey(allowed: allowed.union(["op"])), !rejection.message.contains("'\(key)'") {
                violation("an answer with field '\(key)' rejected for: \(rejection.message)")
            }
            return
        }
        guard let id = rejection.id else {
            if let usable = usableID(view) { violation("id \(usable) is usable but the rejection has none: \(rejection.message)") }
            if rejection.reason != .malformed || !rejection.message.contains("'id'") {
                violation("an unusable id rejected for \(rejection.reason): \(rejection.message)")
            }
            return
        }
        checkID(id, against: view)
        guard let op else {
            if rejection.reason != .malformed || !rejection.message.contains("'op'") {
                violation("a missing op rejected for \(rejection.reason): \(rejection.message)")
            }
            return
        }
        guard let allowed = requestFields[op] else {
            if rejection.reason != .unknownOp { violation("unknown op '\(op)' rejected for \(rejection.reason)") }
            return
        }
        if let key = view.firstOffendingKey(allowed: allowed.union(["op", "id"])) {
            if rejection.reason != .malformed || !rejection.message.contains("'\(key)'") {
                violation("field '\(key)' of '\(op)' rejected for \(rejection.reason): \(rejection.message)")
            }
            return
        }
        switch rejection.reason {
        case .malformed: break
        case .invalidPayload where op == "post" && view.string("name").map(profileEvents.contains) == true: break
        default: violation("'\(op)' rejected for \(rejection.reason): \(rejection.message)")
        }
    }

    /// The id as the spec defines a usable one: an integer literal in [0, 2^53) or a string
    /// of 1 to 256 bytes.
    static func usableID(_ view: JSONObjectView) -> JSONValue? {
        guard let member = view["id"], let value = member.value else { return nil }
        switch value {
        case .integer(let i) where i >= 0 && i < Limits.maxIntegerID && member.raw.first != UInt8(ascii: "-"):
            return value
        case .string(let s) where (1...Limits.maxStringIDBytes).contains(s.utf8.count):
            return value
        default:
            return nil
        }
    }

    /// The decoder's id is the body's id, and its echo in a reply reads back the same.
    static func checkID(_ id: RequestID, against view: JSONObjectView) {
        guard let expected = usableID(view) else { violation("id \(id) decoded from an unusable id") }
        let decoded: JSONValue
        switch id {
        case .integer(let i):
            decoded = .integer(i)
        case .string(let text):
            guard let v = try? JSONValue(parsing: Array("\"\(text)\"".utf8)) else { violation("string id \(text) is not JSON string text") }
            decoded = v
        }
        if decoded != expected { violation("id \(decoded) decoded from \(expected)") }
        var f = FrameBuilder()
        f.literal("{\"id\":")
        f.requestID(id)
        f.literal("}")
        let frame = f.finish()
        guard let echoed = try? JSONValue(parsing: frame[Limits.headerBytes...]), echoed["id"] == expected else {
            violation("id \(expected) echoes as \(String(decoding: frame[Limits.headerBytes...], as: UTF8.self))")
        }
    }

    /// An error frame built from the rejection parses back to the same reason and message.
    static func checkErrorFrame(_ rejection: Rejection) {
        var f = FrameBuilder()
        f.literal("{\"op\":\"reply\",\"id\":")
        f.requestID(rejection.id)
        f.literal(",\"error\":{\"code\":")
        f.string("\(rejection.reason)")
        f.literal(",\"message\":")
        f.string(rejection.message)
        f.literal("}}")
        let frame = f.finish()
        guard let reply = try? JSONValue(parsing: frame[Limits.headerBytes...]),
            reply["error"]?["message"] == .string(rejection.message),
            reply["error"]?["code"] == .string("\(rejection.reason)")
        else {
            violation("the error frame for \(rejection.message) does not read back")
        }
    }

    // MARK: Accepted messages

    static func opName(_ request: Request) -> String {
        switch request {
        case .hello: Op.hello
        case .ping: Op.ping
        case .subscribe: Op.subscribe
        case .unsubscribe: Op.unsubscribe
        case .post: Op.post
        case .handle: Op.handle
        case .unhandle: Op.unhandle
        case .invoke: Op.invoke
        case .put: Op.put
        case .take: Op.take
        case .peek: Op.peek
        case .setCategories: Op.setCategories
        case .getCategories: Op.getCategories
        case .status: Op.status
        case .monitor: Op.monitor
        case .keyed(_, let request): opName(request.request)
        }
    }

    static func checkRequest(_ request: Request, _ view: JSONObjectView) {
        // The key is checked as a name; the request under it as any other. Only the ops
        // that take a key can carry one (`KeyedRequest`).
        if case .keyed(let key, let inner) = request {
            checkName(key, "once", view)
            return checkRequest(inner.request, view)
        }
        if view.isGiven("once") { violation("a request with 'once' decoded without its key") }
        switch request {
        case .hello(let version, let name):
            expect(view["protocol"]?.value == .integer(version), "protocol \(version)")
            checkOptionalName(name, "name", view)
        case .ping, .getCategories, .monitor:
            break
        case .status(let page):
            if let page {
                guard case .string(let text)? = view["page"]?.value else { violation("status page \(page) from no page string") }
                expect(StatusPage(cursor: text) == page && StatusPage(cursor: page.cursor) == page, "page \(page) from \(text)")
            } else {
                expect(view["page"] == nil || view["page"]?.value == .null, "status without a page from \(String(describing: view["page"]?.value))")
            }
        case .subscribe(let events, let priority, let key, let resume):
            checkResume(resume, view)
            expect((1...Limits.maxEventsPerSubscription).contains(events.count), "\(events.count) events")
            expect(Set(events).count == events.count, "repeated events \(events)")
            expect(events.allSatisfy(Names.isValid), "event names \(events)")
            if let given = view["events"]?.value {
                expect(given == .array(events.map { .string($0) }), "events \(events) from \(given)")
            }
            if view.isGiven("priority") {
                expect(view["priority"]?.value == .integer(Int64(priority)), "priority \(priority)")
            } else {
                expect(priority == Limits.defaultPriority, "default priority \(priority)")
            }
            checkOptionalName(key, "key", view)
        case .unsubscribe(let target):
            expect(view.isGiven("observer") != view.isGiven("key"), "unsubscribe needs exactly one of observer and key")
            switch target {
            case .observer(let o): expect(view.string("observer") == o, "observer \(o)")
            case .key(let k): checkOptionalName(k, "key", view)
            }
        case .post(let name, let payload, let profile):
            checkName(name, "name", view)
            checkRaw(payload?.bytes, "payload", view)
            expect((profile != nil) == profileEvents.contains(name), "profile \(String(describing: profile)) for '\(name)'")
        case .handle(let channel, let method, let resume):
            checkResume(resume, view)
            checkName(channel, "channel", view)
            checkOptionalName(method, "method", view)
        case .unhandle(let handler):
            expect(view.string("handler") == handler, "handler \(handler)")
        case .invoke(let channel, let method, let arguments):
            checkName(channel.text, "channel", view)
            checkName(method.text, "method", view)
            checkRaw(arguments?.bytes, "arguments", view)
        case .put(let slot, let value):
            checkName(slot, "slot", view)
            expect(view["value"] != nil, "put without a value")
            checkRaw(value, "value", view)
        case .take(let slot, let wait):
            checkName(slot, "slot", view)
            if let wait {
                expect((0...Limits.maxTakeWaitMs).contains(wait) && view["wait"]?.value == .integer(wait), "wait \(wait)")
            } else {
                expect(!view.isGiven("wait"), "a given wait was dropped")
            }
        case .peek(let slot):
            checkName(slot, "slot", view)
        case .setCategories(let set):
            expect(view["categories"]?.raw == set.raw, "the category set is not the array as sent")
            // What the broker persists must restore to the same rules.
            guard let restored = try? CategorySet.parse(set.raw), restored == set else {
                violation("an accepted category set does not parse back to itself")
            }
        case .keyed:
            violation("a key within a key")
        }
    }

    static func checkAnswer(_ answer: Answer, op: String?, _ view: JSONObjectView) {
        guard let op, let allowed = answerFields[op], op != Op.return else { violation("an answer decoded from op \(String(describing: op))") }
        if let key = view.firstOffendingKey(allowed: allowed.union(["op"])) { violation("an answer with field '\(key)' was accepted") }
        expect(view["event"]?.value == .integer(answer.event), "event \(answer.event)")
        switch answer {
        case .next: expect(op == Op.next, "next from '\(op)'")
        case .stop: expect(op == Op.stop, "stop from '\(op)'")
        case .complete(_, let value):
            expect(op == Op.complete, "complete from '\(op)'")
            checkRaw(value, "value", view)
            checkCompletion(value, view["value"])
        }
    }

    /// A willPresent completion is valid exactly when it is an array of distinct option names.
    static func checkCompletion(_ raw: RawJSON?, _ member: JSONObjectView.Member?) {
        var expected = false
        if raw != nil, case .array(let elements)? = member?.value {
            let names = elements.compactMap(\.stringValue)
            expected = names.count == elements.count && Set(names).count == names.count && names.allSatisfy(presentationOptions.contains)
        }
        expect(PresentationOptionNames.isValidCompletion(raw) == expected, "isValidCompletion disagrees for \(String(describing: member?.value))")
    }

    static func checkReturn(_ ret: CallReturn, op: String?, _ view: JSONObjectView) {
        expect(op == Op.return, "a return from op \(String(describing: op))")
        if let key = view.firstOffendingKey(allowed: answerFields[Op.return]!.union(["op"])) {
            violation("a return with field '\(key)' was accepted")
        }
        expect(view["call"]?.value == .integer(ret.call), "call \(ret.call)")
        switch ret.body {
        case .result(let raw):
            expect(!view.isGiven("error") && view["result"]?.raw == raw.bytes, "the result is not the one sent")
        case .error(let raw):
            expect(view["result"] == nil && view["error"]?.raw == raw.bytes, "the error is not the one sent")
            guard case .object(let error)? = view["error"]?.value else { violation("a return error that is not an object") }
            expect(error["code"]?.stringValue != nil && error["message"]?.stringValue != nil, "error without code or message")
            expect(Set(error.keys).isSubset(of: ["code", "message", "details"]), "error fields \(error.keys.sorted())")
        }
    }

    // MARK: Field helpers

    static func checkName(_ name: String, _ key: String, _ view: JSONObjectView) {
        expect(Names.isValid(name) && view.string(key) == name, "'\(key)' \(name)")
    }

    /// `resume` (PROTOCOL.md §13) is a boolean; absent and null read as false.
    static func checkResume(_ resume: Bool, _ view: JSONObjectView) {
        expect(view.isGiven("resume") ? view["resume"]?.value == .bool(resume) : !resume, "resume \(resume)")
    }

    static func checkOptionalName(_ name: String?, _ key: String, _ view: JSONObjectView) {
        if let name { checkName(name, key, view) } else { expect(!view.isGiven(key), "a given '\(key)' was dropped") }
    }

    /// User data is forwarded as the exact bytes sent; null and absent both read as nil.
    static func checkRaw(_ raw: RawJSON?, _ key: String, _ view: JSONObjectView) {
        if let raw {
            expect(view[key]?.raw == raw, "'\(key)' is not the bytes sent")
        } else {
            expect(!view.isGiven(key), "a given '\(key)' was dropped")
        }
    }

    static func expect(_ condition: Bool, _ what: @autoclosure () -> String) {
        if !condition { violation("decoded message disagrees with its body: \(what())") }
    }

    // MARK: Trees

    /// encode → parse gives the same tree (non-finite doubles, which JSON cannot carry, as
    /// null), and encoding is deterministic.
    static func checkRoundTrip(_ tree: JSONValue) {
        let encoded = tree.encoded
        guard let again = try? JSONValue(parsing: encoded) else {
            violation("the encoding of a parsed tree does not parse: \(String(decoding: encoded, as: UTF8.self))")
        }
        if again != portable(tree) { violation("encode → parse changed \(tree) into \(again)") }
        if again.encoded != encoded { violation("encoding \(again) is not deterministic") }
    }

    static func portable(_ value: JSONValue) -> JSONValue {
        switch value {
        case .double(let d):
            if d.isNaN { violation("a JSON number parsed as NaN") }
            return d.isFinite ? value : .null
        case .array(let elements): return .array(elements.map(portable))
        case .object(let members): return .object(members.mapValues(portable))
        default: return value
        }
    }
}
