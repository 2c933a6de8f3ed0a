// Method channels, composed: one handler per (channel, method) or per whole channel,
// latest wins (ChannelRouter keeps the routes and calls); invoke routes a call to it and
// relays its return. Calls are never serialized and a running event never holds them up.
import NotifBusProtocol

extension Broker {
    mutating func handleChannel(_ key: HandlerKey, resume: Bool = false, rid: RequestID, from c: ConnectionID, now: Instant) {
        guard let client = sessions[c] else { return }
        guard client.handlers.count < Limits.maxHandlersPerConnection else {
            return refuse(c, rid, .channel(.tooManyHandlers), now: now)
        }
        if resume, let holder = channels.holder(of: key) {
            return refuse(c, rid, .channel(.routeHeld(channel: key.channel, method: key.method, by: holder)), now: now)
        }
        let (id, replaced) = channels.register(key, client: c)
        if let replaced {
            sessions[replaced.client]?.handlers.removeAll { $0 == replaced.id }
            send(.handlerEvicted(replaced.id, by: id), to: replaced.client)
        }
        client.handlers.append(id)
        send(.reply(rid, .handled(handler: id, replaced: replaced?.id)), to: c)
    }

    mutating func unhandle(_ text: String, rid: RequestID, from c: ConnectionID, now: Instant) {
        guard let id = channels.find(text), let record = channels.remove(id) else {
            return refuse(c, rid, .channel(.noSuchHandler), now: now)
        }
        sessions[record.client]?.handlers.removeAll { $0 == id }
        send(.reply(rid, .handlerRemoved(id)), to: c)
    }

    /// Always inlined into `Broker.handle`: called apart, `handle` grows a larger frame
    /// that every other request pays for. Its names and arguments are borrowed: taken
    /// `consuming`, it is not inlined where the direct path dispatches an invoke (core-invoke
    /// 3,681 instructions rather than 3,639).
    @inline(__always)
    mutating func invoke(
        channel: JSONName, method: JSONName, arguments: JSONBytes?, rid: RequestID, from client: ClientRecord,
        now: Instant
    ) {
        let c = client.id
        if shuttingDown { return refuse(c, rid, .session(.shuttingDown), now: now) }
        guard client.callsInvoked < configuration.maxCallsPerConnection else {
            return refuse(c, rid, .channel(.tooManyCalls(max: configuration.maxCallsPerConnection)), now: now)
        }
        counters.invokes += 1
        guard let handler = channels.route(channel: channel, method: method) else {
            return refuse(c, rid, .channel(.noHandler(channel: channel.text, method: method.text)), now: now)
        }
        let call = channels.startCall(
            PendingCall(invoker: c, requestID: rid, handlerClient: handler.client),
            deadline: now &+ UInt64(configuration.callTimeoutMs) * 1_000_000)
        sessions.callStarted(invoker: client, handler: handler.client)
        send(
            .call(call: call, handler: handler.id, channel: channel, method: method, arguments: arguments, from: c),
            to: handler.client)
    }

    /// Only the connection that received the call may return it; anything else is ignored.
    mutating func handleReturn(_ ret: consuming CallReturn, from client: ClientRecord) {
        guard let call = channels.returnCall(ret.call, from: client.id) else { return }
        let invoker = sessions[call.invoker]
        ClientRecord.callEnded(invoker: invoker, handler: client)
        guard invoker != nil else { return }
        let body = ret.body
        _ = consume ret
        switch consume body {
        case .result(let raw): send(.reply(call.requestID, .relayed(raw)), to: call.invoker)
        case .error(let raw): send(.handlerError(call.requestID, raw), to: call.invoker)
        }
    }
}
