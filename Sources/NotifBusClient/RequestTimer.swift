// The deadline of one request (or one pipelined group): a one-shot Dispatch timer source.
// Cancelling it takes it off Dispatch's timers at once and drops its handler, so that a
// request whose reply came leaves nothing behind to fire. It knows nothing of requests.
import Dispatch

/// A one-shot timer that runs `fire` once after `bound`, unless cancelled first. Either way
/// its handler, and what that captures, is released: by `cancel()`, or after it ran.
final class RequestTimer: @unchecked Sendable {
    private let source: DispatchSourceTimer
    private let lock = Lock()
    private var cancelled = false

    /// Starts the timer at once.
    init(after bound: Duration, _ fire: @escaping @Sendable () -> Void) {
        let source = DispatchSource.makeTimerSource(queue: .global())
        self.source = source
        // Cancelling the source after it fired drops this handler, which holds the source:
        // nothing stays behind.
        source.setEventHandler {
            fire()
            source.cancel()
        }
        let ns = bound.components.seconds * 1_000_000_000 + bound.components.attoseconds / 1_000_000_000
        source.schedule(deadline: .now() + .nanoseconds(Int(clamping: ns)), repeating: .never)
        source.activate()
    }

    /// Stops the timer: `fire` will not run. Harmless after it ran or was cancelled.
    func cancel() {
        lock.withLock { cancelled = true }
        source.cancel()
    }

    /// Whether `cancel()` was called (a timer that fired was not cancelled).
    var isCancelled: Bool { lock.withLock { cancelled } }
}
