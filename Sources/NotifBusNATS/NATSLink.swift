// The bridge's one NATS connection, through cnats: connecting with endless reconnects,
// JetStream streams and the durable pull consumer, fetching, acks, publishing with
// Nats-Msg-Id, and core request/reply, for the bridge and its benchmark. It knows nothing of
// notifbus's broker; cnats speaks the NATS protocol.
@_exported import CNats
import Glibc
import NotifBusClient

/// A cnats failure: the call, the status text, and JetStream's error code when there is one.
public struct NATSError: Error, CustomStringConvertible {
    public let call: String
    public let status: natsStatus
    public let jsCode: jsErrCode
    public let detail: String

    public init(_ call: String, _ status: natsStatus, _ jsCode: jsErrCode = jsErrCode(rawValue: 0)) {
        self.call = call
        self.status = status
        self.jsCode = jsCode
        var text = String(cString: natsStatus_GetText(status))
        if let last = nats_GetLastError(nil) { text += " (" + String(cString: last) + ")" }
        detail = text
    }

    public var description: String { "\(call): \(detail)" + (jsCode.rawValue != 0 ? " [jetstream \(jsCode.rawValue)]" : "") }
}

/// One message as cnats holds it; `NATSLink` frees it with `destroy()`.
public struct NATSMessage: @unchecked Sendable {
    public let raw: OpaquePointer

    public init(raw: OpaquePointer) { self.raw = raw }

    public var subject: String { String(cString: natsMsg_GetSubject(raw)) }
    public var reply: String? { natsMsg_GetReply(raw).map { String(cString: $0) } }

    public var data: [UInt8] {
        let count = Int(natsMsg_GetDataLength(raw))
        guard count > 0, let base = natsMsg_GetData(raw) else { return [] }
        return base.withMemoryRebound(to: UInt8.self, capacity: count) { Array(UnsafeBufferPointer(start: $0, count: count)) }
    }

    /// The first value of header `key`, or nil.
    public func header(_ key: String) -> String? {
        var value: UnsafePointer<CChar>? = nil
        guard natsMsgHeader_Get(raw, key, &value) == NATS_OK, let value else { return nil }
        return String(cString: value)
    }

    /// JetStream's stream sequence and delivery count of a consumed message.
    public var jetStreamPosition: (streamSequence: UInt64, delivered: UInt64)? {
        var meta: UnsafeMutablePointer<jsMsgMetaData>? = nil
        guard natsMsg_GetMetaData(&meta, raw) == NATS_OK, let meta else { return nil }
        defer { jsMsgMetaData_Destroy(meta) }
        return (meta.pointee.Sequence.Stream, meta.pointee.NumDelivered)
    }

    public func inProgress() -> natsStatus { natsMsg_InProgress(raw, nil) }
    public func destroy() { natsMsg_Destroy(raw) }
}

/// A message to publish: subject, body, headers (`Nats-Msg-Id` among them when it is a JetStream one).
public struct OutboundMessage: Sendable {
    public var subject: String
    public var body: [UInt8]
    public var headers: [(String, String)]

    public init(subject: String, body: [UInt8], headers: [(String, String)]) {
        self.subject = subject
        self.body = body
        self.headers = headers
    }

    public var msgID: String? { headers.first { $0.0 == NATSLink.msgIDHeader }?.1 }
}

/// The cnats connection and JetStream context, used from several threads (cnats is thread-safe).
public final class NATSLink: @unchecked Sendable {
    public static let msgIDHeader = "Nats-Msg-Id"

    private var connection: OpaquePointer? = nil
    private var jetStream: OpaquePointer? = nil
    private let failedLock = Lock()
    /// Msg ids whose asynchronous publish was refused or timed out since the last `takeFailed()`.
    private var failedIDs: Set<String> = []
    private var handlerBoxes: [Unmanaged<HandlerBox>] = []
    /// Held while acks wait for their confirmations (`ackConfirmed`): one caller at a time.
    private let ackLock = Lock()
    /// Where the consumer leader's confirmations of acks come, `<inbox>.<call>-<index>`.
    private var ackInbox: (prefix: String, sub: OpaquePointer)? = nil
    private var ackCalls = 0
    /// Called (on a cnats thread) with a line to log when the connection drops or comes back.
    public let log: @Sendable (String) -> Void

