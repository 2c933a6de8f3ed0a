// The message decoder as it was before fields were found in one pass (every key compared with
// every allowed name, the op matched as a String), kept only as a test oracle: the
// differential tests require MessageDecoder to give exactly its results. Test code only.
@testable import NotifBusProtocol

/// Decodes frame bodies sent by clients.
enum ReferenceDecoder {
    static let helloFields: [StaticString] = ["op", "id", "protocol", "name"]
    static let bareFields: [StaticString] = ["op", "id"]
    static let statusFields: [StaticString] = ["op", "id", "page"]
    static let subscribeFields: [StaticString] = ["op", "id", "events", "priority", "key", "resume"]
    static let unsubscribeFields: [StaticString] = ["op", "id", "observer", "key"]
    static let postFields: [StaticString] = ["op", "id", "name", "payload", "once"]
    static let handleFields: [StaticString] = ["op", "id", "channel", "method", "resume"]
    static let unhandleFields: [StaticString] = ["op", "id", "handler"]
    static let invokeFields: [StaticString] = ["op", "id", "channel", "method", "arguments"]
    static let putFields: [StaticString] = ["op", "id", "slot", "value", "once"]
    static let takeFields: [StaticString] = ["op", "id", "slot", "wait", "once"]
    static let peekFields: [StaticString] = ["op", "id", "slot"]
    static let setCategoriesFields: [StaticString] = ["op", "id", "categories", "once"]
    static let nextFields: [StaticString] = ["op", "event"]
    static let completeFields: [StaticString] = ["op", "event", "value"]
    static let returnFields: [StaticString] = ["op", "call", "result", "error"]

    /// Fields each request op accepts, `op` and `id` included; nil for an unknown op.
    static func requestFields(_ op: String) -> [StaticString]? {
        switch op {
        case Op.invoke: return invokeFields
        case Op.post: return postFields
        case Op.ping, Op.getCategories, Op.monitor: return bareFields
        case Op.status: return statusFields
        case Op.hello: return helloFields
        case Op.subscribe: return subscribeFields
        case Op.unsubscribe: return unsubscribeFields
        case Op.handle: return handleFields
        case Op.unhandle: return unhandleFields
        case Op.put: return putFields
        case Op.take: return takeFields
        case Op.peek: return peekFields
        case Op.setCategories: return setCategoriesFields
        default: return nil
        }
    }

    /// Fields each answer op accepts; nil when `op` is not an answer.
    static func answerFields(_ op: String) -> [StaticString]? {
        switch op {
        case Op.next, Op.stop: return nextFields
        case Op.complete: return completeFields
        case Op.return: return returnFields
        default: return nil
        }
    }

    /// The outcome of `body`, its user data copied out: it depends on nothing.
    @_lifetime(immortal)
    static func decode(_ body: [UInt8]) -> DecodeResult {
        var result = DecodeResult.badJSON("")
        body.withUnsafeBytes { result = decode($0) }
        return result
    }

    @_lifetime(immortal)
    static func decode(_ body: UnsafeRawBufferPointer) -> DecodeResult {
        var scanner = JSONScanner(body)
        let fields: [JSONField]
        do {
            fields = try scanner.scanTopLevelObject()
        } catch {
            return .badJSON(error.description)
        }
        var view = ReferenceFieldView(scanner: scanner, fields: fields)
        let opField = view.field("op")
        let op = opField.flatMap { scanner.string(of: $0) }
        let isHello = op == Op.hello

        if let op, let allowed = answerFields(op) {
            do {
                try view.checkFields(allowed: allowed, id: nil)
                return .decoded(try decodeAnswer(op: op, view), isHello: false)
            } catch {
                return .rejected(error, isHello: false)
            }
        }

        guard let id = view.requestID() else {
            return .rejected(Rejection(id: nil, .malformed, message: "missing or unusable 'id'"), isHello: isHello)
        }
        guard let op else {
            return .rejected(Rejection(id: id, .malformed, message: "missing or non-string 'op'"), isHello: isHello)
        }
        guard let allowed = requestFields(op) else {
            return .rejected(Rejection(id: id, .unknownOp, message: "unknown op '\(op)'"), isHello: isHello)
        }
        do {
            try view.checkFields(allowed: allowed, id: id)
            return .decoded(.request(id: id, try decodeRequest(op: op, id: id, view)), isHello: isHello)
        } catch {
            return .rejected(error, isHello: isHello)
        }
    }

