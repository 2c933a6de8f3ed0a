// The typed messages a client sends to the broker, as the decoder produces them.
// User data stays as raw JSON bytes (`RawJSON`, or `JSONBytes` seen in place in the frame)
// so that the broker forwards it unchanged; nothing here copies or re-encodes it.
import Glibc

/// Validated JSON bytes of one value, kept exactly as the peer wrote them.
public typealias RawJSON = [UInt8]

/// Validated JSON bytes of one value, as the peer wrote them: either seen in place in the
/// frame body they were decoded from (no copy), or an array of their own.
///
/// Not `Escapable`: a value made in place depends on the body it was decoded from, and the
/// compiler refuses to let it (or any request, frame or result that carries it) outlive
/// that body. `MessageDecoder.decode(_:)` given a buffer pointer hands out values that
/// depend on it; given an array it hands out values of their own (`detached()`), which
/// depend on nothing. What must be kept beyond a frame is kept as bytes (the broker keeps
/// a request it holds back as its frame, and decodes it again when it starts).
public struct JSONBytes: ~Escapable, @unchecked Sendable {
    // Unchecked: an in-place view is read only, and only within its buffer's life (above);
    // the owned case is an array.
    @usableFromInline enum Storage {
        case inPlace(UnsafeRawBufferPointer)
        case owned(RawJSON)
    }

    @usableFromInline let storage: Storage

    /// Bytes of their own.
    @_lifetime(immortal)
    public init(_ raw: RawJSON) {
        storage = .owned(raw)
    }

    /// A view of `bytes`, valid only while they are.
    @inlinable
    @_lifetime(borrow bytes)
    public init(inPlace bytes: UnsafeRawBufferPointer) {
        storage = .inPlace(bytes)
    }

    /// A view of `bytes` when there are any, valid only while they are.
    @inlinable
    @_lifetime(borrow bytes)
    public init?(inPlace bytes: UnsafeRawBufferPointer?) {
        guard let bytes else { return nil }
        storage = .inPlace(bytes)
    }

    /// A view of `bytes` that depends on nothing: for the decoder, whose entry points tie
    /// what they return to the body they were given (`MessageDecoder.decode(_:)`).
    @inlinable
    @_lifetime(immortal)
    package init(unboundInPlace bytes: UnsafeRawBufferPointer) {
        storage = .inPlace(bytes)
    }

    /// Whether these bytes are a view of a buffer they do not own.
    public var isInPlace: Bool {
        if case .inPlace = storage { return true }
        return false
    }

    /// Inlinable: the queue's limits ask it of every post.
    @inlinable
    public var count: Int {
        switch storage {
        case .inPlace(let bytes): bytes.count
        case .owned(let raw): raw.count
        }
    }

    /// Calls `body` with the bytes.
    @inlinable @inline(__always)
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch storage {
        case .inPlace(let bytes): return try body(bytes)
        case .owned(let raw): return try raw.withUnsafeBytes(body)
        }
    }

    /// The bytes as an array (a copy when in place).
    public var bytes: RawJSON {
        switch storage {
        case .inPlace(let bytes): RawJSON(bytes)
        case .owned(let raw): raw
        }
    }

    /// The same bytes, owned: they depend on nothing.
    @_lifetime(immortal)
    public func detached() -> JSONBytes {
        JSONBytes(bytes)
    }

    /// Whether both hold the same bytes.
    public func equals(_ other: borrowing JSONBytes) -> Bool {
        withUnsafeBytes { x in other.withUnsafeBytes { y in x.elementsEqual(y) } }
    }

    /// The bytes as an array prints them, wherever they are held.
    public var description: String { bytes.description }
}

/// A name (an invoke's channel or method) seen in place in the frame body it was decoded
/// from, when it holds no escape (its bytes between the quotes are then its UTF-8), or a
/// `String` of its own. Not `Escapable`, as `JSONBytes` is not and for the same reason. It
/// spares the broker a `String` per name on the per-frame path: routing compares bytes,
/// and the `call` frame copies them.
public struct JSONName: ~Escapable, @unchecked Sendable {
    // Unchecked for the reason `JSONBytes` is.
    @usableFromInline enum Storage {
        case inPlace(UnsafeRawBufferPointer)
        case owned(String)
    }

    @usableFromInline let storage: Storage

