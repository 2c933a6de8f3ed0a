// The rule for a didReceive whose post failed (FailedPost): what is posted again (with the
// same once key), what waits and is posted again, and what is logged and let go. No sockets:
// the client's errors in, the rule out.
import NotifBusClient
import NotifBusDesktop
import NotifBusProtocol
import Testing

@Suite struct FailedPostTests {
    static func broker(_ code: String) -> NotifBusError { .broker(BrokerError(code: code, message: "no")) }

    @Test func aGracefulStopIsPostedAgain() {
        #expect(FailedPost(Self.broker(ErrorCode.shuttingDown.rawValue)) == .postAgain)
        #expect(FailedPost(.connectFailed("connection refused")) == .postAgain)
    }

    @Test func aPostWhoseAnswerWasLostIsPostedAgainUnderItsKey() {
        #expect(FailedPost(.connectionLost("the broker closed the connection")) == .postAgain)
        #expect(FailedPost(.timedOut("no reply to 'post' within 60 seconds")) == .postAgain)
        #expect(FailedPost(.protocolViolation("a reply without a result")) == .postAgain)
    }

    @Test func aBrokerThatCannotTakeItNowIsAskedAgainLater() {
        #expect(FailedPost(Self.broker(ErrorCode.queueFull.rawValue)) == .retryLater)
        #expect(FailedPost(Self.broker(ErrorCode.storageFailed.rawValue)) == .retryLater)
    }

    @Test func aChainCutByTheBrokerStoppingIsNotPostedAgain() {
        #expect(FailedPost(Self.broker(ErrorCode.interrupted.rawValue)) == .interrupted)
    }

    @Test func otherBrokerErrorsAreRefusals() {
        for code in [ErrorCode.invalidAction, .invalidPayload, .badRequest, .onceConflict] {
            #expect(FailedPost(Self.broker(code.rawValue)) == .refused, "\(code)")
        }
        #expect(FailedPost(Self.broker("handler_own_code")) == .refused)
        #expect(FailedPost(.invalidArgument("too long")) == .refused)
    }
}
