// The rule for a didReceive whose post failed (FailedPost): what is posted again after a
// broker restart, and what is logged and let go. No sockets: the client's errors in, the rule out.
import NotifBusClient
import NotifBusDesktop
import NotifBusProtocol
import Testing

@Suite struct FailedPostTests {
    @Test func aGracefulStopIsPostedAgain() {
        let stopping = NotifBusError.broker(BrokerError(code: ErrorCode.shuttingDown.rawValue, message: "the broker is stopping"))
        #expect(FailedPost(stopping) == .postAgain)
        #expect(FailedPost(.connectFailed("connection refused")) == .postAgain)
    }

    @Test func otherBrokerErrorsAreRefusals() {
        for code in [ErrorCode.invalidAction, .invalidPayload, .queueFull] {
            #expect(FailedPost(.broker(BrokerError(code: code.rawValue, message: "no"))) == .refused, "\(code)")
        }
        #expect(FailedPost(.broker(BrokerError(code: "handler_own_code", message: "no"))) == .refused)
        #expect(FailedPost(.invalidArgument("too long")) == .refused)
    }

    @Test func aPostLostWithoutAnAnswerIsNotPostedAgain() {
        #expect(FailedPost(.connectionLost("the broker closed the connection")) == .outcomeUnknown)
        #expect(FailedPost(.timedOut("no reply to 'post' within 60 seconds")) == .outcomeUnknown)
        #expect(FailedPost(.protocolViolation("a reply without a result")) == .outcomeUnknown)
    }
}