    @_lifetime(immortal)
    public init(_ text: String) {
        storage = .owned(text)
    }

    /// A view of the UTF-8 of a name written without escapes, valid only while it is.
    @inlinable
    @_lifetime(borrow utf8)
    public init(inPlace utf8: UnsafeRawBufferPointer) {
        storage = .inPlace(utf8)
    }

    /// `init(inPlace:)` depending on nothing, for the decoder (`JSONBytes(unboundInPlace:)`).
    @inlinable
    @_lifetime(immortal)
    package init(unboundInPlace utf8: UnsafeRawBufferPointer) {
        storage = .inPlace(utf8)
    }

    public var isInPlace: Bool {
        if case .inPlace = storage { return true }
        return false
    }

    /// The name as a `String`.
    public var text: String {
        switch storage {
        case .inPlace(let utf8): String(decoding: utf8, as: UTF8.self)
        case .owned(let text): text
        }
    }

    /// Calls `body` with the name's UTF-8.
    @inlinable @inline(__always)
    public func withUTF8<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch storage {
        case .inPlace(let utf8): return try body(utf8)
        case .owned(var text): return try text.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
        }
    }

    /// How many bytes its UTF-8 has.
    @inlinable @inline(__always)
    public var utf8Count: Int {
        switch storage {
        case .inPlace(let utf8): utf8.count
        case .owned(let text): text.utf8.count
        }
    }

    /// Whether the name's UTF-8 is `utf8`.
    @inlinable @inline(__always)
    public func hasUTF8(_ utf8: UnsafeRawBufferPointer) -> Bool {
        withUTF8 { mine in
            mine.count == utf8.count && (mine.count == 0 || memcmp(mine.baseAddress!, utf8.baseAddress!, mine.count) == 0)
        }
    }

    /// The same name, owned: it depends on nothing.
    @_lifetime(immortal)
    public func detached() -> JSONName {
        JSONName(text)
    }
}

/// A request: it carries an id and gets exactly one reply. Not `Escapable`: a post's payload
/// and an invoke's names and arguments may be views of the frame body (`JSONBytes`).
public enum Request: ~Escapable, @unchecked Sendable {
    case hello(protocolVersion: Int64, name: String?)
    case ping
    /// `resume` marks a registration a client makes again after reconnecting: it yields
    /// to a live holder of its key instead of evicting it (PROTOCOL.md §13).
    case subscribe(events: [String], priority: Int32, key: String?, resume: Bool)
    case unsubscribe(UnsubscribeTarget)
    /// `payload` nil means absent (delivered as null). `profile` is set for the three
    /// notification-profile event names, whose payload has been checked.
    case post(name: String, payload: JSONBytes?, profile: ProfilePayload?)
    /// `resume` as for `subscribe`: a taken route is left to its holder.
    case handle(channel: String, method: String?, resume: Bool)
    case unhandle(handler: String)
    case invoke(channel: JSONName, method: JSONName, arguments: JSONBytes?)
    /// `value` nil means the request's value was null: empty the slot.
    case put(slot: String, value: RawJSON?)
    case take(slot: String, waitMs: Int64?)
    case peek(slot: String)
    case setCategories(CategorySet)
    case getCategories
    /// `page` nil: the first page.
    case status(page: StatusPage?)
    case monitor
    /// A `post`, `put`, `take` or `setCategories` with an idempotency key (`once`, §3.8).
    case keyed(once: String, KeyedRequest)
}

/// The requests that take an idempotency key, as `Request` has them.
public enum KeyedRequest: ~Escapable, @unchecked Sendable {
    case post(name: String, payload: JSONBytes?, profile: ProfilePayload?)
    case put(slot: String, value: RawJSON?)
    case take(slot: String, waitMs: Int64?)
    case setCategories(CategorySet)

    /// The same request without a key.
    public var request: Request {
        @_lifetime(copy self) get {
            switch self {
            case .post(let name, let payload, let profile): .post(name: name, payload: payload, profile: profile)
            case .put(let slot, let value): .put(slot: slot, value: value)
            case .take(let slot, let waitMs): .take(slot: slot, waitMs: waitMs)
            case .setCategories(let set): .setCategories(set)
            }
        }
    }
}

