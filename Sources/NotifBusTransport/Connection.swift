// One accepted client socket, as an explicit state machine that owns its descriptor, its
// libevent events and its byte buffers and frees them in reverse order of creation. It does
// I/O only: no protocol state (that lives in the core), no calls into the core.
//
// No bufferevent: input is parsed in place from the server's read buffer, and only an
// incomplete frame is kept here; output is written with `send` straight from the core's
// output store while that is possible (a range of it, kept until the turn's flush), and
// otherwise from one byte array of the connection's own; write interest is armed only while
// output is queued. `BrokerServer` drives the transitions:
//
//   from      on                                                  to                  on the way
//   open      `.close` from the core                              closing(drain)      reading stops, partial input dropped
//   open      cut off over --max-buffered-bytes, output empty     closing(drain)      a last frame queued; core told *
//   open      peer hung up, read failed                           closing(no drain)   core told *
//   open      output over its bound, send failed, no write event, closed              core told *
//             cut off over --max-buffered-bytes with output queued
//   closing   output flushed, drain                               draining            shutdown(SHUT_WR), reads with a deadline
//   closing   output flushed, no drain                            closed
//   closing   no output taken within the flush timeout, send      closed
//             failed
//   draining  peer closed, read failed, deadline passed           closed              input read meanwhile is dropped
//   any       the broker exits                                    closed
//   closed    nothing: the descriptor is closed, the events freed, the buffers dropped
//
//   * after the actions being applied are all applied, as one input per connection
//     (`BrokerServer.reportLost`): applying an action never calls into the core.
//
// While open, reading may be paused (`inputPaused`: the core holds back many of its
// requests); frames already read wait in `pendingInput`.
import CLibevent
import Glibc
import NotifBusCore
import NotifBusProtocol

final class Connection {
    enum State: Equatable {
        case open
        /// Reading stopped; queued output is flushed (bounded by a timeout), then the
        /// connection drains or closes.
        case closing(thenDrain: Bool)
        /// The broker closed it and has flushed: writing is shut down and input is read and
        /// dropped until the peer closes or `until` (monotonic ns) passes, so that a peer still
        /// writing gets the last frame instead of a reset.
        case draining(until: UInt64)
        case closed
    }

    // Fields in this order so that the object stays within one 144-byte malloc chunk
    // (the descriptor and the flags share a word; the kept range comes last): every greeted
    // client has one, idle or not.
    let id: ConnectionID
    /// Owned from `init` on; closed by `release`.
    let fd: Int32
    private(set) var writeArmed = false
    /// Whether the connection is on the server's list of connections to flush.
    var queuedForFlush = false
    /// Reading is stopped because the core holds back many of its requests behind durable
    /// writes (`Broker.wantsInput`); frames already read wait in `pendingInput`.
    private(set) var inputPaused = false
    unowned let server: BrokerServer
    private(set) var readEvent: OpaquePointer? = nil
    /// Created on first need: most connections never fill their socket buffer.
    private(set) var writeEvent: OpaquePointer? = nil
    /// Bytes of a frame that arrived only in part.
    var pendingInput: [UInt8] = []
    /// Output not yet accepted by the kernel, from `outputOffset` on.
    private(set) var output: [UInt8] = []
    private var outputOffset = 0
    /// This connection's share of the server's `bufferedBytes`, as last counted.
    var accounted = 0
    private(set) var state = State.open
    /// Output still in the core's output store, queued when nothing else was: written from
    /// there by the turn's flush, before the store is reset (what the kernel does not take is
    /// copied into `output` then). Set only while `output` is empty, so order is kept.
    private(set) var kept: OutputRange? = nil
    /// More output kept in the store after `kept`, in order: frames that do not join it
    /// because others lie between them (a frame mirrored to every monitor is encoded once
    /// and kept by each). Copied, like `kept`, only when the kernel does not take them.
    private var keptAfter: [OutputRange] = []
    private var keptAfterBytes = 0

    /// Takes ownership of `fd`, an accepted non-blocking socket; its events are made on the
    /// server's event base.
    init(id: ConnectionID, fd: Int32, server: BrokerServer) {
        self.id = id
        self.fd = fd
        self.server = server
    }

