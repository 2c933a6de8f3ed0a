// Checks each action the broker returns, in order: frames go only to open connections, carry
// exactly the fields the spec shows, and agree with the model — replies match a request
// that awaits one, events reach the observer's own connection, traces match the hops.
import FuzzDriver
import NotifBusCore
import NotifBusProtocol

extension Session {
    /// Error codes after which the broker closes the connection (§3).
    static let closingCodes: Set<String> = ["hello_required", "unsupported_protocol", "frame_too_large", "forbidden", "too_many_clients"]
    /// The codes the broker itself sends (§4); handlers may return others.
    static let brokerCodes = Set(ErrorCode.allCases.map(\.rawValue))

    func check(_ action: BrokerAction) {
        context.actionCount += 1
        switch action {
        case .send(let id, let range):
            let frame = broker.outputBytes(range)
            guard id >= 1 && id <= peers.count else { violation("a frame for c\(id), which never connected") }
            guard peers[id - 1].open else { violation("a frame for c\(id) after it was closed: \(Session.text(frame))") }
            sequence += 1
            if let expected = context.acknowledgements.removeValue(forKey: id) {
                let view = FrameView(Array(frame.dropFirst(4)))
                if view?["id"]?.value != expected {
                    violation("a finished write answers request \(expected), but c\(id)'s next frame is \(Session.text(frame))")
                }
                let failed = view?["error"].flatMap { FrameView($0.raw)?.string("code") } == "storage_failed"
                if let resolved = context.resolved, resolved.connection == id, failed == resolved.written {
                    violation("a write reported \(resolved.written ? "written" : "failed") was answered \(Session.text(frame))")
                }
            }
            checkFrame(frame, to: id)
        case .close(let id):
            guard id >= 1 && id <= peers.count else { violation("close for c\(id), which never connected") }
            guard peers[id - 1].open else { violation("c\(id) closed twice") }
            if context.shuttingDown {
                if let pending = peers[id - 1].outstanding.first { violation("shutdown closed c\(id) with request \(pending.id) unanswered") }
            } else if !context.closingErrors.contains(id) {
                violation("c\(id) closed without an error that closes")
            }
            markClosed(id)
        case .persist(let write):
            guard let pending = broker.pendingWrite(write) else { violation("persist \(write) of no write in flight") }
            let (record, acknowledgement) = (pending.record, pending.acknowledges)
            switch record {
            case .slot(let name, _):
                if inFlight.contains(where: { if case .slot(name, _) = $0.record { true } else { false } }) {
                    violation("two writes of slot '\(name)' in flight at once")
                }
            case .categories(let raw):
                guard (try? CategorySet.parse(raw)) != nil else { violation("persisted categories that do not parse: \(Session.text(raw))") }
                if inFlight.contains(where: { if case .categories = $0.record { true } else { false } }) {
                    violation("two writes of the categories in flight at once")
                }
            case .keysOnly:
                if pending.once.isEmpty { violation("persist \(write) of a record with neither a change nor a key") }
            }
            if let acknowledgement {
                guard acknowledgement.connection >= 1 && acknowledgement.connection <= peers.count, peers[acknowledgement.connection - 1].open,
                    peers[acknowledgement.connection - 1].outstanding.contains(where: { $0.id == Session.json(acknowledgement.requestID) })
                else { violation("write \(write) answers \(acknowledgement), which no open connection awaits") }
            }
            inFlight.append((write, record, acknowledgement, pending.once))
        }
    }

    /// Whether a reply to `pending` on `id` would overtake the reply of an earlier request
    /// of the same connection whose write is still in flight.
    func overtakesWrite(_ pending: Pending, on id: ConnectionID) -> Bool {
        let outstanding = peers[id - 1].outstanding
        for write in inFlight {
            guard let ack = write.acknowledges, ack.connection == id else { continue }
            let rid = Session.json(ack.requestID)
            let matches = outstanding.filter { $0.id == rid }
            if matches.count == 1 && pending.id != rid && matches[0].step < pending.step { return true }
        }
        return false
    }

