// Why the broker refuses a request, ends a call or cuts a connection off: one error enum per
// part of the broker, and the one switch that maps them all to wire error codes. Whether a
// code closes the connection is not decided here but by `ErrorCode.closesConnection`.

import NotifBusProtocol

/// Refusals about a connection itself: admission, greeting, framing, shutdown.
enum SessionError: Error, Equatable {
    case forbidden(uid: UInt32)
    case tooManyClients(max: Int)
    /// A frame other than `hello` came first.
    case helloRequired
    /// No `hello` arrived within the greeting time.
    case helloTimedOut(ms: Int64)
    case alreadyGreeted
    case unsupportedProtocol(Int64)
    /// The length prefix was 0 or above `--max-frame`.
    case frameOutOfRange(length: UInt32, max: Int)
    case shuttingDown
    /// The transport's buffers across all connections passed `limit`
    /// (`--max-buffered-bytes`), and this connection held the most of them.
    case overBudget(held: Int, limit: Int)

    var message: String {
        switch self {
        case .forbidden(let uid): "uid \(uid) may not use this broker"
        case .tooManyClients(let max): "the broker serves at most \(max) clients"
        case .helloRequired: "the first frame must be 'hello'"
        case .helloTimedOut(let ms): "no 'hello' within \(ms) ms of connecting"
        case .alreadyGreeted: "'hello' was already sent"
        case .unsupportedProtocol(let version): "this broker speaks protocol 1, not \(version)"
        case .frameOutOfRange(let length, let max): "frame length \(length) is outside 1...\(max)"
        case .shuttingDown: "the broker is shutting down"
        case .overBudget(let held, let limit):
            "cut off: the broker's buffers are full (--max-buffered-bytes \(limit)) and this connection held the most (\(held) bytes)"
        }
    }
}

/// Refusals of the observer registry and the event queue.
enum ChainError: Error, Equatable {
    case tooManyObservers
    /// A resumed `subscribe` found its key held by a live observer.
    case keyHeld(key: String, by: Int)
    case noSuchObserver
    case queueFull(max: Int)
    case connectionQueueFull(waiting: Int, share: Int)
    case queueBytesFull(max: Int)
    case connectionQueueBytesFull(max: Int)
    /// A `willPresent` completion that is not a list of distinct presentation options.
    case invalidCompletion

    var message: String {
        switch self {
        case .tooManyObservers: "a connection may hold at most \(Limits.maxObserversPerConnection) observers"
        case .keyHeld(let key, let holder): BrokerError.yields("key '\(key)'", "o\(holder)")
        case .noSuchObserver: "no such observer"
        case .queueFull(let max): "\(max) posts are already waiting"
        case .connectionQueueFull(let waiting, let share):
            "\(waiting) of this connection's posts are already waiting (--max-queue-per-client \(share))"
        case .queueBytesFull(let max): "waiting posts may hold at most \(max) payload bytes"
        case .connectionQueueBytesFull(let max): "one connection's waiting posts may hold at most \(max) payload bytes"
        case .invalidCompletion: "a willPresent completion must be an array of distinct options from badge, sound, list, banner, alert"
        }
    }
}

/// Refusals of the channel router, and the ends of calls that never returned.
enum ChannelError: Error, Equatable {
    case tooManyHandlers
    /// A resumed `handle` found its route held by a live handler.
    case routeHeld(channel: String, method: String?, by: Int)
    case noSuchHandler
    case tooManyCalls(max: Int)
    case noHandler(channel: String, method: String)
    case handlerGone
    case timedOut(ms: Int64)

    var message: String {
        switch self {
        case .tooManyHandlers: "a connection may hold at most \(Limits.maxHandlersPerConnection) handlers"
        case .routeHeld(let channel, let method, let holder):
            BrokerError.yields("route " + (method.map { "'\(channel)' method '\($0)'" } ?? "the whole channel '\(channel)'"), "h\(holder)")
        case .noSuchHandler: "no such handler"
        case .tooManyCalls(let max): "a connection may have at most \(max) calls in flight"
        case .noHandler(let channel, let method): "no handler for method '\(method)' on channel '\(channel)'"
        case .handlerGone: "the handler's connection closed before it returned"
        case .timedOut(let ms): "the handler did not return within \(ms) ms"
        }
    }
}

/// Refusals of the slot store.
enum SlotError: Error, Equatable {
    case tooManySlots(max: Int)
    case tooManyBytes(max: Int)
    case tooManyTakes(max: Int)

    var message: String {
        switch self {
        case .tooManySlots(let max): "the broker holds at most \(max) non-empty slots"
        case .tooManyBytes(let max): "slot values may take at most \(max) bytes in all"
        case .tooManyTakes(let max): "a connection may have at most \(max) waiting takes"
        }
    }
}