    deinit {
        release()
    }

    var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    var pendingOutputBytes: Int { output.count - outputOffset + (kept?.count ?? 0) + keptAfterBytes }

    /// Output bytes this connection holds (or holds in the output store), as accounted.
    var heldOutputBytes: Int { output.count + (kept?.count ?? 0) + keptAfterBytes }

    // State tests by pattern, not `==`: the hot path asks them for every frame, and the
    // synthesized `==` of an enum with payloads costs a call and copies.
    var isOpen: Bool {
        if case .open = state { return true }
        return false
    }

    var isClosing: Bool {
        if case .closing = state { return true }
        return false
    }

    var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    // MARK: Open

    /// Creates the read event and starts reading; false, with nothing created, when
    /// libevent cannot.
    func startReading() -> Bool {
        precondition(isOpen && readEvent == nil, "c\(id): startReading called twice")
        guard let e = event_new(server.base, fd, Int16(EV_READ | EV_PERSIST), Trampolines.read, context) else { return false }
        readEvent = e
        event_add(e, nil)
        return true
    }

    /// Stops reading while the core holds back this connection's requests.
    func pauseInput() {
        guard isOpen, !inputPaused else { return }
        inputPaused = true
        if let readEvent { event_del(readEvent) }
    }

    /// Marks input as no longer paused; reading restarts with `resumeReading`, once the
    /// frames already read have been handed on.
    func unpauseInput() {
        inputPaused = false
    }

    /// Reads the socket again after `unpauseInput`, unless it was paused again meanwhile.
    func resumeReading() {
        guard isOpen, !inputPaused, let readEvent else { return }
        event_add(readEvent, nil)
    }

    // MARK: Output

    /// Queues a frame of `store`. With `keep` (the frame is flushed in this turn) and
    /// nothing copied queued, only its range is kept, and a frame right after it in the store
    /// joins it; otherwise the bytes are copied after what is queued.
    func enqueue(_ frame: OutputRange, from store: OutputStore, keep: Bool) {
        if let k = kept {
            if keptAfter.isEmpty, let both = k.joined(to: frame) {
                kept = both
                return
            }
            if keep {
                if let last = keptAfter.last, let both = last.joined(to: frame) {
                    keptAfter[keptAfter.count - 1] = both
                } else {
                    keptAfter.append(frame)
                }
                keptAfterBytes += frame.count
                return
            }
            kept = nil
            store.withBytes(of: k) { output.append(contentsOf: $0) }
            copyKeptAfter(from: store)
        } else if pendingOutputBytes == 0 {
            if !output.isEmpty {
                output = []
                outputOffset = 0
            }
            if keep {
                kept = frame
                return
            }
        }
        store.withBytes(of: frame) { output.append(contentsOf: $0) }
    }

    /// Copies the ranges kept after `kept` into `output`, in order.
    private func copyKeptAfter(from store: OutputStore) {
        for range in keptAfter { store.withBytes(of: range) { output.append(contentsOf: $0) } }
        keptAfter.removeAll()
        keptAfterBytes = 0
    }