    func checkFrame(_ frame: [UInt8], to id: ConnectionID) {
        guard frame.count > 4 else { violation("a frame of \(frame.count) bytes") }
        let length = Int(frame[0]) << 24 | Int(frame[1]) << 16 | Int(frame[2]) << 8 | Int(frame[3])
        guard length == frame.count - 4 else { violation("length prefix \(length) on a \(frame.count - 4)-byte body") }
        guard let view = FrameView(Array(frame[4...])) else { violation("c\(id) was sent a body that is not a JSON object: \(Session.text(frame))") }
        switch view.string("op") {
        case "reply": checkReply(view, to: id)
        case "event": checkEvent(view, to: id)
        case "evicted": checkEvicted(view, to: id)
        case "call": checkCall(view, to: id)
        case "seen": checkSeen(view, to: id)
        default: violation("c\(id) was sent a frame with an unknown op: \(Session.text(frame))")
        }
    }

    // MARK: Replies

    func checkReply(_ view: FrameView, to id: ConnectionID) {
        let isError = view["error"] != nil
        let isRepeat = view["repeat"] != nil
        guard view.hasExactly(Set(["op", "id", isError ? "error" : "result"] + (isRepeat ? ["repeat"] : []))) else {
            violation("reply fields \(view.keys)")
        }
        if isRepeat && view["repeat"]?.value != .bool(true) { violation("repeat is \(Session.text(view["repeat"]?.raw ?? []))") }
        var code: String? = nil
        if isError {
            guard case .object(let error)? = view["error"]?.value, let c = error["code"]?.stringValue,
                error["message"]?.stringValue != nil
            else { violation("reply error without code or message: \(view.keys)") }
            code = c
            if Session.closingCodes.contains(c) { context.closingErrors.insert(id) }
        }
        guard let idMember = view["id"], let rid = idMember.value else { violation("reply without a readable id") }
        if rid == .null {
            guard let code else { violation("a result with id null") }
            guard Session.brokerCodes.contains(code) else { violation("error frame with code \(code), which is not the broker's") }
            // The one error frame a tick may send: a connection that did not greet in time.
            let helloTimedOut = code == "hello_required" && context.helloExpired.contains(id)
            guard context.input == id || helloTimedOut else {
                violation("error frame \(code) for c\(id) on input from \(String(describing: context.input))")
            }
            if code == "forbidden" || code == "too_many_clients" {
                guard context.refusal == code else { violation("c\(id) refused with \(code), expected \(String(describing: context.refusal))") }
            }
            return
        }
        guard let index = peers[id - 1].outstanding.firstIndex(where: { $0.id == rid }) else {
            violation("reply with id \(rid) for c\(id), where no request awaits one")
        }
        let pending = peers[id - 1].outstanding.remove(at: index)
        if !Session.mayWait(pending.request), peers[id - 1].outstanding.filter({ $0.id == rid }).isEmpty, overtakesWrite(pending, on: id) {
            violation("the reply to \(rid) on c\(id) overtook an earlier request's write in flight")
        }
        context.replies.append((id, rid, code))
        if case .keyed(let key, let inner)? = pending.request {
            return checkKeyedReply(view, key: key, inner: inner, isRepeat: isRepeat, code: code, pending, to: id)
        }
        if isRepeat { violation("a reply marked repeat to \(String(describing: pending.request)), which has no key") }
        if let code {
            checkErrorReply(code, view["error"]?.raw ?? [], pending, to: id)
        } else if let result = view["result"] {
            checkResult(result, pending, to: id)
        }
    }

    // MARK: Keyed replies

