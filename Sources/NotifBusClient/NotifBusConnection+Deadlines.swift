// The deadlines of a connection's pending requests, on one Dispatch timer armed for the
// earliest. A reply takes its request's deadline out with the request, so no timeout is
// left to fire for it; the timer is re-armed only when a new deadline comes before the
// armed one, or when it fires. It costs a request no timer call of its own, and wakes at
// most once per timeout span with nothing due, rather than once per request. Which deadline
// is armed is decided by ConnectionSession (`register`, `expire`); this file arms the timer.
import Dispatch

extension NotifBusConnection {
    /// Registers request `id` in `state`, to fail with its `timeoutMessage` unless it is
    /// finished by its deadline, and arms the timer when that deadline comes first. Call
    /// inside `withState`.
    func register(_ request: PendingRequest, id: Int64, in state: inout ConnectionSession) {
        guard let deadline = state.register(request, id: id) else { return }
        let timer = deadlineTimer ?? makeDeadlineTimer()
        timer.schedule(deadline: deadline, repeating: .never)
    }

    /// The deadline `bound` from now.
    static func deadline(after bound: Duration) -> DispatchTime {
        let ns = bound.components.seconds * 1_000_000_000 + bound.components.attoseconds / 1_000_000_000
        return .now() + .nanoseconds(Int(clamping: ns))
    }

    /// Made on the first request, activated at once; cancelled when the connection ends for
    /// good (`stopDeadlineTimer`), which drops its handler and with it the connection. Call
    /// inside `withState`.
    private func makeDeadlineTimer() -> DispatchSourceTimer {
        let timer = DispatchSource.makeTimerSource(queue: .global())
        timer.setEventHandler { [self] in expireDeadlines() }
        timer.activate()
        deadlineTimer = timer
        return timer
    }

    /// Fails every request whose deadline has passed, and arms the timer for the next one.
    func expireDeadlines() {
        let now = DispatchTime.now()
        let due = withState { state in
            let (due, next) = state.expire(now: now)
            if let next { deadlineTimer?.schedule(deadline: next, repeating: .never) }
            return due
        }
        for entry in due { entry.completion(.failure(.timedOut(entry.timeoutMessage))) }
    }

    /// Ends the timer with the connection. Call inside `withState`.
    func stopDeadlineTimer() {
        deadlineTimer?.cancel()
        deadlineTimer = nil
    }
}

extension Duration {
    /// A timeout as its messages show it, to the millisecond: `1 s`, `1.5 s`, `250 ms`. A
    /// request's bound is what the caller gave less the microseconds spent before it was
    /// sent (0.999998 seconds), which is the caller's 1 s.
    var readable: String {
        let (seconds, attoseconds) = components
        let ms = seconds * 1000 + (attoseconds + 500_000_000_000_000) / 1_000_000_000_000_000
        guard ms >= 1000 else { return "\(ms) ms" }
        var fraction = String(ms % 1000)
        fraction = String(repeating: "0", count: 3 - fraction.count) + fraction
        while fraction.hasSuffix("0") { fraction.removeLast() }
        return "\(ms / 1000)\(fraction.isEmpty ? "" : "." + fraction) s"
    }
}
