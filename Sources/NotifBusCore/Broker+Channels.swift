// Method channels: one handler per (channel, method) or per whole channel, latest wins;
// invoke routes a call to it and relays its return. Calls are never serialized and a
// running event never holds them up.
import NotifBusProtocol

extension Broker {
    mutating func handleChannel(_ key: HandlerKey, resume: Bool = false, rid: RequestID, from c: ConnectionID, now: Instant) {
        guard let client = clients[c] else { return }
        guard client.handlers.count < Limits.maxHandlersPerConnection else {
            return refuse(c, rid, .channel(.tooManyHandlers), now: now)
        }
        if resume, let holder = routes[key] {
            return refuse(c, rid, .channel(.routeHeld(channel: key.channel, method: key.method, by: holder)), now: now)
        }
        let id = nextHandlerID
        nextHandlerID += 1
        var replaced: Int? = nil
        if let old = routes[key], let oldRecord = handlers.removeValue(forKey: old) {
            replaced = old
            clients[oldRecord.client]?.handlers.removeAll { $0 == old }
            send(.handlerEvicted(old, by: id), to: oldRecord.client)
        }
        handlers[id] = HandlerRecord(id: id, client: c, key: key)
        routes[key] = id
        clients[c]?.handlers.append(id)
        send(.reply(rid, .handled(handler: id, replaced: replaced)), to: c)
    }

    mutating func unhandle(_ text: String, rid: RequestID, from c: ConnectionID, now: Instant) {
        guard let id = Broker.parseID(text, prefix: "h"), let record = handlers.removeValue(forKey: id) else {
            return refuse(c, rid, .channel(.noSuchHandler), now: now)
        }
        if routes[record.key] == id { routes[record.key] = nil }
        clients[record.client]?.handlers.removeAll { $0 == id }
        send(.reply(rid, .handlerRemoved(id)), to: c)
    }

    mutating func invoke(channel: String, method: String, arguments: RawJSON?, rid: RequestID, from c: ConnectionID, now: Instant) {
        if shuttingDown { return refuse(c, rid, .session(.shuttingDown), now: now) }
        guard (clients[c]?.callsInvoked ?? 0) < configuration.maxCallsPerConnection else {
            return refuse(c, rid, .channel(.tooManyCalls(max: configuration.maxCallsPerConnection)), now: now)
        }
        counters.invokes += 1
        guard let handlerID = routes[HandlerKey(channel: channel, method: method)] ?? routes[HandlerKey(channel: channel, method: nil)],
              let handler = handlers[handlerID]
        else {
            return refuse(c, rid, .channel(.noHandler(channel: channel, method: method)), now: now)
        }
        let call = nextCallID
        nextCallID += 1
        calls[call] = PendingCall(invoker: c, requestID: rid, handlerClient: handler.client)
        clients[c]?.callsInvoked += 1
        clients[handler.client]?.callsReceived.insert(call)
        callDeadlines.append((now &+ UInt64(configuration.callTimeoutMs) * 1_000_000, call))

        send(.call(call: call, handler: handlerID, channel: channel, method: method, arguments: arguments, from: c),
             to: handler.client)
    }

    /// Only the connection that received the call may return it; anything else is ignored.
    mutating func handleReturn(_ ret: CallReturn, from c: ConnectionID) {
        guard let call = calls[ret.call], call.handlerClient == c else { return }
        calls[ret.call] = nil
        clients[c]?.callsReceived.remove(ret.call)
        guard clients[call.invoker] != nil else { return }
        clients[call.invoker]?.callsInvoked -= 1
        switch ret.body {
        case .result(let raw): send(.reply(call.requestID, .value(raw)), to: call.invoker)
        case .error(let raw): send(.handlerError(call.requestID, raw), to: call.invoker)
        }
    }
}
