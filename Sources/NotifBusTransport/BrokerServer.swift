// The broker's I/O shell on libevent: it accepts connections, turns socket readiness,
// timers and signals into core inputs, and carries out the core's actions (queue output,
// close, persist) as pure I/O. It makes no protocol decision of its own, and applying an
// action never calls into the core: what applying finds (a connection lost, a durable write
// done) goes back to the core as an input afterwards, each kind from one place.
import CLibevent
import Glibc
import NotifBusCore
import NotifBusProtocol

/// Everything `notifbus broker` was told on its command line.
public struct ServerOptions: Sendable {
    public var socketPath: String
    public var socketMode: mode_t = 0o600
    public var stateDirectory: String? = nil
    /// Output queued for one peer beyond this means it is not reading: it is cut off.
    public var maxOutputBytes = 16 << 20
    /// Input and output buffered across all connections beyond this (256 MiB) cuts off
    /// the biggest holders: per-connection bounds times `--max-clients` would be ~17 GiB.
    public var maxBufferedBytes = 256 << 20
    public var core = BrokerConfiguration()

    public init(socketPath: String) {
        self.socketPath = socketPath
    }
}

/// C callbacks: one trampoline per callback type, context is the owning object.
enum Trampolines {
    static let accept: event_callback_fn = { _, _, context in
        Unmanaged<BrokerServer>.fromOpaque(context!).takeUnretainedValue().acceptReady()
    }
    static let read: event_callback_fn = { _, what, context in
        let connection = Unmanaged<Connection>.fromOpaque(context!).takeUnretainedValue()
        if case .draining = connection.state {
            connection.server.drain(connection, timedOut: what & Int16(EV_TIMEOUT) != 0)
        } else {
            connection.server.readable(connection)
        }
    }
    static let write: event_callback_fn = { _, what, context in
        let connection = Unmanaged<Connection>.fromOpaque(context!).takeUnretainedValue()
        connection.server.writable(connection, timedOut: what & Int16(EV_TIMEOUT) != 0)
    }
    static let timer: event_callback_fn = { _, _, context in
        Unmanaged<BrokerServer>.fromOpaque(context!).takeUnretainedValue().timerFired()
    }
    static let signal: event_callback_fn = { _, _, context in
        Unmanaged<BrokerServer>.fromOpaque(context!).takeUnretainedValue().beginShutdown()
    }
    static let otherSignal: event_callback_fn = { fd, _, context in
        Unmanaged<BrokerServer>.fromOpaque(context!).takeUnretainedValue().signalArrived(Int32(fd))
    }
    static let logFlush: event_callback_fn = { _, _, context in
        Unmanaged<BrokerServer>.fromOpaque(context!).takeUnretainedValue().flushHeldLog()
    }
    static let resumeAccept: event_callback_fn = { _, _, context in
        Unmanaged<BrokerServer>.fromOpaque(context!).takeUnretainedValue().resumeAccepting()
    }
    static let forceExit: event_callback_fn = { _, _, context in
        Unmanaged<BrokerServer>.fromOpaque(context!).takeUnretainedValue().forceExit()
    }
    static let syncDone: event_callback_fn = { _, _, context in
        Unmanaged<BrokerServer>.fromOpaque(context!).takeUnretainedValue().syncFinished()
    }
    /// Ends a bounded wait (`BrokerServer.turn(maxWaitMs:)`); its running is all it does.
    static let wake: event_callback_fn = { _, _, _ in }
}

public final class BrokerServer {
    /// One read takes at most this much; frames are parsed in place from it.
    static let scratchBytes = 256 * 1024
    /// A closing connection gets this long to take its last output.
    static let closeFlushTimeoutMs = 1000
    /// Shutdown must finish within 2 s; flushing stops short of that.
    static let shutdownDeadlineMs = 1500
    /// How long a connection the broker closed may keep sending before it is cut.
    static let drainTimeoutMs = 500
    /// Accepts per readiness callback, so a flood of connects cannot starve clients.
    static let acceptBatch = 64
    /// Signals whose default action would end the broker without answering anyone:
    /// SIGUSR1 logs a status line, the others are logged and otherwise ignored.
    static let survivedSignals: [Int32] = [SIGHUP, SIGUSR1, SIGUSR2, SIGALRM]

