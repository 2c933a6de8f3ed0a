// The deadline of one request (or one pipelined group): a one-shot Dispatch timer source.
// Cancelling it takes it off Dispatch's timers at once and drops its handler, so that a
// request whose reply came leaves nothing behind to fire. It knows nothing of requests.
import Dispatch

/// A one-shot timer that runs `fire` once after `bound`, unless cancelled first.
final class RequestTimer: @unchecked Sendable {
    private let source: DispatchSourceTimer

    /// Starts the timer at once.
    init(after bound: Duration, _ fire: @escaping @Sendable () -> Void) {
        source = DispatchSource.makeTimerSource(queue: .global())
        source.setEventHandler(handler: fire)
        let ns = bound.components.seconds * 1_000_000_000 + bound.components.attoseconds / 1_000_000_000
        source.schedule(deadline: .now() + .nanoseconds(Int(clamping: ns)), repeating: .never)
        source.activate()
    }

    /// Stops the timer: `fire` will not run. Harmless after it ran or was cancelled.
    func cancel() { source.cancel() }

    /// Whether `cancel()` was called.
    var isCancelled: Bool { source.isCancelled }
}
