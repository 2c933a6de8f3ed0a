// Durable writes (`persistsState`): a change to slots or categories is asked of the
// transport as a `.persist` action and held here, with its reply, until the transport
// reports it written or failed. It must never apply a change or answer before that.
//
// A write in flight makes its key (a slot, or the categories) busy:
//
//     request ──▶ key busy, or its connection has an earlier write in flight and the
//        │        request would not write itself? ──yes──▶ waits (per connection, in order)
//        │ no                                                    │
//        ▼                                                       │ a write finishes
//     handled ──writes──▶ .persist, key busy ──persisted──▶ applied + result,
//                                                   or nothing changed + storage_failed
//
// So every request sees the state as the writes before it left it, a connection's
// replies keep the order of its requests, and writes of one connection to different keys
// are in flight together (the transport syncs them with one fdatasync). Posts and invokes,
// whose replies come later anyway, are never held back.
import NotifBusProtocol

extension Broker {
    /// Handles a request now, or holds it back behind the durable writes it depends on.
    mutating func admit(_ input: WaitingInput, from c: ConnectionID, now: Instant) {
        guard let client = clients[c] else { return }
        switch input {
        case .request(_, let request) where Broker.neverWaits(request): return start(input, from: c, now: now)
        case .rejected(nil, _, _): return start(input, from: c, now: now)  // an error frame answers nothing in order
        default: break
        }
        if client.waiting.isEmpty && canStart(input, from: client) { return start(input, from: c, now: now) }
        if client.waiting.isEmpty { waitingClients.append(c) }
        client.waiting.append(input)
    }

    mutating func start(_ input: WaitingInput, from c: ConnectionID, now: Instant) {
        switch input {
        case .request(let rid, let request): handle(request, id: rid, from: c, now: now)
        case .rejected(let rid, let code, let message): reply(to: c, rid, error: code, message)
        }
    }

    /// Whether `input` may be handled now: its key is not being written, and it will not
    /// answer ahead of a write its connection is still waiting for.
    func canStart(_ input: WaitingInput, from client: ClientRecord) -> Bool {
        guard !writes.isEmpty else { return true }
        guard case .request(_, let request) = input else { return client.writesInFlight == 0 }
        if let key = Broker.stateKey(of: request), busyKeys.contains(key) { return false }
        return client.writesInFlight == 0 || willWrite(request)
    }

    /// Posts and invokes are answered later in any case and read no slot: they are never
    /// held back (a `didReceive` is checked against the categories already written).
    static func neverWaits(_ request: Request) -> Bool {
        switch request {
        case .post, .invoke: return true
        default: return false
        }
    }

    /// The durable state a request reads or changes.
    static func stateKey(of request: Request) -> StateKey? {
        switch request {
        case .put(let slot, _), .take(let slot, _), .peek(let slot): return .slot(slot)
        case .setCategories, .getCategories: return .categories
        default: return nil
        }
    }

    /// Whether handling `request` now starts a durable write (rather than answering at once).
    func willWrite(_ request: Request) -> Bool {
        switch request {
        case .put(let slot, nil):
            return slots[slot] != nil
        case .put(let slot, let value?):
            if takeQueues[slot] != nil { return false }
            return slotLimitError(slot, value) == nil
        case .take(let slot, _):
            return slots[slot] != nil
        case .setCategories:
            return true
        default:
            return false
        }
    }

    /// Starts a durable write; without `persistsState` the change is applied at once.
    mutating func beginWrite(_ key: StateKey, _ record: StateRecord, then completion: WriteCompletion,
                             reservedSlots: Int = 0, reservedBytes: Int = 0) {
        guard configuration.persistsState else { return complete(completion, written: true, now: 0) }
        let id = nextWriteID
        nextWriteID += 1
        writes[id] = PendingWrite(key: key, completion: completion, reservedSlots: reservedSlots, reservedBytes: reservedBytes)
        busyKeys.insert(key)
        self.reservedSlots += reservedSlots
        reservedSlotBytes += reservedBytes
        var acknowledgement: Acknowledgement? = nil
        switch completion {
        case .put(let c, let rid, _, _, _), .empty(let c, let rid, _), .take(let c, let rid, _), .categories(let c, let rid, _):
            clients[c]?.writesInFlight += 1
            acknowledgement = Acknowledgement(connection: c, requestID: rid)
        case .retention:
            break
        }
        actions.append(.persist(id, record, acknowledges: acknowledgement))
    }

    /// Applies a finished write (if it was written) and answers for it.
    mutating func complete(_ completion: WriteCompletion, written: Bool, now: Instant) {
        switch completion {
        case .put(let c, let rid, let slot, let value, let replaced):
            if written { setSlot(slot, value) }
            answerWrite(c, rid, written) { b in
                b.literal(replaced ? "{\"replaced\":true,\"delivered\":false}" : "{\"replaced\":false,\"delivered\":false}")
            }
        case .empty(let c, let rid, let slot):
            if written { _ = removeSlot(slot) }
            answerWrite(c, rid, written) { b in b.literal("{\"replaced\":true,\"delivered\":false}") }
        case .take(let c, let rid, let slot):
            let value = slots[slot] ?? Array("null".utf8)
            if written { _ = removeSlot(slot) }
            answerWrite(c, rid, written) { b in b.raw(value) }
        case .categories(let c, let rid, let set):
            if written { categories = set }
            answerWrite(c, rid, written) { b in
                b.literal("{\"count\":")
                b.int(Int64(set.categories.count))
                b.literal("}")
            }
        case .retention(let event):
            if written { setSlot(Broker.launchSlot, event.post.payload ?? Array("null".utf8)) }
            sendPostResult(event, .unhandled, by: nil, value: nil, retained: written)
        }
    }

    /// The reply to a request whose write finished: its result, or `storage_failed`.
    mutating func answerWrite(_ c: ConnectionID, _ rid: RequestID, _ written: Bool, result: (inout FrameBuilder) -> Void) {
        guard let client = clients[c] else { return }
        if configuration.persistsState { client.writesInFlight -= 1 }
        guard written else {
            return reply(to: c, rid, error: .storageFailed, "the change could not be written to disk; nothing was changed")
        }
        var f = Broker.replyHead(rid)
        result(&f)
        f.literal("}")
        emit(to: c, f.finish())
    }

    /// Goes on with what waited: launch retentions first, then each waiting connection's
    /// requests in order, as far as each can start.
    mutating func resumeWaiting(now: Instant) {
        while let event = waitingRetentions.first, !busyKeys.contains(.slot(Broker.launchSlot)) {
            _ = waitingRetentions.popFirst()
            retainLaunchPayload(event)
        }
        guard !waitingClients.isEmpty else { return }
        let order = waitingClients
        waitingClients.removeAll()
        for c in order {
            guard let client = clients[c] else { continue }
            while let input = client.waiting.first, canStart(input, from: client) {
                _ = client.waiting.popFirst()
                start(input, from: c, now: now)
                if clients[c] == nil { break }
            }
            if clients[c] != nil && !client.waiting.isEmpty { waitingClients.append(c) }
        }
    }
}