    /// The op and fingerprint of a keyed request (`Broker.fingerprint`: its target and its
    /// body's bytes as sent).
    static func onceFingerprint(_ request: SentRequest) -> (op: OnceOp, fingerprint: UInt64) {
        func fingerprint(_ target: String, _ body: [UInt8]?) -> UInt64 {
            ContentHash.combine(ContentHash.hash(target), ContentHash.hash(body ?? []))
        }
        switch request {
        case .post(let name, let payload, _): return (.post, fingerprint(name, payload))
        case .put(let slot, let value): return (.put, fingerprint(slot, value))
        case .take(let slot, _): return (.take, fingerprint(slot, nil))
        case .setCategories(let set): return (.setCategories, fingerprint("", set.raw))
        default: violation("a key on \(request)")
        }
    }

    /// Whether another request with `key` awaits its reply: it may hold the key now.
    func keyOutstanding(_ key: String, except pending: Pending, on c: ConnectionID) -> Bool {
        peers.contains { peer in
            peer.open && peer.outstanding.contains { $0.request?.onceKey == key && !(peer.id == c && $0.id == pending.id) }
        }
    }

    /// A reply to a keyed request (decision 43): a repeat has the first outcome byte for byte
    /// (or `interrupted`, for a post cut by a restart); another use of a held key is a
    /// conflict naming the first op; a result that is not a repeat is a first application,
    /// and no key is applied twice; a refusal holds nothing.
    func checkKeyedReply(
        _ view: FrameView, key: String, inner: SentRequest, isRepeat: Bool, code: String?, _ pending: Pending, to id: ConnectionID
    ) {
        let (op, fingerprint) = Session.onceFingerprint(inner)
        let outcome = (code == nil ? view["result"] : view["error"])?.raw ?? []
        let innerPending = Pending(id: pending.id, request: inner, step: pending.step, sentAt: pending.sentAt)
        if isRepeat {
            let unknown = onceUnsure.contains(key) || keyOutstanding(key, except: pending, on: id)
            guard var model = onceKeys[key] ?? (unknown ? OnceModel(op: op, fingerprint: fingerprint) : nil) else {
                violation("key \(key) answered as a repeat, but no request holds it: \(Session.text(outcome))")
            }
            guard model.op == op && model.fingerprint == fingerprint else {
                violation("key \(key) of a \(model.op.wireName) answered a \(op.wireName) of another body as its repeat")
            }
            if code == "interrupted" {
                if !model.interrupted { violation("key \(key) answered interrupted, but its post was not cut by a restart") }
                return
            }
            if model.interrupted { violation("key \(key) was cut by a restart, but its repeat got \(Session.text(outcome))") }
            if let first = model.outcome {
                if first != outcome || model.isError != (code != nil) {
                    violation("key \(key): the repeat got \(Session.text(outcome)), the first outcome was \(Session.text(first))")
                }
            } else {
                model.outcome = outcome
                model.isError = code != nil
            }
            if code != nil { violation("key \(key): a repeat of a refusal (\(code!)), which records nothing") }
            onceKeys[key] = model
            return
        }
        switch code {
        case "once_conflict"?:
            let first = FrameView(outcome)?["details"]?.value?["op"]?.stringValue
            if let model = onceKeys[key] {
                if model.op == op && model.fingerprint == fingerprint { violation("key \(key): its own repeat refused once_conflict") }
                if first != model.op.wireName { violation("key \(key) of a \(model.op.wireName): once_conflict names \(first ?? "nothing")") }
            } else if !(onceUnsure.contains(key) || keyOutstanding(key, except: pending, on: id)) {
                violation("once_conflict for key \(key), which no request holds")
            }
        case nil:
            // A take that answers null (at once, or when its wait ran out) applied nothing
            // and holds nothing.
            if case .take = inner, outcome == Array("null".utf8) {
            } else {
                if let model = onceKeys[key] {
                    violation("key \(key), held by a \(model.op.wireName), applied again: \(Session.text(outcome))")
                }
                onceUnsure.remove(key)
                onceKeys[key] = OnceModel(op: op, fingerprint: fingerprint, outcome: outcome)
            }
            if case .post = inner { acceptedPosts += 1 }
            if let result = view["result"] { checkResult(result, innerPending, to: id) }
        case "interrupted"?:
            violation("key \(key) answered interrupted without repeat")
        case "storage_failed"? where context.writeFailed:
            // A keyed post's "running" or "ended" record, a hand-over, or a repeat waiting
            // for either: refused, it holds nothing.
            break
        case let code?:
            checkErrorReply(code, outcome, innerPending, to: id)
        }
    }

