// Method channels: one handler per (channel, method) or per whole channel, latest wins;
// invoke routes a call to it and relays its return. Calls are never serialized and a
// running event never holds them up.
import NotifBusProtocol

extension Broker {
    mutating func handleChannel(_ key: HandlerKey, resume: Bool = false, rid: RequestID, from c: ConnectionID) {
        guard let client = clients[c] else { return }
        guard client.handlers.count < Limits.maxHandlersPerConnection else {
            return reply(to: c, rid, error: .badRequest, "a connection may hold at most \(Limits.maxHandlersPerConnection) handlers")
        }
        if resume, let holder = routes[key] {
            let route = key.method.map { "'\(key.channel)' method '\($0)'" } ?? "the whole channel '\(key.channel)'"
            return replySuperseded(to: c, rid, what: "route \(route)", by: "h\(holder)")
        }
        let id = nextHandlerID
        nextHandlerID += 1
        var replaced: Int? = nil
        if let old = routes[key], let oldRecord = handlers.removeValue(forKey: old) {
            replaced = old
            clients[oldRecord.client]?.handlers.removeAll { $0 == old }
            var f = FrameBuilder(capacity: 64)
            f.literal("{\"op\":\"evicted\",\"handler\":\"h")
            f.int(Int64(old))
            f.literal("\",\"by\":\"h")
            f.int(Int64(id))
            f.literal("\"}")
            emit(to: oldRecord.client, f.finish())
        }
        handlers[id] = HandlerRecord(id: id, client: c, key: key)
        routes[key] = id
        clients[c]?.handlers.append(id)
        var f = Broker.replyHead(rid)
        f.literal("{\"handler\":\"h")
        f.int(Int64(id))
        f.literal("\",\"replaced\":")
        if let replaced {
            f.literal("\"h")
            f.int(Int64(replaced))
            f.literal("\"")
        } else {
            f.literal("null")
        }
        f.literal("}}")
        emit(to: c, f.finish())
    }

    mutating func unhandle(_ text: String, rid: RequestID, from c: ConnectionID) {
        guard let id = Broker.parseID(text, prefix: "h"), let record = handlers.removeValue(forKey: id) else {
            return reply(to: c, rid, error: .notFound, "no such handler")
        }
        if routes[record.key] == id { routes[record.key] = nil }
        clients[record.client]?.handlers.removeAll { $0 == id }
        var f = Broker.replyHead(rid)
        f.literal("{\"removed\":[\"h")
        f.int(Int64(id))
        f.literal("\"]}}")
        emit(to: c, f.finish())
    }

    mutating func invoke(channel: String, method: String, arguments: RawJSON?, rid: RequestID, from c: ConnectionID, now: Instant) {
        if shuttingDown { return reply(to: c, rid, error: .shuttingDown, "the broker is shutting down") }
        guard (clients[c]?.callsInvoked ?? 0) < configuration.maxCallsPerConnection else {
            return reply(to: c, rid, error: .badRequest,
                         "a connection may have at most \(configuration.maxCallsPerConnection) calls in flight")
        }
        counters.invokes += 1
        guard let handlerID = routes[HandlerKey(channel: channel, method: method)] ?? routes[HandlerKey(channel: channel, method: nil)],
              let handler = handlers[handlerID]
        else {
            return reply(to: c, rid, error: .notImplemented, "no handler for method '\(method)' on channel '\(channel)'")
        }
        let call = nextCallID
        nextCallID += 1
        calls[call] = PendingCall(invoker: c, requestID: rid, handlerClient: handler.client)
        clients[c]?.callsInvoked += 1
        clients[handler.client]?.callsReceived.insert(call)
        callDeadlines.append((now &+ UInt64(configuration.callTimeoutMs) * 1_000_000, call))

        var f = FrameBuilder(capacity: 96 + channel.utf8.count + method.utf8.count + (arguments?.count ?? 4))
        f.literal("{\"op\":\"call\",\"call\":")
        f.int(call)
        f.literal(",\"handler\":\"h")
        f.int(Int64(handlerID))
        f.literal("\",\"channel\":")
        f.string(channel)
        f.literal(",\"method\":")
        f.string(method)
        f.literal(",\"arguments\":")
        f.optionalRaw(arguments)
        f.literal(",\"from\":\"c")
        f.int(Int64(c))
        f.literal("\"}")
        emit(to: handler.client, f.finish())
    }

    /// Only the connection that received the call may return it; anything else is ignored.
    mutating func handleReturn(_ ret: CallReturn, from c: ConnectionID) {
        guard let call = calls[ret.call], call.handlerClient == c else { return }
        calls[ret.call] = nil
        clients[c]?.callsReceived.remove(ret.call)
        guard clients[call.invoker] != nil else { return }
        clients[call.invoker]?.callsInvoked -= 1
        var f = FrameBuilder(capacity: 48)
        f.literal("{\"op\":\"reply\",\"id\":")
        f.requestID(call.requestID)
        switch ret.body {
        case .result(let raw):
            f.literal(",\"result\":")
            f.raw(raw)
        case .error(let raw):
            f.literal(",\"error\":")
            f.raw(raw)
        }
        f.literal("}")
        emit(to: call.invoker, f.finish())
    }
}
