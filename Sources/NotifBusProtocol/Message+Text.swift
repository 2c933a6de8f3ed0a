// Decoded messages as text, for logs, tests and fuzzers: the messages are not `Escapable`,
// so `String(describing:)` cannot take them. Every case and every value is written, in the
// shape Swift prints an enum in, so that two results that print the same are the same.

extension JSONBytes {
    /// The bytes as an array prints them.
    public var summary: String { bytes.description }
}

extension JSONName {
    /// The name, quoted.
    public var summary: String { "\"\(text)\"" }
}

extension Optional where Wrapped == JSONBytes {
    /// The bytes, or `nil`.
    public var summary: String {
        switch self {
        case .some(let bytes): bytes.summary
        case .none: "nil"
        }
    }
}

extension Request {
    /// The request with every value it carries.
    public var summary: String {
        switch self {
        case .hello(let version, let name): "hello(protocolVersion: \(version), name: \(String(describing: name)))"
        case .ping: "ping"
        case .subscribe(let events, let priority, let key, let resume):
            "subscribe(events: \(events), priority: \(priority), key: \(String(describing: key)), resume: \(resume))"
        case .unsubscribe(let target): "unsubscribe(\(target))"
        case .post(let name, let payload, let profile): KeyedRequest.post(name, payload, profile)
        case .handle(let channel, let method, let resume):
            "handle(channel: \"\(channel)\", method: \(String(describing: method)), resume: \(resume))"
        case .unhandle(let handler): "unhandle(handler: \"\(handler)\")"
        case .invoke(let channel, let method, let arguments):
            "invoke(channel: \(channel.summary), method: \(method.summary), arguments: \(arguments.summary))"
        case .put(let slot, let value): KeyedRequest.put(slot, value)
        case .take(let slot, let waitMs): KeyedRequest.take(slot, waitMs)
        case .peek(let slot): "peek(slot: \"\(slot)\")"
        case .setCategories(let set): "setCategories(\(set))"
        case .getCategories: "getCategories"
        case .status(let page): "status(page: \(String(describing: page)))"
        case .monitor: "monitor"
        case .keyed(let key, let request): "keyed(once: \"\(key)\", \(request.summary))"
        }
    }
}

extension KeyedRequest {
    /// The request with every value it carries, as `Request.summary` writes it.
    public var summary: String {
        switch self {
        case .post(let name, let payload, let profile): KeyedRequest.post(name, payload, profile)
        case .put(let slot, let value): KeyedRequest.put(slot, value)
        case .take(let slot, let waitMs): KeyedRequest.take(slot, waitMs)
        case .setCategories(let set): "setCategories(\(set))"
        }
    }

    static func post(_ name: String, _ payload: borrowing JSONBytes?, _ profile: ProfilePayload?) -> String {
        "post(name: \"\(name)\", payload: \(payload.summary), profile: \(String(describing: profile)))"
    }

    static func put(_ slot: String, _ value: RawJSON?) -> String {
        "put(slot: \"\(slot)\", value: \(String(describing: value)))"
    }

    static func take(_ slot: String, _ waitMs: Int64?) -> String {
        "take(slot: \"\(slot)\", waitMs: \(String(describing: waitMs)))"
    }
}

extension CallReturn {
    /// The return with its call and body.
    public var summary: String {
        switch body {
        case .result(let bytes): "callReturn(call: \(call), result: \(bytes.summary))"
        case .error(let bytes): "callReturn(call: \(call), error: \(bytes.summary))"
        }
    }
}

extension Inbound {
    /// The message with every value it carries.
    public var summary: String {
        switch self {
        case .request(let id, let request): "request(id: \(id), \(request.summary))"
        case .answer(let answer): "answer(\(answer))"
        case .callReturn(let ret): ret.summary
        }
    }
}

extension DecodeResult {
    /// The outcome with every value it carries.
    public var summary: String {
        switch self {
        case .badJSON(let reason): "badJSON(\(reason.debugDescription))"
        case .decoded(let inbound, let isHello): "decoded(\(inbound.summary), isHello: \(isHello))"
        case .rejected(let rejection, let isHello): "rejected(\(rejection), isHello: \(isHello))"
        }
    }
}