    @_lifetime(immortal)
    static func decodeAnswer(op: String, _ v: ReferenceFieldView) throws(Rejection) -> Inbound {
        if op == Op.return {
            guard let call = v.field("call").flatMap({ v.scanner.integer(of: $0) }) else {
                throw v.bad("'call' must be an integer")
            }
            let errorField = v.optional("error")
            let resultField = v.field("result")
            if let errorField {
                if resultField != nil { throw v.bad("a return carries exactly one of 'result' and 'error'") }
                try validateErrorObject(errorField, v)
                return .callReturn(CallReturn(call: call, body: .error(JSONBytes(v.scanner.raw(of: errorField)))))
            }
            guard let resultField else { throw v.bad("a return needs 'result' or 'error'") }
            return .callReturn(CallReturn(call: call, body: .result(JSONBytes(v.scanner.raw(of: resultField)))))
        }
        guard let event = v.field("event").flatMap({ v.scanner.integer(of: $0) }) else {
            throw v.bad("'event' must be an integer")
        }
        switch op {
        case Op.next: return .answer(.next(event: event))
        case Op.stop: return .answer(.stop(event: event))
        default: return .answer(.complete(event: event, value: v.optional("value").map { v.scanner.raw(of: $0) }))
        }
    }

    static func validateErrorObject(_ field: JSONField, _ v: ReferenceFieldView) throws(Rejection) {
        guard let members = v.scanner.members(of: field) else { throw v.bad("'error' must be an object") }
        var seen: [StaticString] = []
        for m in members {
            let name: StaticString
            if v.scanner.keyIs(m, "code") {
                name = "code"
            } else if v.scanner.keyIs(m, "message") {
                name = "message"
            } else if v.scanner.keyIs(m, "details") {
                name = "details"
            } else {
                throw v.bad("unknown field 'error.\(v.scanner.key(of: m))'")
            }
            guard !seen.contains(where: { $0.description == name.description }) else { throw v.bad("duplicate field 'error.\(name)'") }
            seen.append(name)
            if name.description != "details" && m.kind != .string { throw v.bad("'error.\(name)' must be a string") }
        }
        guard seen.contains(where: { $0.description == "code" }) else { throw v.bad("missing field 'error.code'") }
        guard seen.contains(where: { $0.description == "message" }) else { throw v.bad("missing field 'error.message'") }
    }

    /// Bytes of their own, if any.
    @_lifetime(immortal)
    static func owned(_ raw: RawJSON?) -> JSONBytes? {
        guard let raw else { return nil }
        return JSONBytes(raw)
    }

    /// `request` with the frame's idempotency key, checked after the op's other fields.
    @_lifetime(copy request)
    static func keyed(_ request: consuming KeyedRequest, _ v: ReferenceFieldView) throws(Rejection) -> Request {
        guard let key = try v.optionalName("once") else { return request.request }
        return .keyed(once: key, request)
    }

    @_lifetime(immortal)
    static func decodeRequest(op: String, id: RequestID, _ v: ReferenceFieldView) throws(Rejection) -> Request {
        switch op {
        case Op.hello:
            guard let f = v.field("protocol"), let version = v.scanner.integer(of: f) else {
                throw v.bad("'protocol' must be an integer")
            }
            return .hello(protocolVersion: version, name: try v.optionalName("name"))
        case Op.ping: return .ping
        case Op.subscribe:
            guard let f = v.optional("events"), let elements = v.scanner.elements(of: f) else {
                throw v.bad("'events' must be an array of names")
            }
            guard (1...Limits.maxEventsPerSubscription).contains(elements.count) else {
                throw v.bad("'events' must name 1 to \(Limits.maxEventsPerSubscription) events")
            }
            var events: [String] = []
            events.reserveCapacity(elements.count)
            for e in elements {
                guard let name = v.scanner.string(of: e), Names.isValid(name) else {
                    throw v.bad("'events' entries must be names of 1 to \(Limits.maxNameBytes) bytes")
                }
                guard !events.contains(name) else { throw v.bad("'events' names '\(name)' twice") }
                events.append(name)
            }
            var priority = Limits.defaultPriority
            if let f = v.optional("priority") {
                guard let p = v.scanner.integer(of: f), let p32 = Int32(exactly: p) else {
                    throw v.bad("'priority' must be an integer in [-2^31, 2^31-1]")
                }
                priority = p32
            }
            return .subscribe(events: events, priority: priority, key: try v.optionalName("key"), resume: try v.optionalBool("resume") ?? false)
        case Op.unsubscribe:
            let observer = try v.optionalString("observer")
            let key = try v.optionalName("key")
            switch (observer, key) {
            case (let o?, nil): return .unsubscribe(.observer(o))
            case (nil, let k?): return .unsubscribe(.key(k))
            default: throw v.bad("give exactly one of 'observer' and 'key'")
            }
        case Op.post:
            let name = try v.requiredName("name")
            let payloadField = v.optional("payload")
            var profile: ProfilePayload? = nil
            if let kind = ProfileEvent(rawValue: name) {
                do {
                    profile = try ProfilePayload.check(kind, payloadField, v.scanner)
                } catch {
                    throw Rejection(id: id, .invalidPayload, message: error.message)
                }
            }
            return try keyed(.post(name: name, payload: owned(payloadField.map { v.scanner.raw(of: $0) }), profile: profile), v)
        case Op.handle:
            let channel = try v.requiredName("channel")
            let method = try v.optionalName("method")
            return .handle(channel: channel, method: method, resume: try v.optionalBool("resume") ?? false)
        case Op.unhandle:
            guard let handler = try v.optionalString("handler") else { throw v.bad("missing field 'handler'") }
            return .unhandle(handler: handler)
        case Op.invoke:
            let channel = try v.requiredName("channel")
            let method = try v.requiredName("method")
            return .invoke(
                channel: JSONName(channel), method: JSONName(method), arguments: owned(v.optional("arguments").map { v.scanner.raw(of: $0) }))
        case Op.put:
            let slot = try v.requiredName("slot")
            guard let f = v.field("value") else { throw v.bad("missing field 'value'") }
            return try keyed(.put(slot: slot, value: f.kind == .null ? nil : v.scanner.raw(of: f)), v)
        case Op.take:
            let slot = try v.requiredName("slot")
            var wait: Int64? = nil
            if let f = v.optional("wait") {
                guard let w = v.scanner.integer(of: f), (0...Limits.maxTakeWaitMs).contains(w) else {
                    throw v.bad("'wait' must be an integer from 0 to \(Limits.maxTakeWaitMs)")
                }
                wait = w
            }
            return try keyed(.take(slot: slot, waitMs: wait), v)
        case Op.peek:
            return .peek(slot: try v.requiredName("slot"))
        case Op.setCategories:
            guard let f = v.optional("categories") else { throw v.bad("missing field 'categories'") }
            let set: CategorySet
            do {
                set = try CategorySet.parse(f, v.scanner)
            } catch {
                throw v.bad(error.message)
            }
            return try keyed(.setCategories(set), v)
        case Op.getCategories: return .getCategories
        case Op.status:
            guard let text = try v.optionalString("page") else { return .status(page: nil) }
            guard let page = StatusPage(cursor: text) else {
                throw v.bad("'page' must be the 'next' of an earlier status reply")
            }
            return .status(page: page)
        case Op.monitor: return .monitor
        default:
            preconditionFailure("op '\(op)' is in requestFields but has no decoder")
        }
    }
}