    /// An error answering a request: a code the spec gives that request, at the time it may.
    func checkErrorReply(_ code: String, _ raw: [UInt8], _ pending: Pending, to id: ConnectionID) {
        let atOnce = pending.step == stepNumber || context.afterWrite
        if code == "hello_required" {
            if !atOnce || peers[id - 1].greeted { violation("hello_required for request \(pending.id) late or after hello") }
            return
        }
        switch (pending.request, code) {
        case (nil, "bad_request"), (nil, "unknown_op"), (nil, "invalid_payload"):
            // At once, or once what it was held behind is done (at shutdown too: a refusal
            // held back is sent as it is).
            if !atOnce && !context.shuttingDown { violation("a rejected request answered late") }
        case (nil, _):
            violation("a rejected request answered with \(code)")
        case (.invoke?, _):
            checkInvokeReply(pending, error: raw, result: nil, to: id)
        case (let request?, "bad_request"):
            if !atOnce { violation("\(String(describing: pending.request)) got bad_request late") }
            if !overLimit(request, from: id) { violation("\(request) refused with bad_request below every limit") }
        case (_, "shutting_down"):
            // Posts and waiting takes, and any request still waiting behind a write.
            if !context.shuttingDown { violation("\(String(describing: pending.request)) got shutting_down outside shutdown") }
        case (.put?, "storage_failed"), (.take?, "storage_failed"), (.setCategories?, "storage_failed"):
            // A waiting take handed a value by a keyed put shares that put's write.
            if case .take(_, let wait?)? = pending.request, wait > 0, context.writeFailed { break }
            guard let resolved = context.resolved, resolved.connection == id, resolved.id == pending.id, !resolved.written else {
                violation("\(String(describing: pending.request)) got storage_failed without a failed write")
            }
        case (.hello?, "unsupported_protocol"):
            context.mustClose.insert(id)
        case (.unsubscribe?, "not_found"), (.unhandle?, "not_found"), (.post?, "queue_full"), (.post?, "invalid_action"):
            if !atOnce { violation("\(String(describing: pending.request)) got \(code) late") }
        default:
            violation("\(String(describing: pending.request)) answered with \(code)")
        }
    }