    /// Sends one kept range straight from `store`; what the kernel does not take is copied
    /// after `output` (empty while anything is kept).
    private func sendKept(_ range: OutputRange, from store: OutputStore) -> FlushResult {
        let flags = Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)
        return store.withBytes(of: range) { bytes in
            var sent = 0
            while sent < bytes.count {
                let n = send(fd, bytes.baseAddress! + sent, bytes.count - sent, flags)
                if n > 0 {
                    sent += n
                    continue
                }
                let e = errno
                if e == EINTR { continue }
                guard e == EAGAIN || e == EWOULDBLOCK else { return .failed(e) }
                output.append(contentsOf: bytes[sent...])
                outputOffset = 0
                return .wouldBlock
            }
            return .done
        }
    }

    /// Goes on with the ranges kept after `kept` once it was sent with `result`: sent while
    /// the kernel takes them, then copied into `output`.
    private func sendKeptAfter(from store: OutputStore, after result: FlushResult) -> FlushResult {
        var result = result
        let after = keptAfter
        keptAfter.removeAll()
        keptAfterBytes = 0
        for range in after {
            switch result {
            case .done: result = sendKept(range, from: store)
            case .wouldBlock: store.withBytes(of: range) { output.append(contentsOf: $0) }
            case .failed: return result
            }
        }
        return result
    }

    enum FlushResult {
        case done
        case wouldBlock
        case failed(Int32)
    }

    /// Writes as much queued output as the kernel takes: kept ranges straight from
    /// `store`, what it does not take copied into `output`.
    func flush(from store: OutputStore) -> FlushResult {
        if let k = kept {
            kept = nil
            let result = sendKept(k, from: store)
            guard !keptAfter.isEmpty else { return result }
            return sendKeptAfter(from: store, after: result)
        }
        while output.count - outputOffset > 0 {
            let n = output.withUnsafeBytes { bytes in
                send(fd, bytes.baseAddress! + outputOffset, bytes.count - outputOffset, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if n > 0 {
                outputOffset += n
                continue
            }
            let e = errno
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK {
                if outputOffset >= 65536 && outputOffset * 2 >= output.count {
                    output.removeFirst(outputOffset)
                    outputOffset = 0
                }
                return .wouldBlock
            }
            return .failed(e)
        }
        output = []
        outputOffset = 0
        return .done
    }

    /// Asks for one write callback, bounded by `timeoutMs` when given (a callback with
    /// EV_TIMEOUT then); a write already armed is re-armed with the new bound. False when
    /// no event could be made.
    func armWrite(timeoutMs: Int?) -> Bool {
        if writeEvent == nil {
            writeEvent = event_new(server.base, fd, Int16(EV_WRITE), Trampolines.write, context)
        }
        guard let writeEvent else { return false }
        if let timeoutMs {
            var tv = timeval(tv_sec: timeoutMs / 1000, tv_usec: (timeoutMs % 1000) * 1000)
            event_add(writeEvent, &tv)
        } else {
            event_add(writeEvent, nil)
        }
        writeArmed = true
        return true
    }

    /// Write interest ends: the output is flushed, or the write callback ran.
    func disarmWrite() {
        guard writeArmed else { return }
        writeArmed = false
        if let writeEvent { event_del(writeEvent) }
    }

    // MARK: Ending

    /// open → closing: reading stops for good and an incomplete frame is dropped.
    func beginClosing(thenDrain: Bool) {
        guard isOpen else { return }
        state = .closing(thenDrain: thenDrain)
        if let readEvent, !inputPaused { event_del(readEvent) }
        pendingInput = []
    }

    /// closing → draining, once the output is flushed: writing is shut down, so the peer
    /// reads the end of the stream, and what it still sends is read until `timeoutMs`.
    func beginDraining(now: UInt64, timeoutMs: Int) {
        guard isClosing, let readEvent else { return }
        state = .draining(until: now &+ UInt64(timeoutMs) * 1_000_000)
        shutdown(fd, Int32(SHUT_WR))
        var tv = timeval(tv_sec: timeoutMs / 1000, tv_usec: (timeoutMs % 1000) * 1000)
        event_add(readEvent, &tv)
    }

    /// While draining: reads and drops what the peer sends. False once the connection has
    /// nothing more to wait for (the peer closed, or reading failed).
    func dropInput(into scratch: UnsafeMutableRawBufferPointer) -> Bool {
        let n = read(fd, scratch.baseAddress!, scratch.count)
        if n > 0 { return true }
        return n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
    }

    /// Any state → closed. Frees what the connection owns in reverse order of creation
    /// (write event, read event, buffers, descriptor); closing twice does nothing.
    func release() {
        guard !isClosed else { return }
        state = .closed
        writeArmed = false
        if let writeEvent { event_free(writeEvent) }
        writeEvent = nil
        if let readEvent { event_free(readEvent) }
        readEvent = nil
        output = []
        outputOffset = 0
        kept = nil
        keptAfter = []
        keptAfterBytes = 0
        pendingInput = []
        close(fd)
    }
}