    /// Connects to any of `urls`; with no server up it keeps trying in the background
    /// (cnats' retry on failed connect), so the bridge starts even while NATS is down.
    /// With `retryFirstConnect` false (a command that does one thing), no server up is an error.
    public init(urls: [String], name: String, retryFirstConnect: Bool = true, log: @escaping @Sendable (String) -> Void) throws(NATSError) {
        self.log = log
        var options: OpaquePointer? = nil
        var s = natsOptions_Create(&options)
        guard s == NATS_OK, let options else { throw NATSError("natsOptions_Create", s) }
        defer { natsOptions_Destroy(options) }
        var cStrings = urls.map { strdup($0) }
        defer { cStrings.forEach { free($0) } }
        s = cStrings.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buffer.count) {
                natsOptions_SetServers(options, $0, Int32(buffer.count))
            }
        }
        guard s == NATS_OK else { throw NATSError("natsOptions_SetServers", s) }
        natsOptions_SetName(options, name)
        // Reconnect forever, quickly: a device outlives any NATS node.
        natsOptions_SetMaxReconnect(options, -1)
        natsOptions_SetReconnectWait(options, 250)
        natsOptions_SetReconnectBufSize(options, 8 * 1024 * 1024)
        natsOptions_SetPingInterval(options, 2000)
        natsOptions_SetMaxPingsOut(options, 2)
        natsOptions_SetTimeout(options, 2000)
        let context = Unmanaged.passUnretained(self).toOpaque()
        natsOptions_SetDisconnectedCB(
            options,
            { _, closure in
                Unmanaged<NATSLink>.fromOpaque(closure!).takeUnretainedValue().log("NATS connection lost; reconnecting")
            }, context)
        natsOptions_SetReconnectedCB(
            options,
            { nc, closure in
                var url = [CChar](repeating: 0, count: 256)
                natsConnection_GetConnectedUrl(nc, &url, url.count)
                let text = String(decoding: url.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                Unmanaged<NATSLink>.fromOpaque(closure!).takeUnretainedValue().log("NATS reconnected to \(text)")
            }, context)
        if retryFirstConnect { natsOptions_SetRetryOnFailedConnect(options, true, nil, nil) }
        var nc: OpaquePointer? = nil
        s = natsConnection_Connect(&nc, options)
        // NATS_NOT_YET_CONNECTED: retrying in the background, which is what a device wants.
        guard s == NATS_OK || s == NATS_NOT_YET_CONNECTED, let nc else { throw NATSError("natsConnection_Connect", s) }
        connection = nc
        var jsOptions = jsOptions()
        jsOptions_Init(&jsOptions)
        jsOptions.Wait = 5000
        jsOptions.PublishAsync.MaxPending = 4096
        jsOptions.PublishAsync.ErrHandler = { _, failure, closure in
            guard let failure, let closure, let msg = failure.pointee.Msg else { return }
            let link = Unmanaged<NATSLink>.fromOpaque(closure).takeUnretainedValue()
            if let id = NATSMessage(raw: msg).header(NATSLink.msgIDHeader) { link.noteFailed(id) }
        }
        jsOptions.PublishAsync.ErrHandlerClosure = context
        var js: OpaquePointer? = nil
        s = natsConnection_JetStream(&js, nc, &jsOptions)
        guard s == NATS_OK else { throw NATSError("natsConnection_JetStream", s) }
        jetStream = js
    }

    deinit {
        if let ackInbox { natsSubscription_Destroy(ackInbox.sub) }
        if let jetStream { jsCtx_Destroy(jetStream) }
        if let connection {
            natsConnection_Close(connection)
            natsConnection_Destroy(connection)
        }
        handlerBoxes.forEach { $0.release() }
    }

    /// Whether the connection is up now.
    public var isConnected: Bool { connection.map { natsConnection_Status($0) == NATS_CONN_STATUS_CONNECTED } ?? false }

    private func noteFailed(_ id: String) { failedLock.withLock { _ = failedIDs.insert(id) } }

    /// The msg ids whose asynchronous publish failed since the last call.
    public func takeFailed() -> Set<String> {
        failedLock.withLock {
            defer { failedIDs.removeAll() }
            return failedIDs
        }
    }

    // MARK: Streams and the consumer

    /// Whether `stream` exists (nil when JetStream did not answer).
    public func streamExists(_ stream: String) -> Bool? {
        var info: UnsafeMutablePointer<jsStreamInfo>? = nil
        var code = jsErrCode(rawValue: 0)
        let s = js_GetStreamInfo(&info, jetStream, stream, nil, &code)
        if let info { jsStreamInfo_Destroy(info) }
        if s == NATS_OK { return true }
        if s == NATS_NOT_FOUND || code == JSStreamNotFoundErr { return false }
        return nil
    }

    /// What a stream shared by many devices keeps (Protocol/NATS.md §2).
    public struct SharedLimits: Sendable {
        /// Work-queue retention: an acked message is removed, so the stream holds what
        /// devices have not applied yet.
        public var workQueue: Bool
        /// Messages kept per subject; a publish past it is refused (discard new, per subject).
        /// Nil: no per-subject limit, and the oldest messages go at the stream's limits.
        public var maxPerSubject: Int?
        public var maxAgeMs: Int64

        public init(workQueue: Bool, maxPerSubject: Int?, maxAgeMs: Int64) {
            self.workQueue = workQueue
            self.maxPerSubject = maxPerSubject
            self.maxAgeMs = maxAgeMs
        }
    }

    /// Creates a file-backed stream of `subjects` with `replicas` copies and a duplicate
    /// window of `duplicateWindowMs`, and `limits` when given, unless it exists.
    public func createStream(
        _ stream: String, subjects: [String], replicas: Int, duplicateWindowMs: Int64, limits: SharedLimits? = nil
    ) throws(NATSError) {
        if streamExists(stream) == true { return }
        var config = jsStreamConfig()
        jsStreamConfig_Init(&config)
        let name = strdup(stream)!
        defer { free(name) }
        var cSubjects: [UnsafePointer<CChar>?] = subjects.map { UnsafePointer(strdup($0)) }
        defer { cSubjects.forEach { free(UnsafeMutablePointer(mutating: $0)) } }
        config.Name = UnsafePointer(name)
        config.Storage = js_FileStorage
        config.Replicas = Int64(replicas)
        config.Duplicates = duplicateWindowMs * 1_000_000
        if let limits {
            if limits.workQueue { config.Retention = js_WorkQueuePolicy }
            if let perSubject = limits.maxPerSubject {
                config.MaxMsgsPerSubject = Int64(perSubject)
                config.Discard = js_DiscardNew
                config.DiscardNewPerSubject = true
            }
            config.MaxAge = limits.maxAgeMs * 1_000_000
        }
        config.SubjectsLen = Int32(cSubjects.count)
        var info: UnsafeMutablePointer<jsStreamInfo>? = nil
        var code = jsErrCode(rawValue: 0)
        let s = cSubjects.withUnsafeMutableBufferPointer { buffer -> natsStatus in
            config.Subjects = buffer.baseAddress
            return js_AddStream(&info, jetStream, &config, nil, &code)
        }
        if let info { jsStreamInfo_Destroy(info) }
        guard s == NATS_OK else { throw NATSError("js_AddStream \(stream)", s, code) }
    }

    /// Creates the durable pull consumer with explicit acks unless it exists; an existing one
    /// is given the AckWait `ackWaitMs(held)` decides from how many messages it holds unacked
    /// (delivered to an earlier run), and `maxAckPending`, in one update when they differ.
    /// Returns that count, 0 for a new consumer.
    public func ensureConsumer(
        stream: String, durable: String, filter: String? = nil, ackWaitMs: (Int) -> Int64, maxAckPending: Int
    ) throws(NATSError) -> Int {
        var info: UnsafeMutablePointer<jsConsumerInfo>? = nil
        var code = jsErrCode(rawValue: 0)
        var s = js_GetConsumerInfo(&info, jetStream, stream, durable, nil, &code)
        if s == NATS_OK, let existing = info {
            defer { jsConsumerInfo_Destroy(existing) }
            let held = Int(existing.pointee.NumAckPending)
            let wait = ackWaitMs(held)
            if let config = existing.pointee.Config,
                config.pointee.AckWait != wait * 1_000_000 || config.pointee.MaxAckPending != Int64(maxAckPending)
            {
                try update(stream: stream, config: config, ackWaitMs: wait, maxAckPending: maxAckPending)
            }
            return held
        }
        guard s == NATS_NOT_FOUND || code == JSConsumerNotFoundErr else { throw NATSError("js_GetConsumerInfo \(durable)", s, code) }
        var config = jsConsumerConfig()
        jsConsumerConfig_Init(&config)
        let cDurable = strdup(durable)!
        defer { free(cDurable) }
        config.Durable = UnsafePointer(cDurable)
        config.AckPolicy = js_AckExplicit
        config.AckWait = ackWaitMs(0) * 1_000_000
        config.MaxAckPending = Int64(maxAckPending)
        config.DeliverPolicy = js_DeliverAll
        let cFilter = filter.map { strdup($0)! }
        defer { free(cFilter) }
        config.FilterSubject = cFilter.map { UnsafePointer($0) }
        info = nil
        s = js_AddConsumer(&info, jetStream, stream, &config, nil, &code)
        if let info { jsConsumerInfo_Destroy(info) }
        guard s == NATS_OK else { throw NATSError("js_AddConsumer \(durable)", s, code) }
        return 0
    }

    /// Sets the AckWait of the existing consumer `durable`, keeping the rest of its configuration.
    /// JetStream checks its pending messages again at once against the new AckWait.
    public func setAckWait(stream: String, durable: String, ackWaitMs: Int64) throws(NATSError) {
        var info: UnsafeMutablePointer<jsConsumerInfo>? = nil
        var code = jsErrCode(rawValue: 0)
        let s = js_GetConsumerInfo(&info, jetStream, stream, durable, nil, &code)
        guard s == NATS_OK, let existing = info, let config = existing.pointee.Config else {
            throw NATSError("js_GetConsumerInfo \(durable)", s, code)
        }
        defer { jsConsumerInfo_Destroy(existing) }
        try update(stream: stream, config: config, ackWaitMs: ackWaitMs, maxAckPending: Int(config.pointee.MaxAckPending))
    }

    private func update(stream: String, config: UnsafeMutablePointer<jsConsumerConfig>, ackWaitMs: Int64, maxAckPending: Int) throws(NATSError) {
        config.pointee.AckWait = ackWaitMs * 1_000_000
        config.pointee.MaxAckPending = Int64(maxAckPending)
        var info: UnsafeMutablePointer<jsConsumerInfo>? = nil
        var code = jsErrCode(rawValue: 0)
        let s = js_UpdateConsumer(&info, jetStream, stream, config, nil, &code)
        if let info { jsConsumerInfo_Destroy(info) }
        guard s == NATS_OK else { throw NATSError("js_UpdateConsumer", s, code) }
    }

    /// Binds a pull subscription to the existing durable consumer.
    public func pullSubscribe(stream: String, durable: String) throws(NATSError) -> OpaquePointer {
        try NATSLink.pullSubscribe(jetStream!, stream: stream, durable: durable)
    }

    /// Binds a pull subscription of the JetStream context `jetStream` to the existing durable consumer.
    public static func pullSubscribe(_ jetStream: OpaquePointer, stream: String, durable: String) throws(NATSError) -> OpaquePointer {
        var code = jsErrCode(rawValue: 0)
        var subOptions = jsSubOptions()
        jsSubOptions_Init(&subOptions)
        let cStream = strdup(stream)!, cConsumer = strdup(durable)!
        defer { free(cStream); free(cConsumer) }
        subOptions.Stream = UnsafePointer(cStream)
        subOptions.Consumer = UnsafePointer(cConsumer)
        var sub: OpaquePointer? = nil
        let s = js_PullSubscribe(&sub, jetStream, nil, durable, nil, &subOptions, &code)
        guard s == NATS_OK, let sub else { throw NATSError("js_PullSubscribe \(durable)", s, code) }
        return sub
    }

    /// Up to `batch` messages, waiting at most `timeoutMs`; empty on timeout. Other failures
    /// (no connection, a leader election under way) are thrown for the caller to retry.
    public func fetch(_ sub: OpaquePointer, batch: Int, timeoutMs: Int64) throws(NATSError) -> [NATSMessage] {
        var list = natsMsgList()
        var code = jsErrCode(rawValue: 0)
        let s = natsSubscription_Fetch(&list, sub, Int32(batch), timeoutMs, &code)
        if s == NATS_TIMEOUT { return [] }
        guard s == NATS_OK else { throw NATSError("natsSubscription_Fetch", s, code) }
        var messages: [NATSMessage] = []
        for i in 0..<Int(list.Count) {
            if let m = list.Msgs[i] { messages.append(NATSMessage(raw: m)) }
            list.Msgs[i] = nil
        }
        natsMsgList_Destroy(&list)
        return messages
    }

    // MARK: Acks

    /// What became of acks sent with `ackConfirmed`.
    public struct AckReport: Sendable, Equatable {
        /// Acks the consumer never confirmed before the time ran out.
        public var unconfirmed: Int
        /// Acks sent again because the first copy was not confirmed.
        public var resent: Int
    }

    /// Acks `messages` and waits for JetStream to confirm each one, sending again every
    /// `retryMs` those not confirmed, until all are or `timeoutMs` passed.
    ///
    /// A plain ack (`natsMsg_Ack`) is fire-and-forget: only the consumer's leader listens on
    /// the ack subject, so an ack sent while the leader changes reaches no one and the
    /// message stays with the consumer until AckWait brings it back. Here each ack is a
    /// request (what `natsMsg_AckSync` sends, pipelined): the leader answers once it took the
    /// ack, and no answer, or NATS's no-responders status (no leader yet), means it is sent
    /// again. An ack sent twice changes nothing: the message is no longer pending. The
    /// leader answers before its replicas have the ack (nats-server 2.9), so a leader lost
    /// at that moment can still lose a confirmed ack; AckWait then brings the message back.
    public func ackConfirmed(_ messages: [NATSMessage], retryMs: Int64, timeoutMs: Int64) -> AckReport {
        guard !messages.isEmpty else { return AckReport(unconfirmed: 0, resent: 0) }
        return ackLock.withLock {
            let deadline = NATSLink.monotonicMs() + timeoutMs
            guard let inbox = ackInbox ?? makeAckInbox() else {
                return AckReport(unconfirmed: messages.count, resent: 0)
            }
            ackCalls += 1
            let call = String(ackCalls)
            var waiting = Set(messages.indices)
            var resent = 0
            var firstRound = true
            while !waiting.isEmpty {
                let now = NATSLink.monotonicMs()
                if now >= deadline { break }
                // Acks sent while cnats reconnects wait in its buffer and go once it is back:
                // sending them again meanwhile would only fill it.
                if !firstRound && !isConnected {
                    usleep(250_000)
                    continue
                }
                for index in waiting.sorted() {
                    guard let reply = messages[index].reply else {
                        waiting.remove(index)
                        continue
                    }
                    _ = natsConnection_PublishRequestString(connection, reply, inbox.prefix + "." + call + "-" + String(index), "+ACK")
                    if !firstRound { resent += 1 }
                }
                firstRound = false
                // The round ends when every ack of it has an answer (a confirmation, or NATS's
                // no-responders status, which cnats turns into NATS_NO_RESPONDERS and which
                // does not say for which ack), or at `retryMs`; what is left goes again.
                var answered = 0
                let sent = waiting.count
                let roundEnd = min(deadline, now + retryMs)
                answers: while !waiting.isEmpty && answered < sent {
                    let wait = roundEnd - NATSLink.monotonicMs()
                    if wait <= 0 { break }
                    var raw: OpaquePointer? = nil
                    switch natsSubscription_NextMsg(&raw, inbox.sub, wait) {
                    case NATS_OK:
                        guard let raw else { continue }
                        let answer = NATSMessage(raw: raw)
                        defer { answer.destroy() }
                        // `<prefix>.<call>-<index>`; answers to an earlier call are left over.
                        let token = answer.subject.split(separator: ".").last ?? ""
                        let parts = token.split(separator: "-")
                        guard parts.count == 2, parts[0] == call, let index = Int(parts[1]), waiting.contains(index) else { continue }
                        answered += 1
                        if answer.header("Status") == nil { waiting.remove(index) }
                    case NATS_NO_RESPONDERS: answered += 1
                    case NATS_SLOW_CONSUMER: continue
                    default: break answers
                    }
                }
                // Ended early with acks refused (no leader yet) or the connection down: a pause
                // before sending them again.
                if !waiting.isEmpty && NATSLink.monotonicMs() < roundEnd { usleep(100_000) }
            }
            return AckReport(unconfirmed: waiting.count, resent: resent)
        }
    }

    /// The subscription the ack confirmations come on, made once.
    private func makeAckInbox() -> (prefix: String, sub: OpaquePointer)? {
        var inbox: UnsafeMutablePointer<natsInbox>? = nil
        guard natsInbox_Create(&inbox) == NATS_OK, let inbox else { return nil }
        defer { natsInbox_Destroy(inbox) }
        let prefix = String(cString: inbox)
        var sub: OpaquePointer? = nil
        guard natsConnection_SubscribeSync(&sub, connection, prefix + ".*") == NATS_OK, let sub else { return nil }
        // The servers learn of the subscription before the first confirmation is sent to it.
        _ = natsConnection_FlushTimeout(connection, 1000)
        ackInbox = (prefix, sub)
        return ackInbox
    }

    static func monotonicMs() -> Int64 {
        var clock = timespec()
        clock_gettime(CLOCK_MONOTONIC, &clock)
        return Int64(clock.tv_sec) * 1000 + Int64(clock.tv_nsec) / 1_000_000
    }

    // MARK: Publishing

    private func makeMessage(_ m: OutboundMessage, reply: String? = nil) throws(NATSError) -> OpaquePointer {
        var msg: OpaquePointer? = nil
        let s = m.body.withUnsafeBufferPointer { body in
            natsMsg_Create(
                &msg, m.subject, reply, body.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) },
                Int32(body.count))
        }
        guard s == NATS_OK, let msg else { throw NATSError("natsMsg_Create", s) }
        for (key, value) in m.headers { natsMsgHeader_Set(msg, key, value) }
        return msg
    }

    /// Publishes to JetStream without waiting for the stream's ack; failures, and acks that do
    /// not come within `maxWaitMs` (so that none stays pending forever), land in `takeFailed()`.
    public func publishAsync(_ m: OutboundMessage, maxWaitMs: Int64) throws(NATSError) {
        var msg: OpaquePointer? = try makeMessage(m)
        var options = jsPubOptions()
        jsPubOptions_Init(&options)
        options.MaxWait = maxWaitMs
        let s = js_PublishMsgAsync(jetStream, &msg, &options)
        if let msg { natsMsg_Destroy(msg) }
        guard s == NATS_OK else { throw NATSError("js_PublishMsgAsync \(m.subject)", s) }
    }

    /// Waits until every asynchronous publish has its ack (or failed), at most `timeoutMs`.
    public func publishComplete(timeoutMs: Int64) throws(NATSError) {
        var options = jsPubOptions()
        jsPubOptions_Init(&options)
        options.MaxWait = timeoutMs
        let s = js_PublishAsyncComplete(jetStream, &options)
        guard s == NATS_OK else { throw NATSError("js_PublishAsyncComplete", s) }
    }

    /// Publishes to JetStream and waits for the ack. Returns whether the stream called it a duplicate.
    @discardableResult
    public func publish(_ m: OutboundMessage, timeoutMs: Int64 = 5000) throws(NATSError) -> Bool {
        try publishAcked(m, timeoutMs: timeoutMs).duplicate
    }

    /// Publishes to JetStream and waits for the ack: the stream, the message's sequence in it,
    /// and whether the stream called it a duplicate (then the sequence is the first copy's).
    public func publishAcked(_ m: OutboundMessage, timeoutMs: Int64) throws(NATSError) -> (stream: String, sequence: UInt64, duplicate: Bool) {
        let msg = try makeMessage(m)
        defer { natsMsg_Destroy(msg) }
        var options = jsPubOptions()
        jsPubOptions_Init(&options)
        options.MaxWait = timeoutMs
        var ack: UnsafeMutablePointer<jsPubAck>? = nil
        var code = jsErrCode(rawValue: 0)
        let s = js_PublishMsg(&ack, jetStream, msg, &options, &code)
        defer { if let ack { jsPubAck_Destroy(ack) } }
        guard s == NATS_OK, let ack else { throw NATSError("js_PublishMsg \(m.subject)", s, code) }
        return (ack.pointee.Stream.map { String(cString: $0) } ?? "", ack.pointee.Sequence, ack.pointee.Duplicate)
    }

    /// The stream sequence below which the consumer `durable` has every message acked.
    public func ackFloor(stream: String, durable: String) throws(NATSError) -> UInt64 {
        var info: UnsafeMutablePointer<jsConsumerInfo>? = nil
        var code = jsErrCode(rawValue: 0)
        let s = js_GetConsumerInfo(&info, jetStream, stream, durable, nil, &code)
        defer { if let info { jsConsumerInfo_Destroy(info) } }
        guard s == NATS_OK, let info else { throw NATSError("js_GetConsumerInfo \(durable)", s, code) }
        return info.pointee.AckFloor.Stream
    }

    /// The duplicate window of `stream`, in nanoseconds (how long it remembers a
    /// `Nats-Msg-Id`), and when it stored its last message, in nanoseconds since the epoch
    /// on the server's clock (0 when it never stored one).
    public func duplicateWindow(stream: String) throws(NATSError) -> (windowNs: Int64, lastStoredNs: Int64) {
        var info: UnsafeMutablePointer<jsStreamInfo>? = nil
        var code = jsErrCode(rawValue: 0)
        let s = js_GetStreamInfo(&info, jetStream, stream, nil, &code)
        defer { if let info { jsStreamInfo_Destroy(info) } }
        guard s == NATS_OK, let info, let config = info.pointee.Config else { throw NATSError("js_GetStreamInfo \(stream)", s, code) }
        return (config.pointee.Duplicates, info.pointee.State.LastTime)
    }

    /// The time message `sequence` of `stream` was stored, in nanoseconds since the epoch.
    public func storedTime(stream: String, sequence: UInt64) throws(NATSError) -> Int64 {
        var msg: OpaquePointer? = nil
        var code = jsErrCode(rawValue: 0)
        let s = js_GetMsg(&msg, jetStream, stream, sequence, nil, &code)
        defer { if let msg { natsMsg_Destroy(msg) } }
        guard s == NATS_OK, let msg else { throw NATSError("js_GetMsg \(stream) \(sequence)", s, code) }
        return natsMsg_GetTime(msg)
    }

    /// Reads the messages on `subject` that its stream stored from `startNs` on, oldest first,
    /// through an ordered consumer, until `visit` returns true (then true), every message the
    /// stream held when the consumer was made was read, or `timeoutMs` passed (then false).
    /// `visit` does not own the message.
    public func scan(subject: String, fromNs startNs: Int64, timeoutMs: Int64, _ visit: (NATSMessage) -> Bool) throws(NATSError) -> Bool {
        var subOptions = jsSubOptions()
        jsSubOptions_Init(&subOptions)
        subOptions.Ordered = true
        subOptions.Config.DeliverPolicy = js_DeliverByStartTime
        subOptions.Config.OptStartTime = startNs
        var sub: OpaquePointer? = nil
        var code = jsErrCode(rawValue: 0)
        var s = js_SubscribeSync(&sub, jetStream, subject, nil, &subOptions, &code)
        guard s == NATS_OK, let sub else { throw NATSError("js_SubscribeSync \(subject)", s, code) }
        defer {
            natsSubscription_Unsubscribe(sub)
            natsSubscription_Destroy(sub)
        }
        // What the consumer has delivered and has still to deliver is what the stream held.
        var info: UnsafeMutablePointer<jsConsumerInfo>? = nil
        s = natsSubscription_GetConsumerInfo(&info, sub, nil, &code)
        guard s == NATS_OK, let info else { throw NATSError("natsSubscription_GetConsumerInfo \(subject)", s, code) }
        var left = Int(info.pointee.Delivered.Consumer + info.pointee.NumPending)
        jsConsumerInfo_Destroy(info)
        var clock = timespec()
        clock_gettime(CLOCK_MONOTONIC, &clock)
        let deadline = Int64(clock.tv_sec) * 1000 + Int64(clock.tv_nsec) / 1_000_000 + timeoutMs
        while left > 0 {
            clock_gettime(CLOCK_MONOTONIC, &clock)
            let wait = deadline - (Int64(clock.tv_sec) * 1000 + Int64(clock.tv_nsec) / 1_000_000)
            guard wait > 0 else { return false }
            var raw: OpaquePointer? = nil
            let next = natsSubscription_NextMsg(&raw, sub, wait)
            if next == NATS_TIMEOUT { return false }
            guard next == NATS_OK, let raw else { throw NATSError("natsSubscription_NextMsg \(subject)", next) }
            let message = NATSMessage(raw: raw)
            defer { message.destroy() }
            if visit(message) { return true }
            left -= 1
        }
        return false
    }

    /// Sends a core NATS request and waits at most `timeoutMs` for its reply, which the caller owns.
    public func request(_ m: OutboundMessage, timeoutMs: Int64) throws(NATSError) -> NATSMessage {
        let msg = try makeMessage(m)
        defer { natsMsg_Destroy(msg) }
        var reply: OpaquePointer? = nil
        let s = natsConnection_RequestMsg(&reply, connection, msg, timeoutMs)
        guard s == NATS_OK, let reply else { throw NATSError("request \(m.subject)", s) }
        return NATSMessage(raw: reply)
    }

    /// Publishes a core NATS message (a reply to a request).
    public func publishCore(_ m: OutboundMessage) throws(NATSError) {
        let msg = try makeMessage(m)
        defer { natsMsg_Destroy(msg) }
        let s = natsConnection_PublishMsg(connection, msg)
        guard s == NATS_OK else { throw NATSError("natsConnection_PublishMsg \(m.subject)", s) }
    }

    /// Flushes what is buffered to the server, waiting at most `timeoutMs`.
    public func flush(timeoutMs: Int64) -> Bool { natsConnection_FlushTimeout(connection, timeoutMs) == NATS_OK }

    // MARK: Core subscriptions

    private final class HandlerBox {
        let handler: @Sendable (NATSMessage) -> Void
        init(_ handler: @escaping @Sendable (NATSMessage) -> Void) { self.handler = handler }
    }

    /// Calls `handler` on a cnats thread for each message on `subject`; the handler owns the message.
    public func subscribe(_ subject: String, _ handler: @escaping @Sendable (NATSMessage) -> Void) throws(NATSError) {
        let box = Unmanaged.passRetained(HandlerBox(handler))
        handlerBoxes.append(box)
        var sub: OpaquePointer? = nil
        let s = natsConnection_Subscribe(
            &sub, connection, subject,
            { _, _, msg, closure in
                guard let msg, let closure else { return }
                Unmanaged<HandlerBox>.fromOpaque(closure).takeUnretainedValue().handler(NATSMessage(raw: msg))
            }, box.toOpaque())
        guard s == NATS_OK else { throw NATSError("natsConnection_Subscribe \(subject)", s) }
    }
}