/// Where a `status` page starts: just after this item of the lists `clients`, `observers`,
/// `handlers`, `slots`, in that order. On the wire an opaque string (`next` of the page
/// before): the position, `c<id>`, `o<priority>:<id>`, `h<id>` or `s<slot name>`, then `.`
/// and its seal, 16 hex digits of SipHash keyed by this process's random hashing seed
/// (`Hasher`), so that a cursor no reply of this broker wrote is refused (decision 31).
public enum StatusPage: Sendable, Equatable {
    case client(Int)
    case observer(priority: Int32, id: Int)
    case handler(Int)
    case slot(String)

    /// The list this position is in, in reply order.
    public var section: Int {
        switch self {
        case .client: 0
        case .observer: 1
        case .handler: 2
        case .slot: 3
        }
    }

    /// The position a cursor string names, or nil for text no status reply of this process
    /// wrote: a position without its seal, or with a seal that does not match it.
    public init?(cursor text: String) {
        let utf8 = Array(text.utf8)
        guard utf8.count > StatusPage.sealLength + 1, utf8[utf8.count - StatusPage.sealLength - 1] == UInt8(ascii: ".") else { return nil }
        let position = String(decoding: utf8[..<(utf8.count - StatusPage.sealLength - 1)], as: UTF8.self)
        let seal = utf8[(utf8.count - StatusPage.sealLength)...]
        guard seal.elementsEqual(StatusPage.seal(position).utf8) else { return nil }
        self.init(position: position)
    }

    /// The position of an unsealed cursor string, or nil for text no position is written as.
    init?(position text: String) {
        guard let tag = text.first else { return nil }
        let rest = text.dropFirst()
        func number(_ s: Substring) -> Int? {
            guard !s.isEmpty, s.count <= 18, s.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            return Int(s)
        }
        switch tag {
        case "c":
            guard let n = number(rest) else { return nil }
            self = .client(n)
        case "h":
            guard let n = number(rest) else { return nil }
            self = .handler(n)
        case "o":
            let parts = rest.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let n = number(parts[1]) else { return nil }
            let sign = parts[0].first == "-" ? 1 : 0
            guard number(parts[0].dropFirst(sign)) != nil, let priority = Int32(parts[0]) else { return nil }
            self = .observer(priority: priority, id: n)
        case "s":
            let name = String(rest)
            guard Names.isValid(name) else { return nil }
            self = .slot(name)
        default:
            return nil
        }
    }

    /// The cursor string `next` writes: the position and its seal.
    public var cursor: String {
        let position = self.position
        return position + "." + StatusPage.seal(position)
    }

    var position: String {
        switch self {
        case .client(let n): "c\(n)"
        case .observer(let p, let n): "o\(p):\(n)"
        case .handler(let n): "h\(n)"
        case .slot(let name): "s" + name
        }
    }

    static let sealLength = 16

    /// A position's seal: its SipHash under the process's random seed, in hex.
    static func seal(_ position: String) -> String {
        var hasher = Hasher()
        hasher.combine("notifbus status page")
        hasher.combine(position)
        let bits = UInt64(bitPattern: Int64(hasher.finalize()))
        let digits = String(bits, radix: 16)
        return String(repeating: "0", count: sealLength - digits.count) + digits
    }
}

public enum UnsubscribeTarget: Sendable, Equatable {
    case observer(String)
    case key(String)
}

/// An observer's answer to an `event`.
public enum Answer: Sendable {
    case next(event: Int64)
    /// `value` nil means absent.
    case complete(event: Int64, value: RawJSON?)
    case stop(event: Int64)

    public var event: Int64 {
        switch self {
        case .next(let e), .complete(let e, _), .stop(let e): return e
        }
    }
}

/// A handler's `return` for a `call`.
public struct CallReturn: ~Escapable, @unchecked Sendable {
    public enum Body: ~Escapable, @unchecked Sendable {
        case result(JSONBytes)
        /// The whole error object, validated, forwarded as written.
        case error(JSONBytes)
    }

    public let call: Int64
    public let body: Body

    @_lifetime(copy body)
    public init(call: Int64, body: consuming Body) {
        self.call = call
        self.body = body
    }

    /// The same return with its bytes owned (`JSONBytes.detached`): it depends on nothing.
    @_lifetime(immortal)
    public func detached() -> CallReturn {
        switch body {
        case .result(let raw): CallReturn(call: call, body: .result(raw.detached()))
        case .error(let raw): CallReturn(call: call, body: .error(raw.detached()))
        }
    }
}

