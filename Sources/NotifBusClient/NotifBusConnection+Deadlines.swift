// The deadlines of a connection's pending requests, on one Dispatch timer armed for the
// earliest. A reply takes its request's deadline out with the request, so no timeout is
// left to fire for it; the timer is re-armed only when a new deadline comes before the
// armed one, or when it fires. It costs a request no timer call of its own, and wakes at
// most once per timeout span with nothing due, rather than once per request.
import Dispatch

extension NotifBusConnection {
    /// Registers request `id`, failing it with `timedOut(message)` unless it is finished by
    /// `deadline`. Call holding `lock`.
    func registerPending(_ id: Int64, deadline: DispatchTime, timeoutMessage: String, _ completion: @escaping Completion) {
        pending[id] = PendingRequest(completion: completion, deadline: deadline, timeoutMessage: timeoutMessage)
        if let armed = armedDeadline, armed <= deadline { return }
        armedDeadline = deadline
        timerArmings += 1
        let timer = deadlineTimer ?? makeDeadlineTimer()
        timer.schedule(deadline: deadline, repeating: .never)
    }

    /// The deadline `bound` from now.
    static func deadline(after bound: Duration) -> DispatchTime {
        let ns = bound.components.seconds * 1_000_000_000 + bound.components.attoseconds / 1_000_000_000
        return .now() + .nanoseconds(Int(clamping: ns))
    }

    /// Made on the first request, activated at once; cancelled when the connection ends for
    /// good (`stopDeadlines`), which drops its handler and with it the connection. Call holding `lock`.
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
        let due = lock.withLock { () -> [PendingRequest] in
            let ids = pending.filter { $0.value.deadline <= now }.map(\.key)
            let due = ids.compactMap { pending.removeValue(forKey: $0) }
            armedDeadline = nil
            if let next = pending.values.map(\.deadline).min() {
                armedDeadline = next
                timerArmings += 1
                deadlineTimer?.schedule(deadline: next, repeating: .never)
            }
            return due
        }
        for entry in due { entry.completion(.failure(.timedOut(entry.timeoutMessage))) }
    }

    /// Ends the timer with the connection. Call holding `lock`.
    func stopDeadlines() {
        deadlineTimer?.cancel()
        deadlineTimer = nil
        armedDeadline = nil
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