    func checkResult(_ result: FrameView.Member, _ pending: Pending, to id: ConnectionID) {
        guard let request = pending.request else { violation("a rejected request got a result") }
        let view = FrameView(result.raw)
        switch request {
        case .hello:
            guard let view, view.string("client") == "c\(id)", view.integer("protocol") == 1,
                view.integer("maxFrame") == Int64(configuration.maxFrame)
            else { violation("hello result \(Session.text(result.raw)) for c\(id)") }
            peers[id - 1].greeted = true
        case .subscribe:
            guard let view, let observer = view.number("observer", prefix: "o"), observers[observer] == nil,
                case .array(let replaced)? = view["replaced"]?.value
            else { violation("subscribe result \(Session.text(result.raw))") }
            for r in replaced where !context.evicted.contains(r.stringValue ?? "") {
                violation("subscribe replaced \(r) but no evicted frame went out for it")
            }
            observers[observer] = id
            observerHolders[observer] = id
        case .unsubscribe:
            guard let view, case .array(let removed)? = view["removed"]?.value, removed.count == 1,
                let o = removed[0].stringValue, o.first == "o", let n = Int(o.dropFirst()), observers[n] != nil
            else { violation("unsubscribe result \(Session.text(result.raw)) with observers \(observers)") }
            observers[n] = nil
        case .handle:
            guard let view, let handler = view.number("handler", prefix: "h"), handlers[handler] == nil else {
                violation("handle result \(Session.text(result.raw))")
            }
            if let replaced = view.string("replaced"), !context.evicted.contains(replaced) {
                violation("handle replaced \(replaced) but no evicted frame went out for it")
            }
            handlers[handler] = id
        case .unhandle:
            guard let view, case .array(let removed)? = view["removed"]?.value, removed.count == 1,
                let h = removed[0].stringValue, h.first == "h", let n = Int(h.dropFirst()), handlers[n] != nil
            else { violation("unhandle result \(Session.text(result.raw)) with handlers \(handlers)") }
            handlers[n] = nil
        case .post(let name, _, _):
            guard let view else { violation("post result \(Session.text(result.raw))") }
            checkPostResult(view, name: name, to: id)
        case .invoke:
            checkInvokeReply(pending, error: nil, result: result.raw, to: id)
        case .put(let slot, let value):
            guard let view, case .bool(let delivered)? = view["delivered"]?.value, view["replaced"]?.value?.boolValue != nil else {
                violation("put result \(Session.text(result.raw))")
            }
            if !delivered, !context.persistedSlots.contains(where: { $0.name == slot && $0.value == value }),
                value != nil || view["replaced"]?.value == .bool(true)
            {
                violation("put into '\(slot)' replied before it was written")
            }
        case .take(let slot, let wait):
            let removed = context.persistedSlots.contains { $0.name == slot && $0.value == nil }
            // A value comes from the slot (once its removal is written) or, for a waiting
            // take, from a put handed over in a later step.
            if result.kind != .null, !removed, (wait ?? 0) == 0 || pending.step == stepNumber {
                violation("take from '\(slot)' answered with a value before its removal was written")
            }
            if result.kind == .null, now < pending.sentAt + UInt64(wait ?? 0) * 1_000_000, !(wait == nil || wait == 0) {
                violation("a take waiting \(wait ?? 0) ms answered null early")
            }
        case .setCategories:
            if !context.persistedCategories { violation("setCategories replied before the set was written") }
        case .monitor:
            peers[id - 1].monitoring = true
        case .status:
            checkStatus(result.value)
        case .ping, .peek, .getCategories:
            break
        case .keyed:
            violation("a keyed request's result judged as an unkeyed one")
        }
    }

    /// Whether the broker may refuse a well-formed request with bad_request: a second hello,
    /// or a per-connection or slot limit the model sees reached (the refused request itself
    /// is no longer outstanding).
    func overLimit(_ request: SentRequest, from id: ConnectionID) -> Bool {
        let outstanding = peers[id - 1].outstanding
        switch request {
        case .hello:
            return peers[id - 1].greeted
        case .subscribe:
            return observers.values.filter { $0 == id }.count >= Limits.maxObserversPerConnection
        case .handle:
            return handlers.values.filter { $0 == id }.count >= Limits.maxHandlersPerConnection
        case .invoke:
            // The calls it has in flight (invokes held back behind a write are none yet).
            return calls.values.filter { $0.invoker == id }.count >= configuration.maxCallsPerConnection
        case .take:
            return outstanding.filter { if case .take? = $0.request?.unkeyed { true } else { false } }.count >= configuration.maxTakesPerConnection
        case .put(let slot, let value?):
            // Puts in flight hold their places and bytes until they are reported, and so does
            // a value handed back to its slot after its taker left (a write that answers no
            // request). A launch retention, which answers none either, holds nothing, but is
            // counted too: a refusal is then judged against the larger figure.
            let old = slots[slot]?.count
            let bytes = slots.values.reduce(0) { $0 + $1.count }
            var newSlots = 0
            var extraBytes = 0
            for write in inFlight {
                guard case .slot(let name, let v?) = write.record, name != slot else { continue }
                if slots[name] == nil { newSlots += 1 }
                extraBytes += Swift.max(0, v.count - (slots[name]?.count ?? 0))
            }
            return (old == nil && slots.count + newSlots >= configuration.maxSlots)
                || bytes + extraBytes - (old ?? 0) + value.count > configuration.maxSlotBytes
        default:
            return false
        }
    }