extension Request {
    /// The request's idempotency key (`once`), if it has one.
    public var onceKey: String? {
        if case .keyed(let key, _) = self { return key }
        return nil
    }

    /// The request without its idempotency key.
    public var unkeyed: Request {
        @_lifetime(copy self) get {
            if case .keyed(_, let request) = self { return request.request }
            return copy self
        }
    }

    /// The same request with its user data owned (`JSONBytes.detached`): it depends on
    /// nothing.
    @_lifetime(immortal)
    public func detached() -> Request {
        switch self {
        case .hello(let version, let name): .hello(protocolVersion: version, name: name)
        case .ping: .ping
        case .subscribe(let events, let priority, let key, let resume): .subscribe(events: events, priority: priority, key: key, resume: resume)
        case .unsubscribe(let target): .unsubscribe(target)
        case .post(let name, let payload, let profile): .post(name: name, payload: payload?.detached(), profile: profile)
        case .handle(let channel, let method, let resume): .handle(channel: channel, method: method, resume: resume)
        case .unhandle(let handler): .unhandle(handler: handler)
        case .invoke(let channel, let method, let arguments):
            .invoke(channel: channel.detached(), method: method.detached(), arguments: arguments?.detached())
        case .put(let slot, let value): .put(slot: slot, value: value)
        case .take(let slot, let waitMs): .take(slot: slot, waitMs: waitMs)
        case .peek(let slot): .peek(slot: slot)
        case .setCategories(let set): .setCategories(set)
        case .getCategories: .getCategories
        case .status(let page): .status(page: page)
        case .monitor: .monitor
        case .keyed(let key, .post(let name, let payload, let profile)):
            .keyed(once: key, .post(name: name, payload: payload?.detached(), profile: profile))
        case .keyed(let key, .put(let slot, let value)): .keyed(once: key, .put(slot: slot, value: value))
        case .keyed(let key, .take(let slot, let waitMs)): .keyed(once: key, .take(slot: slot, waitMs: waitMs))
        case .keyed(let key, .setCategories(let set)): .keyed(once: key, .setCategories(set))
        }
    }
}

/// One decoded frame.
public enum Inbound: ~Escapable, @unchecked Sendable {
    case request(id: RequestID, Request)
    case answer(Answer)
    case callReturn(CallReturn)
}

/// Why a frame that is valid JSON cannot be acted on. The decoder says what is wrong; which
/// wire code says so is the broker's one map of errors (`BrokerError` in NotifBusCore).
public struct Rejection: Error, Sendable, Equatable {
    /// What the decoder found wrong.
    public enum Reason: Sendable, Equatable, CaseIterable {
        /// The frame's members: a field missing, unknown, of the wrong type or out of range;
        /// an unusable id; an op that is not a string.
        case malformed
        /// `op` is a string that names no op.
        case unknownOp
        /// A notification profile event's payload breaks the profile.
        case invalidPayload
    }

    /// The request's id when it was usable; nil for answers and unusable ids.
    public let id: RequestID?
    public let reason: Reason
    public let message: String

    public init(id: RequestID?, _ reason: Reason, message: String) {
        self.id = id
        self.reason = reason
        self.message = message
    }
}

/// The outcome of decoding one frame body.
public enum DecodeResult: ~Escapable, @unchecked Sendable {
    /// Not UTF-8 JSON, or not an object.
    case badJSON(String)
    /// `op` is "hello"; needed before greeting, when anything else is refused.
    case decoded(Inbound, isHello: Bool)
    case rejected(Rejection, isHello: Bool)

    /// The same outcome with its user data owned (`JSONBytes.detached`): it depends on
    /// nothing.
    @_lifetime(immortal)
    public func detached() -> DecodeResult {
        switch self {
        case .badJSON(let reason): .badJSON(reason)
        case .rejected(let rejection, let isHello): .rejected(rejection, isHello: isHello)
        case .decoded(.request(let id, let request), let isHello): .decoded(.request(id: id, request.detached()), isHello: isHello)
        case .decoded(.answer(let answer), let isHello): .decoded(.answer(answer), isHello: isHello)
        case .decoded(.callReturn(let ret), let isHello): .decoded(.callReturn(ret.detached()), isHello: isHello)
        }
    }
}
