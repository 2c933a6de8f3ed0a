// One accepted client socket: it owns its descriptor, its libevent events and its byte
// buffers, and frees them in reverse order of creation. Write interest is armed only while
// output is queued. It holds no protocol state: that lives in the core.
import CLibevent
import Glibc
import NotifBusCore

final class Connection {
    enum State {
        case open
        /// Reading stopped; queued output is flushed (bounded by a timeout), then closed.
        case closing
        /// The broker closed it and has flushed: writing is shut down and input is read and
        /// dropped until the peer closes (bounded), so that a peer still writing gets the last
        /// frame instead of a reset.
        case draining
        case closed
    }

    let id: ConnectionID
    let fd: Int32
    unowned let server: BrokerServer
    var state = State.open
    var readEvent: OpaquePointer? = nil
    /// Created on first need: most connections never fill their socket buffer.
    var writeEvent: OpaquePointer? = nil
    var writeArmed = false
    /// Bytes of a frame that arrived only in part.
    var pendingInput: [UInt8] = []
    /// Output not yet accepted by the kernel, from `outputOffset` on.
    var output: [UInt8] = []
    var outputOffset = 0
    /// Whether the connection is on the server's list of connections to flush.
    var queuedForFlush = false
    /// Reading is stopped because the core holds back many of its requests behind durable
    /// writes (`Broker.wantsInput`); frames already read wait in `pendingInput`.
    var inputPaused = false
    /// Set when the broker, not the peer, ends the connection: it then drains before closing.
    var lingers = false
    var drainDeadline: UInt64 = 0
    /// This connection's share of the server's `bufferedBytes`, as last counted.
    var accounted = 0

    init(id: ConnectionID, fd: Int32, server: BrokerServer) {
        self.id = id
        self.fd = fd
        self.server = server
    }

    var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    var pendingOutputBytes: Int { output.count - outputOffset }

    /// Queues a frame. The common case, an empty buffer, takes the array without copying.
    func enqueue(_ frame: [UInt8]) {
        if pendingOutputBytes == 0 {
            output = frame
            outputOffset = 0
        } else {
            output.append(contentsOf: frame)
        }
    }

    enum FlushResult {
        case done
        case wouldBlock
        case failed(Int32)
    }

    /// Writes as much queued output as the kernel takes.
    func flush() -> FlushResult {
        while pendingOutputBytes > 0 {
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

    /// Frees the events, then the descriptor: the reverse of their creation.
    func release() {
        guard state != .closed else { return }
        state = .closed
        if let writeEvent { event_free(writeEvent) }
        writeEvent = nil
        if let readEvent { event_free(readEvent) }
        readEvent = nil
        close(fd)
        output = []
        pendingInput = []
    }
}