    var options: ServerOptions
    /// False when systemd owns the socket file (socket activation): it is not unlinked.
    let ownsSocketFile: Bool
    let base: OpaquePointer
    var core: Broker
    /// The core's output store (`core.output`): `.send` frames are read from it until
    /// `flushPending` has written them and calls `core.outputTaken()`.
    let output: OutputStore
    var journal: StateJournal?
    /// Syncs the journal on a thread of its own (made with the first durable write), and
    /// the loop's event that reads its results.
    var syncer: JournalSyncer? = nil
    var syncEvent: OpaquePointer? = nil
    /// Whether `startSyncer` ran: it is not tried again after a failure.
    var syncerTried = false
    /// The sync in flight, and the writes it makes durable.
    var inFlightSync: (ticket: StateJournal.SyncTicket, writes: [WriteID])? = nil
    /// Durable writes appended while a sync was in flight: the next sync takes them all.
    var awaitingSync: [WriteID] = []
    var connections = IDTable<Connection>()
    var nextConnectionID = 1
    var listenFD: Int32 = -1
    var listenEvent: OpaquePointer? = nil
    var resumeAcceptEvent: OpaquePointer? = nil
    var timerEvent: OpaquePointer? = nil
    var armedDeadline: Instant? = nil
    var signalEvents: [OpaquePointer] = []
    var forceExitEvent: OpaquePointer? = nil
    var logFlushEvent: OpaquePointer? = nil
    /// Bounds the wait of `turn(maxWaitMs:)`; made on first use.
    var wakeEvent: OpaquePointer? = nil
    var logLimiter = LogLimiter()
    /// Input and output bytes buffered across all connections (`Connection.accounted`).
    var bufferedBytes = 0
    /// Connections cut off because `bufferedBytes` passed `--max-buffered-bytes`.
    var cutOffCount = 0
    /// The core's inputs append their actions here; `settle` carries them out.
    var actionBuffer: [BrokerAction] = []
    /// The actions `settle` is carrying out, swapped out of `actionBuffer`.
    var applyingActions: [BrokerAction] = []
    /// Connections the transport ended on its own account while the core still counted them
    /// as clients (they were open): told to the core by `reportLost`, in this order.
    var lost: [ConnectionID] = []
    /// Writes appended to the journal in this batch, whether each append worked and
    /// whether it is to be durable; reported to the core once the journal is synced.
    var unreported: [(write: WriteID, appended: Bool, durable: Bool)] = []
    var toFlush: [Connection] = []
    /// The connections `flushPending` is writing to now: `toFlush` swapped out, so that
    /// both lists keep their storage from turn to turn.
    var flushing: [Connection] = []
    /// Connections whose reading is paused (`Connection.inputPaused`).
    var pausedConnections: [Connection] = []
    var stopping = false
    /// Set when the loop must end: shutdown finished, or its deadline passed.
    var finished = false
    let scratch: UnsafeMutableRawBufferPointer