/// A `didReceive` action the categories in force do not allow.
enum CategoryError: Error, Equatable {
    case userTextWithoutTextInput
    case dismissWithoutCustomDismiss
    case unknownCategory(action: String, category: String?)
    case unknownAction(action: String, category: String)
    case textInputRequired(action: String)
    case textInputNotAllowed(action: String)

    var message: String {
        switch self {
        case .userTextWithoutTextInput: "'userText' is only allowed with a text-input action"
        case .dismissWithoutCustomDismiss: "the dismiss action needs a category with 'customDismissAction'"
        case .unknownCategory(let action, let category): "action '\(action)' needs a known category, and '\(category ?? "none")' is not one"
        case .unknownAction(let action, let category): "category '\(category)' has no action '\(action)'"
        case .textInputRequired(let action): "action '\(action)' takes text input: 'userText' is required"
        case .textInputNotAllowed(let action): "action '\(action)' takes no text input: 'userText' is not allowed"
        }
    }
}

/// Refusals about idempotency keys (§3.8).
enum OnceError: Error, Equatable {
    /// The key is held by a request of another op, target or body.
    case conflict(key: String, firstOp: OnceOp)
    /// A connection has as many repeats waiting for posts as it may.
    case tooManyRepeats(max: Int)

    var message: String {
        switch self {
        case .conflict(let key, let op):
            "key '\(key)' was first used with a \(op.wireName) of another target or body; nothing was applied"
        case .tooManyRepeats(let max): "a connection may have at most \(max) repeats waiting for their posts to end"
        }
    }
}

/// Anything the broker answers with an error, by where it was decided.
enum BrokerError: Error, Equatable {
    case session(SessionError)
    case chain(ChainError)
    case channel(ChannelError)
    case slot(SlotError)
    case category(CategoryError)
    case once(OnceError)
    /// A durable write failed: nothing was changed.
    case storageFailed
    /// The frame was not JSON.
    case badJSON(String)
    /// The decoder refused the frame, for `Rejection.Reason`.
    case rejected(Rejection.Reason, String)

    /// The one map from the broker's errors to wire codes.
    var code: ErrorCode {
        switch self {
        case .session(.forbidden): .forbidden
        case .session(.tooManyClients): .tooManyClients
        case .session(.helloRequired), .session(.helloTimedOut): .helloRequired
        case .session(.alreadyGreeted): .badRequest
        case .session(.unsupportedProtocol): .unsupportedProtocol
        case .session(.frameOutOfRange): .frameTooLarge
        case .session(.shuttingDown): .shuttingDown
        case .session(.overBudget): .overloaded
        case .chain(.tooManyObservers), .chain(.invalidCompletion): .badRequest
        case .chain(.keyHeld), .channel(.routeHeld): .superseded
        case .chain(.noSuchObserver), .channel(.noSuchHandler): .notFound
        case .chain(.queueFull), .chain(.connectionQueueFull), .chain(.queueBytesFull), .chain(.connectionQueueBytesFull): .queueFull
        case .channel(.tooManyHandlers), .channel(.tooManyCalls): .badRequest
        case .channel(.noHandler): .notImplemented
        case .channel(.handlerGone): .handlerGone
        case .channel(.timedOut): .timeout
        case .slot: .badRequest
        case .category: .invalidAction
        case .once(.conflict): .onceConflict
        case .once(.tooManyRepeats): .badRequest
        case .storageFailed: .storageFailed
        case .badJSON: .badJSON
        case .rejected(.malformed, _): .badRequest
        case .rejected(.unknownOp, _): .unknownOp
        case .rejected(.invalidPayload, _): .invalidPayload
        }
    }

    var message: String {
        switch self {
        case .session(let e): e.message
        case .chain(let e): e.message
        case .channel(let e): e.message
        case .slot(let e): e.message
        case .category(let e): e.message
        case .once(let e): e.message
        case .storageFailed: "the change could not be written to disk; nothing was changed"
        case .badJSON(let reason): reason
        case .rejected(_, let message): message
        }
    }

    /// The error reply to `rid` (nil: an error frame). A `superseded` names the holder in
    /// `details.by`, so the client can report it.
    @_lifetime(immortal)
    func frame(_ rid: RequestID?) -> OutboundFrame {
        switch (self, rid) {
        case (.chain(.keyHeld(_, let holder)), let rid?): .superseded(rid, message: message, by: "o\(holder)")
        case (.channel(.routeHeld(_, _, let holder)), let rid?): .superseded(rid, message: message, by: "h\(holder)")
        case (.once(.conflict(_, let op)), let rid?): .onceConflict(rid, message: message, op: op.wireName)
        default: .error(rid, code, message: message)
        }
    }

    static func yields(_ what: String, _ holder: String) -> String {
        "\(what) is held by \(holder), registered since; the resumed registration yields"
    }
}