/// The top-level fields of one frame with typed, rule-checking accessors.
struct ReferenceFieldView {
    let scanner: JSONScanner
    let fields: [JSONField]
    var id: RequestID? = nil

    init(scanner: JSONScanner, fields: [JSONField]) {
        self.scanner = scanner
        self.fields = fields
    }

    func field(_ name: StaticString) -> JSONField? {
        for f in fields where scanner.keyIs(f, name) { return f }
        return nil
    }

    /// The field, or nil when absent or null.
    func optional(_ name: StaticString) -> JSONField? {
        guard let f = field(name), f.kind != .null else { return nil }
        return f
    }

    func bad(_ message: String) -> Rejection {
        Rejection(id: id, .malformed, message: message)
    }

    /// The request's id when it is usable: an integer literal in [0, 2^53) or a string of 1 to 256 bytes.
    func requestID() -> RequestID? {
        guard let f = field("id") else { return nil }
        switch f.kind {
        case .number:
            guard scanner.bytes[f.start] != UInt8(ascii: "-"), let i = scanner.integer(of: f), i < Limits.maxIntegerID else {
                return nil
            }
            return .integer(i)
        case .string:
            guard let s = scanner.string(of: f), (1...Limits.maxStringIDBytes).contains(s.utf8.count) else { return nil }
            let raw = UnsafeRawBufferPointer(rebasing: scanner.bytes[(f.start + 1)..<(f.end - 1)])
            return .string(String(decoding: raw, as: UTF8.self))
        default:
            return nil
        }
    }

    /// Rejects unknown and duplicate fields, naming the first.
    mutating func checkFields(allowed: [StaticString], id: RequestID?) throws(Rejection) {
        self.id = id
        for (i, f) in fields.enumerated() {
            guard allowed.contains(where: { scanner.keyIs(f, $0) }) else { throw bad("unknown field '\(scanner.key(of: f))'") }
            for g in fields[..<i] where scanner.sameKey(g, f) { throw bad("duplicate field '\(scanner.key(of: f))'") }
        }
    }

    func optionalString(_ name: StaticString) throws(Rejection) -> String? {
        guard let f = optional(name) else { return nil }
        guard let s = scanner.string(of: f) else { throw bad("'\(name)' must be a string") }
        return s
    }

    func optionalBool(_ name: StaticString) throws(Rejection) -> Bool? {
        guard let f = optional(name) else { return nil }
        guard let b = scanner.bool(of: f) else { throw bad("'\(name)' must be a boolean") }
        return b
    }

    func optionalName(_ name: StaticString) throws(Rejection) -> String? {
        guard let s = try optionalString(name) else { return nil }
        guard Names.isValid(s) else { throw bad("'\(name)' must be 1 to \(Limits.maxNameBytes) bytes") }
        return s
    }

    func requiredName(_ name: StaticString) throws(Rejection) -> String {
        guard let s = try optionalName(name) else { throw bad("missing field '\(name)'") }
        return s
    }
}
