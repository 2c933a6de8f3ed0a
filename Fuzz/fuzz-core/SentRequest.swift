// A request as the model keeps it while it awaits its reply: what the decoder made of the
// frame, with every value owned. The decoder's `Request` may hold views of the frame and is
// not `Escapable`, so the model cannot keep it; this mirror has its cases and shapes, so
// that the checks match on it as they would on a `Request`.
import NotifBusProtocol

indirect enum SentRequest {
    case hello(protocolVersion: Int64, name: String?)
    case ping
    case subscribe(events: [String], priority: Int32, key: String?, resume: Bool)
    case unsubscribe(UnsubscribeTarget)
    case post(name: String, payload: RawJSON?, profile: ProfilePayload?)
    case handle(channel: String, method: String?, resume: Bool)
    case unhandle(handler: String)
    case invoke(channel: String, method: String, arguments: RawJSON?)
    case put(slot: String, value: RawJSON?)
    case take(slot: String, waitMs: Int64?)
    case peek(slot: String)
    case setCategories(CategorySet)
    case getCategories
    case status(page: StatusPage?)
    case monitor
    case keyed(once: String, SentRequest)

    init(_ request: borrowing Request) {
        switch request {
        case .hello(let version, let name): self = .hello(protocolVersion: version, name: name)
        case .ping: self = .ping
        case .subscribe(let events, let priority, let key, let resume):
            self = .subscribe(events: events, priority: priority, key: key, resume: resume)
        case .unsubscribe(let target): self = .unsubscribe(target)
        case .post(let name, let payload, let profile): self = .post(name: name, payload: payload?.bytes, profile: profile)
        case .handle(let channel, let method, let resume): self = .handle(channel: channel, method: method, resume: resume)
        case .unhandle(let handler): self = .unhandle(handler: handler)
        case .invoke(let channel, let method, let arguments): self = .invoke(channel: channel.text, method: method.text, arguments: arguments?.bytes)
        case .put(let slot, let value): self = .put(slot: slot, value: value)
        case .take(let slot, let waitMs): self = .take(slot: slot, waitMs: waitMs)
        case .peek(let slot): self = .peek(slot: slot)
        case .setCategories(let set): self = .setCategories(set)
        case .getCategories: self = .getCategories
        case .status(let page): self = .status(page: page)
        case .monitor: self = .monitor
        case .keyed(let key, let inner): self = .keyed(once: key, SentRequest(inner.request))
        }
    }

    /// The request's idempotency key (`once`), if it has one.
    var onceKey: String? {
        if case .keyed(let key, _) = self { return key }
        return nil
    }

    /// The request without its idempotency key.
    var unkeyed: SentRequest {
        if case .keyed(_, let request) = self { return request }
        return self
    }
}

/// A handler's return as the model keeps it (`CallReturn.Body`, owned).
enum ReturnBody {
    case result(RawJSON)
    case error(RawJSON)

    init(_ body: borrowing CallReturn.Body) {
        switch body {
        case .result(let raw): self = .result(raw.bytes)
        case .error(let raw): self = .error(raw.bytes)
        }
    }
}