    /// Whether `c` may have been unresponsive (decision 30) at some step in `steps`: a hop
    /// it was sent got no answer before a tick at or after its deadline, which marked it,
    /// and the mark lasts until the next step in which `c` sent a frame.
    func mayBeUnresponsive(_ c: ConnectionID, during steps: ClosedRange<Int>) -> Bool {
        let limit = UInt64(configuration.hopTimeoutMs) * 1_000_000
        for (event, list) in hops {
            for hop in list where hop.connection == c && hop.step <= steps.upperBound {
                guard let tick = ticks.first(where: { $0.step > hop.step && $0.at >= hop.sentAt + limit }),
                    tick.step <= steps.upperBound
                else { continue }
                let answered = (answers[event] ?? []).contains { $0.connection == c && $0.sequence > hop.sequence && $0.step < tick.step }
                let spoke = peers[c - 1].frameSteps.first { $0 > tick.step } ?? Int.max
                if !answered && spoke > steps.lowerBound { return true }
            }
        }
        return false
    }

    /// A post's result: the trace is exactly the hops its `event` frames started, each hop
    /// ended in a way the clients caused, and the outcome follows from the last hop.
    func checkPostResult(_ view: FrameView, name: String, to id: ConnectionID) {
        guard view.hasExactly(["event", "outcome", "by", "value", "retained", "trace"]), let event = view.integer("event"),
            let outcome = view.string("outcome"), case .array(let trace)? = view["trace"]?.value
        else { violation("post result fields \(view.keys)") }
        guard finishedEvents.insert(event).inserted else { violation("event \(event) finished twice") }
        let started = hops[event] ?? []
        let entries = trace.map { ($0["observer"]?.stringValue ?? "?", $0["reply"]?.stringValue ?? "?") }
        // A skipped observer got no event: either its connection had a hop earlier in this
        // event and at least a hop timeout has passed since that hop started, or its
        // connection was unresponsive when the chain passed it (decision 30).
        var hopsSoFar: [Hop] = []
        var startedIndex = 0
        for entry in entries {
            if entry.1 == "skipped" {
                guard let n = Int(entry.0.dropFirst()), let holder = observerHolders[n] else {
                    violation("event \(event) skipped \(entry.0), which no open connection holds")
                }
                let limit = UInt64(configuration.hopTimeoutMs) * 1_000_000
                let overBudget = hopsSoFar.first(where: { $0.connection == holder }).map { now >= $0.sentAt + limit } ?? false
                // Passed in the step that started the next hop; a trailing one, between the
                // last hop's start and now (a launch retention answers the post later).
                let skippedAt =
                    startedIndex < started.count
                    ? started[startedIndex].step...started[startedIndex].step
                    : (started.last?.step ?? 0)...stepNumber
                guard overBudget || mayBeUnresponsive(holder, during: skippedAt) else {
                    violation(
                        "event \(event) skipped \(entry.0) of c\(holder), which neither used up a hop timeout in it "
                            + "nor was unresponsive")
                }
                continue
            }
            if startedIndex < started.count {
                hopsSoFar.append(started[startedIndex])
                startedIndex += 1
            }
        }
        let listed = entries.filter { $0.1 != "skipped" }
        guard listed.map(\.0) == started.map({ "o\($0.observer)" }) else {
            violation("event \(event) traced \(listed) but its event frames went to \(started.map(\.observer))")
        }
        for (i, (hop, entry)) in zip(started, listed).enumerated() {
            let reply = entry.1
            let isLast = i == started.count - 1
            let sent = (answers[event] ?? []).filter { $0.connection == hop.connection && $0.sequence > hop.sequence }
            switch reply {
            case "next":
                guard sent.contains(where: { if case .next = $0.answer { true } else { false } }) else {
                    violation("hop o\(hop.observer) of event \(event) traced next unanswered")
                }
            case "stop", "complete":
                guard isLast else { violation("event \(event) went on after \(reply)") }
                let matches = sent.contains { answer in
                    switch answer.answer {
                    case .stop: reply == "stop"
                    case .complete: reply == "complete"
                    case .next: false
                    }
                }
                if !matches { violation("hop o\(hop.observer) of event \(event) traced \(reply) unanswered") }
            case "invalid":
                seenInvalid += 1
                guard sent.contains(where: { if case .complete = $0.answer { true } else { false } }) else {
                    violation("hop o\(hop.observer) of event \(event) traced invalid without a completion")
                }
            case "timeout":
                seenHopTimeouts += 1
                let limit = UInt64(configuration.hopTimeoutMs) * 1_000_000
                if now < hop.sentAt + limit { violation("hop o\(hop.observer) of event \(event) timed out early") }
            case "gone":
                seenGone += 1
                if let holder = observers[hop.observer], holder != context.input {
                    violation("hop o\(hop.observer) of event \(event) traced gone, but it is held by c\(holder)")
                }
            default:
                violation("trace reply \(reply)")
            }
        }
        let last = listed.last
        let by = view.string("by")
        let value = view["value"]?.raw ?? []
        switch outcome {
        case "completed":
            guard last?.1 == "complete", by == last?.0 else { violation("completed by \(String(describing: by)) after \(listed)") }
            let hop = started[started.count - 1]
            let offered = (answers[event] ?? []).compactMap { answer -> [UInt8]? in
                guard answer.connection == hop.connection, answer.sequence > hop.sequence, case .complete(_, let v) = answer.answer else {
                    return nil
                }
                return v ?? Array("null".utf8)
            }
            if !offered.contains(value) { violation("event \(event) completed with \(Session.text(value)), which its observer did not send") }
        case "stopped":
            guard last?.1 == "stop", by == last?.0, value == Array("null".utf8) else {
                violation("stopped by \(String(describing: by)) after \(listed)")
            }
        case "unhandled":
            guard view["by"]?.kind == .null, value == Array("null".utf8), !listed.contains(where: { $0.1 == "complete" || $0.1 == "stop" }) else {
                violation("unhandled with by \(String(describing: by)) after \(listed)")
            }
        default:
            violation("outcome \(outcome)")
        }
        if view["retained"]?.kind != .null && !(outcome == "unhandled" && name == "didReceive") {
            violation("event \(event) (\(name), \(outcome)) retained its payload")
        }
    }