    /// Opens the state folder and binds the socket; prints nothing yet.
    public init(options: ServerOptions) throws {
        self.options = options
        signal(SIGPIPE, SIG_IGN)
        // Ignored until `run` handles them, so that none can end the broker on the way up.
        for signum in BrokerServer.survivedSignals { signal(signum, SIG_IGN) }
        notifbus_unblock_termination_signals()
        // Everything that can fail comes first: memory a failed init never hands to deinit
        // would leak.
        var restoredSlots: [String: RawJSON] = [:]
        var restoredCategories: CategorySet? = nil
        var restoredKeys: [OnceRecord] = []
        if let dir = options.stateDirectory {
            let journal = try StateJournal(directory: dir, onceLimits: options.core.once)
            for warning in journal.warnings { logLine("notifbus: \(warning)") }
            restoredSlots = journal.slots
            restoredCategories = journal.categories
            restoredKeys = journal.once.records
            self.journal = journal
        }
        var configuration = options.core
        configuration.persistsState = journal != nil
        configuration.onceSeed = UInt64.random(in: UInt64.min...UInt64.max)
        core = Broker(
            configuration: configuration, now: monotonicNow(), wallClockMs: wallClockMs(), slots: restoredSlots,
            categories: restoredCategories, once: restoredKeys)
        core.buffers.max = options.maxBufferedBytes
        output = core.output
        if let activated = try ListeningSocket.activated() {
            listenFD = activated.fd
            self.options.socketPath = activated.path
            ownsSocketFile = false
        } else {
            listenFD = try ListeningSocket.open(path: options.socketPath, mode: options.socketMode)
            ownsSocketFile = true
        }
        guard let base = event_base_new() else {
            close(listenFD)
            if ownsSocketFile { unlink(self.options.socketPath) }
            throw SystemError("event_base_new", code: ENOMEM)
        }
        self.base = base
        scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: BrokerServer.scratchBytes, alignment: 16)
    }

    deinit {
        // Connections hold events of `base`: they go first.
        for connection in connections.values { connection.release() }
        connections.removeAll()
        for e in signalEvents { event_free(e) }
        if let e = syncEvent { event_free(e) }
        if let e = wakeEvent { event_free(e) }
        if let e = logFlushEvent { event_free(e) }
        if let e = forceExitEvent { event_free(e) }
        if let e = timerEvent { event_free(e) }
        if let e = resumeAcceptEvent { event_free(e) }
        if let e = listenEvent { event_free(e) }
        if listenFD >= 0 { close(listenFD) }
        event_base_free(base)
        scratch.deallocate()
    }

    var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Runs until SIGINT or SIGTERM has been handled. Prints the readiness line first.
    public func run() -> Int32 {
        listenEvent = event_new(base, listenFD, Int16(EV_READ | EV_PERSIST), Trampolines.accept, context)
        event_add(listenEvent, nil)
        timerEvent = notifbus_evtimer_new(base, Trampolines.timer, context)
        resumeAcceptEvent = notifbus_evtimer_new(base, Trampolines.resumeAccept, context)
        for signum in [SIGINT, SIGTERM] {
            if let e = notifbus_evsignal_new(base, signum, Trampolines.signal, context) {
                event_add(e, nil)
                signalEvents.append(e)
            }
        }
        for signum in BrokerServer.survivedSignals {
            if let e = notifbus_evsignal_new(base, signum, Trampolines.otherSignal, context) {
                event_add(e, nil)
                signalEvents.append(e)
            }
        }
        logFlushEvent = notifbus_evtimer_new(base, Trampolines.logFlush, context)
        logLine("notifbus: listening on \(options.socketPath)")
        // One loop iteration runs every callback that is ready; the durable writes they asked
        // for are then synced together, and the output they queued is written in one go,
        // one send per connection, however many frames it holds.
        while turn() {}
        finishSync()
        for connection in Array(connections.values) { closeNow(connection) }
        return 0
    }

    /// One turn of the loop: runs the callbacks that are ready, waiting for one first unless
    /// durable writes are waiting to be synced, then syncs, answers and flushes. With
    /// `maxWaitMs` (tests) the wait is bounded. False once the loop must end.
    func turn(maxWaitMs: Int? = nil) -> Bool {
        // Writes appended after this turn's sync are synced in the next turn, which
        // then must not wait for a socket to become ready.
        if let maxWaitMs {
            if wakeEvent == nil { wakeEvent = notifbus_evtimer_new(base, Trampolines.wake, context) }
            var tv = timeval(tv_sec: maxWaitMs / 1000, tv_usec: (maxWaitMs % 1000) * 1000)
            event_add(wakeEvent, &tv)
        }
        let rc = event_base_loop(base, unreported.isEmpty ? EVLOOP_ONCE : EVLOOP_ONCE | EVLOOP_NONBLOCK)
        if let wakeEvent { event_del(wakeEvent) }
        flushPending()
        if rc != 0 {
            if rc < 0 { logLine("notifbus: event loop failed") }
            return false
        }
        return !finished
    }

    // MARK: Inputs

    func acceptReady() {
        let now = monotonicNow()
        for _ in 0..<BrokerServer.acceptBatch {
            let fd = notifbus_accept_nonblocking(listenFD)
            if fd < 0 {
                let e = errno
                if e == EINTR || e == ECONNABORTED { continue }
                if e == EAGAIN || e == EWOULDBLOCK { break }
                log("notifbus: accept: \(SystemError("accept4", code: e))", kind: "accept")
                if e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM { pauseAccepting() }
                break
            }
            var peer = notifbus_peer_credentials()
            guard notifbus_get_peer_credentials(fd, &peer) == 0 else {
                log("notifbus: \(SystemError("SO_PEERCRED on a new connection")); closing it", kind: "peercred")
                close(fd)
                continue
            }
            adopt(fd, credentials: PeerCredentials(pid: peer.pid, uid: peer.uid, gid: peer.gid), now: now)
        }
        settle()
    }

    /// Makes a connection of `fd`, a connected non-blocking socket it now owns, and tells
    /// the core; the caller settles.
    func adopt(_ fd: Int32, credentials: PeerCredentials, now: Instant) {
        let id = nextConnectionID
        nextConnectionID += 1
        let connection = Connection(id: id, fd: fd, server: self)
        guard connection.startReading() else {
            log("notifbus: c\(id): event_new failed; closing", kind: "event_new")
            connection.release()
            return
        }
        connections[id] = connection
        if !core.admits(uid: credentials.uid) {
            log(
                "notifbus: c\(id): refused pid \(credentials.pid) uid \(credentials.uid) (forbidden; --allow-uid \(credentials.uid) admits it)",
                kind: "refused")
        }
        core.connect(id, credentials: credentials, now: now, into: &actionBuffer)
    }

    /// Out of descriptors: stop accepting for a moment instead of spinning on the listener.
    func pauseAccepting() {
        guard let listenEvent, let resumeAcceptEvent else { return }
        event_del(listenEvent)
        var tv = timeval(tv_sec: 0, tv_usec: 100_000)
        event_add(resumeAcceptEvent, &tv)
    }

    func resumeAccepting() {
        guard !stopping, let listenEvent else { return }
        event_add(listenEvent, nil)
    }

    func readable(_ connection: Connection) {
        guard connection.isOpen, !connection.inputPaused else { return }
        let n = read(connection.fd, scratch.baseAddress!, scratch.count)
        if n <= 0 {
            let e = errno
            if n < 0 && (e == EINTR || e == EAGAIN || e == EWOULDBLOCK) { return }
            if n < 0 && e != ECONNRESET { log("notifbus: c\(connection.id): \(SystemError("read", code: e))", kind: "read") }
            // The peer hung up; output already queued is still offered.
            lose(connection, flushFirst: true)
            settle()
            return
        }
        let now = monotonicNow()
        if connection.pendingInput.isEmpty {
            let chunk = UnsafeRawBufferPointer(rebasing: scratch[0..<n])
            let used = consumeFrames(chunk, connection, now: now)
            if used < n && connection.isOpen {
                connection.pendingInput = Array(chunk[used...])
            }
        } else {
            connection.pendingInput.append(contentsOf: UnsafeRawBufferPointer(rebasing: scratch[0..<n]))
            consumePendingInput(connection, now: now)
        }
        account(connection)
        settle()
    }

    /// Feeds each complete frame to the core; returns how many bytes were used. Stops early,
    /// and stops reading the connection, once the core holds back too many of its requests.
    func consumeFrames(_ bytes: UnsafeRawBufferPointer, _ connection: Connection, now: Instant) -> Int {
        var offset = 0
        let maxFrame = options.core.maxFrame
        while true {
            switch FrameHeader.split(bytes, at: offset, maxFrame: maxFrame) {
            case .needMore:
                return offset
            case .frame(let bodyStart, let length):
                let wantsInput = core.receiveFrame(
                    UnsafeRawBufferPointer(rebasing: bytes[bodyStart..<(bodyStart + length)]), from: connection.id, now: now, into: &actionBuffer)
                offset = bodyStart + length
                if !wantsInput {
                    pauseInput(connection)
                    return offset
                }
            case .tooLarge(let length):
                core.receiveOversizedFrame(from: connection.id, length: length, now: now, into: &actionBuffer)
                return bytes.count
            }
        }
    }

    /// Feeds the frames complete in `connection.pendingInput` to the core and keeps what
    /// is left of an incomplete one (nothing, once the connection is no longer open).
    func consumePendingInput(_ connection: Connection, now: Instant) {
        let used = connection.pendingInput.withUnsafeBytes { consumeFrames($0, connection, now: now) }
        guard connection.isOpen else { return }
        if used == connection.pendingInput.count {
            connection.pendingInput = []
        } else if used > 0 {
            connection.pendingInput.removeFirst(used)
        }
    }

    func pauseInput(_ connection: Connection) {
        guard !connection.inputPaused, connection.isOpen else { return }
        connection.pauseInput()
        pausedConnections.append(connection)
    }

    /// Goes on reading the paused connections the core wants input from again: first the
    /// frames already read, then the socket.
    func resumeInput() {
        guard !pausedConnections.isEmpty, !stopping else { return }
        let paused = pausedConnections
        pausedConnections.removeAll()
        let now = monotonicNow()
        for connection in paused {
            guard connection.isOpen, connection.inputPaused else { continue }
            guard core.wantsInput(from: connection.id) else {
                pausedConnections.append(connection)
                continue
            }
            connection.unpauseInput()
            if !connection.pendingInput.isEmpty {
                consumePendingInput(connection, now: now)
                account(connection)
            }
            connection.resumeReading()
        }
    }

    func writable(_ connection: Connection, timedOut: Bool) {
        connection.disarmWrite()
        if timedOut {
            log("notifbus: c\(connection.id): closing; it took no output for \(BrokerServer.closeFlushTimeoutMs) ms", kind: "flush-timeout")
            lose(connection)
        } else {
            flush(connection)
        }
        settle()
    }

    func timerFired() {
        armedDeadline = nil
        core.tick(now: monotonicNow(), into: &actionBuffer)
        settle()
    }

    /// SIGINT or SIGTERM: stop accepting, answer everything pending, flush, close, exit.
    func beginShutdown() {
        guard !stopping else { return }
        stopping = true
        if let listenEvent { event_del(listenEvent) }
        if let resumeAcceptEvent { event_del(resumeAcceptEvent) }
        if listenFD >= 0 {
            close(listenFD)
            listenFD = -1
            if ownsSocketFile { unlink(options.socketPath) }
        }
        forceExitEvent = notifbus_evtimer_new(base, Trampolines.forceExit, context)
        var tv = timeval(tv_sec: 0, tv_usec: Int(BrokerServer.shutdownDeadlineMs) * 1000)
        event_add(forceExitEvent, &tv)
        // Nothing more is read. Writes in flight are synced and answered in the next turn,
        // as always; the core closes every connection once the last is answered, and
        // answers what waited behind them `shutting_down`.
        for connection in connections.values where connection.isOpen {
            connection.pauseInput()
            connection.pendingInput = []
            account(connection)
        }
        pausedConnections.removeAll()
        core.shutdown(now: monotonicNow(), into: &actionBuffer)
        settle()
    }

    func forceExit() {
        logLine("notifbus: shutdown: \(connections.count) connection(s) did not take their output in time; closing them")
        finished = true
        event_base_loopbreak(base)
    }

    // MARK: Carrying out actions

    /// Applies the core's actions after a callback, then reports to the core what applying
    /// them found (connections lost, the connection holding the most over the buffer cap,
    /// the buffer figures), until the core has nothing more to do. Output is only queued here; it is written once per loop iteration by
    /// `flushPending`. Inlined where it is called, several times per turn, so that a settle
    /// with nothing to do costs a few compares and no call.
    @inline(__always)
    func settle() {
        // Nothing to apply, report or cut off: only the figures, when they moved.
        if actionBuffer.isEmpty && lost.isEmpty && bufferedBytes <= options.maxBufferedBytes {
            if core.buffers.bytes != bufferedBytes || core.buffers.cutOff != cutOffCount {
                core.buffers.bytes = bufferedBytes
                core.buffers.cutOff = cutOffCount
            }
            return
        }
        settleActions()
    }

    /// `settle` with actions to apply, connections lost to report or the buffer cap passed.
    @inline(never)
    func settleActions() {
        while true {
            swap(&actionBuffer, &applyingActions)
            if !applyingActions.isEmpty {
                // Reversed and taken from the end, each action moves out whole, in order:
                // no copy of it, and no pass destroying the list afterwards.
                if applyingActions.count > 1 { applyingActions.reverse() }
                while let action = applyingActions.popLast() { apply(action) }
                continue
            }
            if lost.isEmpty && bufferedBytes > options.maxBufferedBytes { cutOffBiggestHolder() }
            if lost.isEmpty && actionBuffer.isEmpty { break }
            if !lost.isEmpty { reportLost() }
        }
        core.buffers.bytes = bufferedBytes
        core.buffers.cutOff = cutOffCount
    }

    /// The one place where the core hears of connections the transport ended on its own
    /// account (`lost`), each once, in the order they were lost; their actions come in the
    /// next round of `settle`.
    func reportLost() {
        let ids = lost
        lost.removeAll(keepingCapacity: true)
        let now = monotonicNow()
        for id in ids { core.disconnected(id, now: now, into: &actionBuffer) }
    }

    /// The transport ends `connection` on its own account: at once, or after flushing what
    /// is queued (a peer that hung up may still read). A connection that was open is still
    /// the core's client: it is recorded in `lost` for `reportLost`.
    func lose(_ connection: Connection, flushFirst: Bool = false) {
        if connection.isOpen { lost.append(connection.id) }
        if flushFirst {
            startClosing(connection, thenDrain: false)
        } else {
            closeNow(connection)
        }
    }

    /// Keeps `bufferedBytes` current after `connection`'s buffers changed; `settle` reports
    /// it to the core.
    @inline(__always)
    func account(_ connection: Connection) {
        let now = connection.isClosed ? 0 : connection.pendingInput.count + connection.heldOutputBytes
        guard now != connection.accounted else { return }
        bufferedBytes += now - connection.accounted
        connection.accounted = now
    }

    /// Over `--max-buffered-bytes`: cuts off the connection holding the most. One that is
    /// open with its output empty (it holds input: a large frame arriving) goes to the core
    /// (`Broker.overBudget`), which refuses and closes it; its actions are applied in the next
    /// round of `settle`, which comes back here while the total is still above the cap. One
    /// with output queued, or already closing, is closed at once, and the next is looked at.
    func cutOffBiggestHolder() {
        while bufferedBytes > options.maxBufferedBytes {
            guard let connection = connections.values.filter({ !$0.isClosed && $0.accounted > 0 }).max(by: { $0.accounted < $1.accounted })
            else { return }
            let held = connection.accounted
            log(
                "notifbus: c\(connection.id): cut off: it held \(held) of the \(bufferedBytes) bytes buffered across all connections, "
                    + "above --max-buffered-bytes \(options.maxBufferedBytes)", kind: "cut-off-budget")
            cutOffCount += 1
            guard connection.isOpen && connection.pendingOutputBytes == 0 else {
                lose(connection)
                continue
            }
            core.overBudget(connection.id, held: held, limit: options.maxBufferedBytes, now: monotonicNow(), into: &actionBuffer)
            return
        }
    }

    /// Before `bytes` of output are copied for a connection that is not reading (its socket
    /// still refuses earlier output): while the copy would take the total past
    /// `--max-buffered-bytes`, closes the connections not reading, biggest first (that one
    /// included), instead of copying for them. A frame mirrored to many monitors that do not
    /// read is so counted against the budget before each copy is made, not after all of
    /// them. Input holders are left to `cutOffBiggestHolder`.
    func cutOffStalledReaders(toCopy bytes: Int) {
        while bufferedBytes + bytes > options.maxBufferedBytes {
            guard
                let connection = connections.values.filter({ !$0.isClosed && $0.writeArmed && $0.accounted > 0 })
                    .max(by: { $0.accounted < $1.accounted })
            else { return }
            log(
                "notifbus: c\(connection.id): cut off: it held \(connection.accounted) unread bytes, and \(bytes) more would take the "
                    + "\(bufferedBytes) bytes buffered across all connections above --max-buffered-bytes \(options.maxBufferedBytes)",
                kind: "cut-off-budget")
            cutOffCount += 1
            lose(connection)
        }
    }

    /// Syncs the turn's journal records once and tells the core how each write went, goes on
    /// reading connections that were paused, then writes queued output, repeating while
    /// that produced new inputs (a peer found gone). Writes started meanwhile (requests
    /// that waited behind a write) are synced in the next turn, after other clients'
    /// ready callbacks: one sync per turn, so that one client's stream of writes to one
    /// slot cannot keep the loop from everyone else or from the shutdown timer.
    func flushPending() {
        settle()
        // Both are calls only when there is something to do: most turns have neither.
        if !unreported.isEmpty && reportWrites() { settle() }
        if !pausedConnections.isEmpty { resumeInput() }
        while true {
            settle()
            if toFlush.isEmpty { break }
            swap(&toFlush, &flushing)
            // Reversed and taken from the end, each connection moves out of the list in order:
            // no pass releasing the list's elements afterwards.
            if flushing.count > 1 { flushing.reverse() }
            while let connection = flushing.popLast() {
                connection.queuedForFlush = false
                flush(connection)
            }
        }
        // Every action is applied and every connection that kept a range of the output
        // store was just flushed (what the kernel did not take is in its own buffer): nothing
        // refers to the store any more.
        core.outputTaken()
        rearmTimer()
        if stopping && connections.isEmpty { finished = true }
    }

    /// Carries out one action: I/O only, never a call into the core.
    func apply(_ action: consuming BrokerAction) {
        switch consume action {
        case .send(let id, let frame):
            queue(frame, to: id)
        case .close(let id):
            guard let connection = connections[id] else { return }
            startClosing(connection, thenDrain: true)
        case .persist(let write):
            guard let pending = core.pendingWrite(write) else { preconditionFailure("write \(write) asked for but not in flight") }
            let appended = journal?.record(pending.record, once: pending.once) ?? false
            unreported.append((write, appended, pending.durable))
        }
    }

    /// Reports every write appended since the last report that needs no sync (a keyed
    /// post's "running" record, or one whose append failed), and hands the durable ones to
    /// the next sync; false when there was none. A sync runs on the syncer's thread while
    /// the loop goes on: the writes of the turns it takes wait for the next one, so that
    /// one sync makes the records of many turns durable (group commit).
    func reportWrites() -> Bool {
        guard !unreported.isEmpty else { return false }
        let batch = unreported
        unreported.removeAll(keepingCapacity: true)
        let now = monotonicNow()
        for item in batch {
            if item.appended && item.durable {
                awaitingSync.append(item.write)
            } else {
                core.persisted(item.write, written: item.appended, now: now, into: &actionBuffer)
            }
        }
        startSync()
        return true
    }

    /// Starts a sync of every durable write that waits for one, unless one is in flight. Without
    /// a thread for it (none could be made) it syncs in line.
    func startSync() {
        guard let journal, inFlightSync == nil, !awaitingSync.isEmpty else { return }
        let writes = awaitingSync
        awaitingSync.removeAll(keepingCapacity: true)
        guard let ticket = journal.beginSync() else {
            // Already on disk: an in-line sync took them (see `syncFinished`).
            return report(writes, written: true)
        }
        if !syncerTried { startSyncer() }
        if let syncer, syncer.start(ticket.fd) {
            inFlightSync = (ticket, writes)
            return
        }
        let synced = journal.endSync(ticket, errno: fdatasync(ticket.fd) == 0 ? 0 : errno)
        report(writes, written: synced)
        if !synced { failUnsynced() }
    }

    /// Starts the syncer's thread and its event, once: when either cannot be made, every sync
    /// runs in line for the broker's life.
    private func startSyncer() {
        syncerTried = true
        guard let made = JournalSyncer(),
            let event = event_new(base, made.resultRead, Int16(EV_READ | EV_PERSIST), Trampolines.syncDone, context)
        else { return }
        guard event_add(event, nil) == 0 else { return event_free(event) }
        syncEvent = event
        syncer = made
    }

    /// The syncer's thread finished the sync in flight: its writes take effect (or are
    /// refused), and the next sync starts.
    func syncFinished() {
        guard let syncer, let journal, let code = syncer.result(), let (ticket, writes) = inFlightSync else { return }
        inFlightSync = nil
        let synced = journal.endSync(ticket, errno: code)
        report(writes, written: synced)
        if !synced { return failUnsynced() }
        if journal.compactionDue && !awaitingSync.isEmpty, let rest = journal.beginSync() {
            // Under a steady stream of writes something is always unsynced; the journal is
            // rewritten only when nothing is, so this once the rest is synced in line.
            let writes = awaitingSync
            awaitingSync.removeAll(keepingCapacity: true)
            let synced = journal.endSync(rest, errno: fdatasync(rest.fd) == 0 ? 0 : errno)
            report(writes, written: synced)
            if !synced { return failUnsynced() }
        }
        startSync()
    }

    /// A failed sync cut every record not yet on disk off the journal: the writes waiting
    /// for a sync, and those appended in this turn and not yet reported, are refused.
    func failUnsynced() {
        report(awaitingSync, written: false)
        awaitingSync.removeAll(keepingCapacity: true)
        for i in unreported.indices { unreported[i].appended = false }
    }

    func report(_ writes: [WriteID], written: Bool) {
        let now = monotonicNow()
        for write in writes { core.persisted(write, written: written, now: now, into: &actionBuffer) }
    }

    /// Waits (bounded) for the sync in flight when the loop ends, so that the writes it
    /// carries are on disk before the broker exits.
    func finishSync() {
        guard let syncer, let journal, let (ticket, _) = inFlightSync else { return }
        if let code = syncer.result(waitMs: Int32(BrokerServer.shutdownDeadlineMs)) {
            _ = journal.endSync(ticket, errno: code)
        }
        inFlightSync = nil
    }

    /// Queues a frame for a connection, cutting off a peer whose unread output is too large.
    /// A connection waiting for its socket (write armed) is not flushed in this turn: it
    /// copies the frame instead of keeping its range of the output store.
    /// Kept out of line: inlined into `settle`, every action would be copied whole to be applied.
    @inline(never)
    func queue(_ frame: OutputRange, to id: ConnectionID) {
        guard let connection = connections[id], !connection.isClosed else { return }
        if connection.writeArmed && bufferedBytes + frame.count > options.maxBufferedBytes {
            cutOffStalledReaders(toCopy: frame.count)
            if connection.isClosed { return }
        }
        connection.enqueue(frame, from: output, keep: !connection.writeArmed)
        account(connection)
        if connection.pendingOutputBytes > options.maxOutputBytes {
            log("notifbus: c\(id): cut off: \(connection.pendingOutputBytes) bytes of output queued and not read", kind: "cut-off")
            lose(connection)
            return
        }
        if !connection.writeArmed { scheduleFlush(connection) }
    }

    /// Puts `connection` on this turn's list of connections to write to.
    func scheduleFlush(_ connection: Connection) {
        guard !connection.queuedForFlush else { return }
        connection.queuedForFlush = true
        toFlush.append(connection)
    }

    func flush(_ connection: Connection) {
        guard !connection.isClosed else { return }
        defer { account(connection) }
        switch connection.flush(from: output) {
        case .done:
            connection.disarmWrite()
            if connection.isClosing { finishClosing(connection) }
        case .wouldBlock:
            if !connection.writeArmed { armWrite(connection) }
        case .failed(let e):
            if e != EPIPE && e != ECONNRESET { log("notifbus: c\(connection.id): \(SystemError("send", code: e))", kind: "send") }
            lose(connection)
        }
    }

    /// Waits for the socket to take more output; a closing connection waits at most
    /// `closeFlushTimeoutMs`.
    func armWrite(_ connection: Connection) {
        guard connection.armWrite(timeoutMs: connection.isClosing ? BrokerServer.closeFlushTimeoutMs : nil) else {
            log("notifbus: c\(connection.id): event_new failed; closing", kind: "event_new")
            lose(connection)
            return
        }
    }

    /// open → closing; with nothing left to flush, on at once to draining or closed.
    func startClosing(_ connection: Connection, thenDrain: Bool) {
        guard connection.isOpen else { return }
        connection.beginClosing(thenDrain: thenDrain)
        account(connection)
        if connection.pendingOutputBytes == 0 {
            finishClosing(connection)
        } else if connection.writeArmed {
            // From now on bounded by the closing timeout.
            armWrite(connection)
        } else {
            scheduleFlush(connection)
        }
    }

    /// Output is flushed: closing → draining when the broker ended the connection,
    /// otherwise → closed.
    func finishClosing(_ connection: Connection) {
        guard case .closing(thenDrain: true) = connection.state, connection.readEvent != nil else { return closeNow(connection) }
        connection.beginDraining(now: monotonicNow(), timeoutMs: BrokerServer.drainTimeoutMs)
    }

    /// Reads and drops what a closed-by-the-broker peer still sends, until it closes too
    /// or the drain deadline passes.
    func drain(_ connection: Connection, timedOut: Bool) {
        guard case .draining(let until) = connection.state else { return }
        if !timedOut && monotonicNow() < until && connection.dropInput(into: scratch) { return }
        closeNow(connection)
        settle()
    }

    /// Any state → closed: everything the connection owns is freed and it is forgotten.
    func closeNow(_ connection: Connection) {
        connection.release()
        account(connection)
        connections[connection.id] = nil
    }

    // MARK: Signals and logging

    /// SIGUSR1 writes a status line; SIGHUP, SIGUSR2 and SIGALRM are noted and ignored
    /// (there is no configuration to reload: everything comes from the command line).
    /// A status line was asked for, so it is always written, never held back like repeated
    /// errors (only the broker's own user, or root, can send the signal).
    func signalArrived(_ signum: Int32) {
        if signum == SIGUSR1 {
            logLine(
                "notifbus: status: \(connections.count) connection(s), \(core.summary), "
                    + "buffered \(bufferedBytes) of \(options.maxBufferedBytes) bytes")
        } else {
            let name = signum == SIGHUP ? "SIGHUP" : signum == SIGUSR2 ? "SIGUSR2" : signum == SIGALRM ? "SIGALRM" : "signal \(signum)"
            log("notifbus: \(name) received and ignored (SIGINT or SIGTERM stop the broker; SIGUSR1 logs its status)", kind: "signal \(signum)")
        }
    }

    /// Logs `message` unless a line of the same kind was logged less than a second ago;
    /// held lines are counted and reported a second later.
    func log(_ message: String, kind: String) {
        let now = monotonicNow()
        if let line = logLimiter.admit(message, kind: kind, now: now) {
            logLine(line)
        } else if let logFlushEvent, event_pending(logFlushEvent, Int16(EV_TIMEOUT), nil) == 0 {
            var tv = timeval(tv_sec: 1, tv_usec: 0)
            event_add(logFlushEvent, &tv)
        }
    }

    func flushHeldLog() {
        for line in logLimiter.flush(now: monotonicNow()) { logLine(line) }
        if logLimiter.hasHeld, let logFlushEvent {
            var tv = timeval(tv_sec: 0, tv_usec: 200_000)
            event_add(logFlushEvent, &tv)
        }
    }

    func rearmTimer() {
        guard let timerEvent else { return }
        let deadline = core.nextDeadline
        guard deadline != armedDeadline else { return }
        armedDeadline = deadline
        guard let deadline else {
            event_del(timerEvent)
            return
        }
        let now = monotonicNow()
        let delayNs = deadline > now ? deadline - now : 0
        let delayUs = (delayNs + 999) / 1000
        var tv = timeval(tv_sec: Int(delayUs / 1_000_000), tv_usec: Int(delayUs % 1_000_000))
        event_add(timerEvent, &tv)
    }
}
