// Flutter-style method channels over the broker: `invokeMethod` calls whichever process
// handles (channel, method), and `setMethodCallHandler` serves calls, per method or for
// the whole channel. Errors keep code, message and details end to end.
import NotifBusProtocol

/// An error with a code, a message and optional details, as Flutter's `PlatformException`.
/// Handlers throw it to answer a call with an error; `invokeMethod` throws it inside
/// `MethodChannelError.platform`. It is the same value as a broker's error reply.
public typealias PlatformError = BrokerError

/// Why `invokeMethod` failed.
public enum MethodChannelError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nobody handles the method (`not_implemented`), as Flutter's `MissingPluginException`.
    case notImplemented(String)
    /// The handler, or the broker on its behalf (`handler_gone`, `timeout`), answered with an error.
    case platform(PlatformError)
    /// The call never got an answer through this connection: it was lost
    /// (`NotifBusError.connectionLost`), no answer came within the timeout
    /// (`.timedOut`), or the call could not be made (`.invalidArgument`). Whether the
    /// handler ran is unknown; retry only calls that are safe to repeat.
    case transport(NotifBusError)

    /// `CODE: MESSAGE`, as the CLI prints it.
    public var description: String {
        switch self {
        case .notImplemented(let message): return "not_implemented: \(message)"
        case .platform(let e): return e.description
        case .transport(let e): return e.description
        }
    }

    /// The wire code of the error, when there is one.
    public var code: String? {
        switch self {
        case .notImplemented: return ErrorCode.notImplemented.rawValue
        case .platform(let e): return e.code
        case .transport(let e): return e.code
        }
    }
}

/// One call received by a handler.
public struct MethodCall: Sendable {
    /// The channel the call was made on.
    public let channel: String
    /// The method invoked.
    public let method: String
    /// The invoker's arguments as the broker forwarded them, byte for byte, however deeply nested.
    public let rawArguments: RawJSON
    /// The invoking client (`"c9"`).
    public let from: String
    /// The broker's call id.
    public let call: Int64

    /// The invoker's arguments; `.null` when it sent none. Built from `rawArguments` on each read.
    public var arguments: JSONValue { JSONValue(validated: rawArguments) }
}

/// A named channel on one connection.
public struct MethodChannel: Sendable {
    /// Serves one call: return the result, or throw `PlatformError` (any other error is
    /// answered with code `error` and its description).
    public typealias Handler = @Sendable (MethodCall) async throws -> JSONValue

    /// The code a handler's non-`PlatformError` failure is returned with.
    public static let genericErrorCode = "error"

    /// The channel's name (`"notification_interaction"`).
    public let name: String
    /// The connection its calls go through.
    public let connection: NotifBusConnection

    /// The channel `name` on `connection`; `connection.methodChannel(_:)` makes the same.
    public init(_ name: String, connection: NotifBusConnection) {
        self.name = name
        self.connection = connection
    }

    /// Invokes `method` and returns its result.
    public func invokeMethod(
        _ method: String, arguments: JSONValue? = nil,
        timeout: Duration? = nil
    ) async throws(MethodChannelError) -> JSONValue {
        var fields: [String: JSONValue] = ["channel": .string(name), "method": .string(method)]
        if let arguments { fields["arguments"] = arguments }
        do {
            return try await connection.request(Op.invoke, fields, timeout: timeout)
        } catch {
            if case .broker(let e) = error {
                if e.code == ErrorCode.notImplemented.rawValue { throw .notImplemented(e.message) }
                throw .platform(PlatformError(code: e.code, message: e.message, details: e.details))
            }
            throw .transport(error)
        }
    }

    /// Serves calls of `method`, or of the whole channel when `method` is nil. A newer
    /// registration anywhere replaces this one (latest wins); `nil` removes it.
    public func setMethodCallHandler(_ handler: Handler?, method: String? = nil) async throws(NotifBusError) {
        try await connection.setCallHandler(channel: name, method: method, handler)
    }
}

extension NotifBusConnection {
    /// A channel on this connection.
    public func methodChannel(_ name: String) -> MethodChannel {
        MethodChannel(name, connection: self)
    }

    static func registrationKey(_ channel: String, _ method: String?) -> String {
        channel + "\u{0}" + (method ?? "")
    }

    func setCallHandler(channel: String, method: String?, _ handler: MethodChannel.Handler?) async throws(NotifBusError) {
        let key = NotifBusConnection.registrationKey(channel, method)
        guard let handler else {
            let existing = withState { $0.channelRegistration(key) }
            guard let existing else { return }
            do {
                _ = try await request(Op.unhandle, ["handler": .string(existing)])
            } catch  where error.code == ErrorCode.notFound.rawValue {
                // Already replaced by another process: nothing of ours is left to remove.
            }
            withState { $0.handlerRemoved(existing, registrationKey: key) }
            return
        }
        var fields: [String: JSONValue] = ["channel": .string(channel)]
        if let method { fields["method"] = .string(method) }
        _ = try await request(Op.handle, fields) { [self] result in
            guard let id = result["handler"]?.stringValue else { return }
            withState { $0.handlerAdded(id, channel: channel, method: method, handler: handler) }
        }
    }

    /// The error return sent in place of a return above the broker's `maxFrame`.
    static func returnTooLarge(_ call: Int64, _ what: String, _ why: String) -> JSONValue {
        [
            "op": .string(Op.return), "call": .integer(call),
            "error": ["code": .string(MethodChannel.genericErrorCode), "message": .string("\(what) could not be returned: \(why)")],
        ]
    }

    func deliverCall(_ frame: BrokerFrame.Call, generation gen: Int = 0) {
        let call = frame.call
        let handler = withState { $0.callHandler(for: frame.handler) }
        guard let handler else {
            sendMessage(
                generation: gen,
                [
                    "op": .string(Op.return), "call": .integer(call),
                    "error": ["code": .string(ErrorCode.notImplemented.rawValue), "message": "no handler here any more"],
                ])
            return
        }
        let received = MethodCall(channel: frame.channel, method: frame.method, rawArguments: frame.arguments, from: frame.from, call: call)
        Task { [self] in
            do {
                let result = try await handler(received)
                sendMessage(generation: gen, ["op": .string(Op.return), "call": .integer(call), "result": result]) { why in
                    NotifBusConnection.returnTooLarge(call, "the result", why)
                }
            } catch let error as PlatformError {
                var e: [String: JSONValue] = ["code": .string(error.code), "message": .string(error.message)]
                if let details = error.details { e["details"] = details }
                sendMessage(generation: gen, ["op": .string(Op.return), "call": .integer(call), "error": .object(e)]) { why in
                    NotifBusConnection.returnTooLarge(call, "the error", why)
                }
            } catch {
                sendMessage(
                    generation: gen,
                    [
                        "op": .string(Op.return), "call": .integer(call),
                        "error": ["code": .string(MethodChannel.genericErrorCode), "message": .string(String(describing: error))],
                    ])
            }
        }
    }
}