    /// An invoke's reply: a relayed return byte for byte, or an error the broker makes for
    /// a reason the model can see. `error` is the raw error object, `result` the raw result.
    func checkInvokeReply(_ pending: Pending, error: [UInt8]?, result: [UInt8]?, to id: ConnectionID) {
        let callID = calls.first { $0.value.invoker == id && $0.value.requestID == pending.id }?.key
        if let relay = context.relay, relay.call == callID {
            context.relay?.done = true
            calls[relay.call] = nil
            let relayed: [UInt8]?
            switch relay.body {
            case .result(let raw): relayed = result == raw ? raw : nil
            case .error(let raw): relayed = error == raw ? raw : nil
            }
            if relayed == nil { violation("call \(relay.call) returned \(relay.body) but the invoker got \(Session.text(result ?? error ?? []))") }
            return
        }
        guard let error, let code = FrameView(error)?.string("code") else {
            violation("invoke \(pending.id) got a result no return carried")
        }
        switch code {
        case "not_implemented":
            // At once, or when it starts after a write it was held behind.
            if pending.step != stepNumber && !context.afterWrite { violation("invoke \(pending.id) got \(code) late") }
        case "bad_request":
            if pending.step != stepNumber && !context.afterWrite { violation("invoke \(pending.id) got \(code) late") }
            if let request = pending.request, !overLimit(request, from: id) { violation("invoke \(pending.id) refused below the call limit") }
        case "shutting_down":
            if !context.shuttingDown { violation("invoke \(pending.id) got shutting_down outside shutdown") }
        case "timeout":
            guard let callID, let call = calls[callID] else { violation("invoke \(pending.id) timed out without a call") }
            if now < call.sentAt + UInt64(configuration.callTimeoutMs) * 1_000_000 { violation("call \(callID) timed out early") }
            calls[callID] = nil
        case "handler_gone":
            guard let callID, let call = calls[callID] else { violation("invoke \(pending.id) got handler_gone without a call") }
            if peers[call.handlerConnection - 1].open && context.input != call.handlerConnection {
                violation("call \(callID) got handler_gone while c\(call.handlerConnection) is open")
            }
            calls[callID] = nil
        default:
            violation("invoke \(pending.id) answered with \(code)")
        }
    }

