// When the bridge starts the app (`--app-id`) for a click nothing handled, and what becomes
// of the responses that come while it starts. The bridge posts responses one at a time, in
// order; this decides after each post whether to start the app, and while a start is in
// flight it holds the posting: the responses taken meanwhile wait in order, and are posted
// once the app observes didReceive, so they reach it as a running app gets them. Pure: the
// posting loop feeds it each post's result, what the broker's status says, failures and
// the time, and does what it returns.
//
//   idle ──post ended retained for launch, the app not observing, not joined to a failed start──► starting
//   idle ──any other post──────────────────────────────────────────────────────────────────────► idle
//   starting ──the app observes didReceive───────► idle, hand over (post the held responses)
//   starting ──the start failed, or the bound passed──► idle, failed (the held responses are posted
//                                                       and start nothing: they joined this start)
//
// Only the first click of a start is in the broker's `launch` slot (the app takes it at
// start); the held ones are posted after the app observes, so none overwrites it and none
// reaches the app twice.

/// The starts of one app.
public struct AppStarts: Sendable {
    /// What the bridge is doing about the app.
    public enum Phase: Sendable, Equatable {
        case idle
        /// Started for the response numbered `response`; fails when the app does not observe
        /// didReceive by `deadline` (ms, the caller's clock).
        case starting(response: UInt64, deadline: Int64)
    }

    /// What to do after a post.
    public enum AfterPost: Sendable, Equatable {
        /// Nothing to start: post the next response.
        case postNext
        /// Start the app now, and hold the posting until `observed`, `failed` or `tick` ends it.
        case start(deadline: Int64)
        /// The click was kept for launch, and the app is not started: say why in the log.
        case notStarted(NotStarted)
    }

    /// Why a click kept for launch starts nothing.
    public enum NotStarted: Sendable, Equatable {
        /// The app's observer of didReceive is registered: the app runs (and passed the click on).
        case appObserving
        /// The click came while a start was in flight, and that start failed: one start per
        /// burst of clicks, not one per click.
        case joinedFailedStart
    }

    /// How a start ended.
    public enum StartEnd: Sendable, Equatable {
        case stillStarting
        /// The app observes: the `held` responses taken meanwhile are posted to it, in order.
        case handedOver(held: Int)
        /// The start failed: the click stays in `launch`; the `held` responses are posted and
        /// start nothing.
        case failed(reason: String, held: Int)
    }

    /// How long a start may take before it counts as failed, in ms.
    public let timeoutMs: Int64
    public private(set) var phase: Phase = .idle
    /// The number of the newest response taken.
    private var newest: UInt64 = 0
    /// Responses numbered up to this one joined a start that failed.
    private var joinedThrough: UInt64 = 0

    public init(timeoutMs: Int64) {
        self.timeoutMs = timeoutMs
    }

    /// A response was taken from the server's signals: its number, in signal order.
    public mutating func take() -> UInt64 {
        newest += 1
        return newest
    }

    /// The post of response `number` ended. `retainedForLaunch`: the broker kept it in
    /// `launch`; `appObserving`: the broker's status lists the app's observer of didReceive.
    public mutating func posted(_ number: UInt64, retainedForLaunch: Bool, appObserving: Bool, now: Int64) -> AfterPost {
        guard case .idle = phase else { preconditionFailure("AppStarts: a post ended while a start holds the posting") }
        guard retainedForLaunch else { return .postNext }
        if appObserving { return .notStarted(.appObserving) }
        if number <= joinedThrough { return .notStarted(.joinedFailedStart) }
        let deadline = now + timeoutMs
        phase = .starting(response: number, deadline: deadline)
        return .start(deadline: deadline)
    }

    /// The broker's status lists the app's observer of didReceive.
    public mutating func observed() -> StartEnd {
        guard case .starting(let number, _) = phase else { return .stillStarting }
        phase = .idle
        return .handedOver(held: Int(newest - number))
    }

    /// The start failed (no desktop file, the program not found or exiting with an error,
    /// a D-Bus error).
    public mutating func failed(_ reason: String) -> StartEnd {
        guard case .starting(let number, _) = phase else { return .stillStarting }
        phase = .idle
        joinedThrough = newest
        return .failed(reason: reason, held: Int(newest - number))
    }

    /// The time is `now`: a start past its bound fails.
    public mutating func tick(now: Int64) -> StartEnd {
        guard case .starting(_, let deadline) = phase, now >= deadline else { return .stillStarting }
        let bound = timeoutMs % 1000 == 0 ? "\(timeoutMs / 1000) s" : "\(timeoutMs) ms"
        return failed("the app did not observe didReceive within \(bound)")
    }
}
