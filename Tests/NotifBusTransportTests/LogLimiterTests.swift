// LogLimiter on a fake clock: one line per kind per second, the rest held back, counted
// and reported by the next line of that kind or by `flush` once the second is over.
import Testing

@testable import NotifBusTransport

struct LogLimiterTests {
    static let second = LogLimiter.intervalNs

    @Test func oneLinePerKindPerSecondTheRestCounted() {
        var limiter = LogLimiter()
        #expect(limiter.admit("accept: EMFILE", kind: "accept", now: 0) == "accept: EMFILE")
        // Another kind has its own second.
        #expect(limiter.admit("read: EIO", kind: "read", now: 1) == "read: EIO")
        for step in 1...9 {
            #expect(limiter.admit("accept: EMFILE", kind: "accept", now: UInt64(step) * 100_000_000) == nil)
        }
        #expect(limiter.hasHeld)
        // The second is over a moment later, not a moment sooner.
        #expect(limiter.admit("accept: EMFILE", kind: "accept", now: Self.second - 1) == nil)
        #expect(
            limiter.admit("accept: ENFILE", kind: "accept", now: Self.second)
                == "accept: ENFILE (10 more like it since the last such line)")
        #expect(!limiter.hasHeld)
        #expect(limiter.admit("accept: ENFILE", kind: "accept", now: 2 * Self.second) == "accept: ENFILE")
    }

    @Test func flushReportsWhatWasHeldOnceTheSecondIsOver() {
        var limiter = LogLimiter()
        _ = limiter.admit("a 1", kind: "a", now: 0)
        _ = limiter.admit("a 2", kind: "a", now: 10)
        _ = limiter.admit("a 3", kind: "a", now: 20)
        _ = limiter.admit("b 1", kind: "b", now: 0)
        _ = limiter.admit("b 2", kind: "b", now: 30)
        #expect(limiter.flush(now: Self.second - 1).isEmpty)
        #expect(limiter.flush(now: Self.second) == ["a 3 (1 more like it before it, in the last second)", "b 2"])
        #expect(!limiter.hasHeld && limiter.flush(now: 3 * Self.second).isEmpty)
        // A flushed kind starts a new second at the flush.
        #expect(limiter.admit("a 4", kind: "a", now: Self.second + 5) == nil)
    }
}