    // MARK: Frames that are not replies

    func checkEvent(_ view: FrameView, to id: ConnectionID) {
        guard view.hasExactly(["op", "event", "observer", "name", "payload"]), let event = view.integer("event"),
            let observer = view.number("observer", prefix: "o"), view.string("name") != nil
        else { violation("event fields \(view.keys)") }
        guard observers[observer] == id else {
            violation("event \(event) for o\(observer) went to c\(id); the observer is held by \(String(describing: observers[observer]))")
        }
        if finishedEvents.contains(event) { violation("event \(event) sent to o\(observer) after it finished") }
        hops[event, default: []].append(Hop(observer: observer, connection: id, sequence: sequence, sentAt: now, step: stepNumber))
        remember(&peers[id - 1].events, event)
    }

    func checkEvicted(_ view: FrameView, to id: ConnectionID) {
        let kind = view["observer"] != nil ? "observer" : "handler"
        guard view.hasExactly(["op", kind, "by"]), let old = view.string(kind), let by = view.string("by"),
            let n = Int(old.dropFirst()), old.first == by.first
        else { violation("evicted fields \(view.keys)") }
        if kind == "observer" {
            guard observers[n] == id else { violation("c\(id) told of evicting \(old), which it does not hold") }
            observers[n] = nil
        } else {
            guard handlers[n] == id else { violation("c\(id) told of evicting \(old), which it does not hold") }
            handlers[n] = nil
        }
        context.evicted.insert(old)
    }

    func checkCall(_ view: FrameView, to id: ConnectionID) {
        guard view.hasExactly(["op", "call", "handler", "channel", "method", "arguments", "from"]),
            let call = view.integer("call"), let handler = view.number("handler", prefix: "h")
        else { violation("call fields \(view.keys)") }
        guard handlers[handler] == id else { violation("call \(call) for h\(handler) went to c\(id), which does not hold it") }
        // The invoke starting now: its connection's oldest one with neither a call nor a reply
        // (one held behind a write starts in the step that reports the write).
        guard let from = view.number("from", prefix: "c"), from >= 1, from <= peers.count,
            let invoke = peers[from - 1].outstanding.first(where: { pending in
                guard case .invoke? = pending.request else { return false }
                return !calls.values.contains { $0.invoker == from && $0.requestID == pending.id }
            }),
            invoke.step == stepNumber || context.afterWrite
        else {
            violation("call \(call) from \(String(describing: view.string("from"))) without an invoke starting in this step")
        }
        guard calls[call] == nil else { violation("call id \(call) used twice") }
        calls[call] = CallRecord(invoker: from, requestID: invoke.id, handlerConnection: id, sentAt: now)
        remember(&peers[id - 1].calls, call)
    }

    func checkSeen(_ view: FrameView, to id: ConnectionID) {
        guard view.hasExactly(["op", "dir", "client", "frame"]), let dir = view.string("dir"), dir == "in" || dir == "out",
            view["frame"]?.kind == .object
        else { violation("seen fields \(view.keys)") }
        guard peers[id - 1].monitoring else { violation("c\(id) was sent a seen frame without monitoring") }
        if view.string("client") == "c\(id)" { violation("c\(id) was mirrored its own frame") }
    }

    func remember(_ list: inout [Int64], _ value: Int64) {
        list.append(value)
        if list.count > Session.remembered { list.removeFirst() }
    }

    static func text(_ bytes: [UInt8]) -> String {
        String(decoding: bytes.prefix(300), as: UTF8.self)
    }
}
