// The NATS subjects and headers of one device, and the reading of an inbound message into a
// post or put, or a dead-letter reason. Pure: no NATS, no broker, no clock. A body is checked
// as JSON and kept as the bytes it came as; it is never parsed into a tree and written again.
import NotifBusProtocol

/// What an inbound stream message asks the device to do. Bodies are the message's bytes,
/// unchanged, so that `1e9` reaches the broker as `1e9`.
public enum InboundAction: Equatable, Sendable {
    /// `payload` is nil when the body is empty (a post without payload).
    case post(event: String, payload: [UInt8]?)
    case put(slot: String, value: [UInt8])
}

/// Why an inbound message was refused to the dead-letter subject. The codes are wire names.
public struct DeadLetterReason: Equatable, Error {
    /// The bridge's own reasons below, or the broker's error code for a refusal that
    /// sending again would not change (Protocol/NATS.md §5).
    public let code: String
    public let detail: String

    public init(code: String, detail: String) {
        self.code = code
        self.detail = detail
    }

    public static let noMsgID = "no_msg_id"
    public static let longMsgID = "long_msg_id"
    public static let unknownSubject = "unknown_subject"
    public static let badName = "bad_name"
    public static let badJSON = "bad_json"
    public static let tooLarge = "too_large"
}

/// How devices share a cluster's streams (Protocol/NATS.md §2).
public enum NATSLayout: String, Sendable, CaseIterable {
    /// One inbound stream and one outbound stream for every device; each device's bridge
    /// reads its own subjects `notifbus.<device>.in.>` through a filtered consumer.
    case shared
    /// Two streams of its own per device; inbound subjects without the `in` token.
    case perDevice = "per-device"
}

/// Subject names for one device (`notifbus.<device>.…`), written once here.
public struct NATSSubjects: Sendable {
    public let device: String
    public let layout: NATSLayout

    public init(device: String, layout: NATSLayout = .perDevice) {
        self.device = device
        self.layout = layout
        prefix = "notifbus." + device + "."
        inboundPrefix = layout == .shared ? prefix + "in." : prefix
        post = inboundPrefix + "post"
        put = inboundPrefix + "put"
        keyPrefix = "nats/" + device + "/"
        result = prefix + "result"
        dead = prefix + "dead"
        postSubjectHead = Array((post + ".").utf8)
        putSubjectHead = Array((put + ".").utf8)
    }

    /// The largest name the broker accepts (protocol §3), in bytes.
    public static let maxNameBytes = 256
    /// Header names the bridge reads and writes besides `Nats-Msg-Id`.
    public static let reasonHeader = "Notifbus-Reason"
    public static let detailHeader = "Notifbus-Detail"
    public static let subjectHeader = "Notifbus-Subject"
    public static let inboundIDHeader = "Notifbus-Msg-Id"
    public static let timeoutHeader = "Notifbus-Timeout-Ms"
    public static let eventHeader = "Notifbus-Event"
    public static let clientHeader = "Notifbus-Client"

    // Made once (`init`): an inbound message is read against them.
    public let prefix: String
    /// What comes before `post` and `put`: `notifbus.<device>.in.` in the shared layout,
    /// whose consumer filter (one subject in JetStream 2.9) must take both.
    public let inboundPrefix: String
    public let post: String
    public let put: String
    /// `post.` and `put.`, as the UTF-8 an inbound subject starts with.
    let postSubjectHead: [UInt8]
    let putSubjectHead: [UInt8]
    public var invokeWildcard: String { prefix + "invoke.>" }
    public let result: String
    public let dead: String
    public func event(_ name: String) -> String { prefix + "event." + name }
    public var eventWildcard: String { prefix + "event.>" }
    /// The inbound stream's subjects: this device's, or in the shared layout every device's.
    public var inboundSubjects: [String] {
        layout == .shared ? ["notifbus.*.in.>"] : [post + ".>", put + ".>"]
    }
    /// The outbound stream's subjects.
    public var outboundSubjects: [String] {
        layout == .shared ? ["notifbus.*.result", "notifbus.*.dead", "notifbus.*.event.>"] : [result, dead, eventWildcard]
    }
    /// The consumer's filter in the shared layout (nil: the stream is the device's own).
    public var consumerFilter: String? { layout == .shared ? inboundPrefix + ">" : nil }
    /// The largest idempotency key the broker takes (protocol-v1 `once`), in bytes.
    public static let maxKeyBytes = 256
    /// What comes before the inbound message id in its key: `nats/<device>/`.
    public let keyPrefix: String
    /// The longest `Nats-Msg-Id` whose key fits: 186 bytes for a 64-byte device id.
    public var maxMsgIDBytes: Int { NATSSubjects.maxKeyBytes &- keyPrefix.utf8.count }
    /// The broker's idempotency key of the inbound message `msgID`.
    public func onceKey(_ msgID: String) -> String { keyPrefix + msgID }

    /// A device id becomes one subject token: 1 to 64 of `A-Z a-z 0-9 - _`.
    public static func isValidDevice(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64
            && id.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F
            }
    }

    /// Reads an inbound message. Checked in this order: message id, subject form, name, body.
    public func classify(subject: String, msgID: String?, body: [UInt8]) -> Result<InboundAction, DeadLetterReason> {
        guard let msgID, !msgID.isEmpty else {
            return .failure(.init(code: DeadLetterReason.noMsgID, detail: "the message has no Nats-Msg-Id header"))
        }
        guard msgID.utf8.count <= maxMsgIDBytes else {
            return .failure(
                .init(
                    code: DeadLetterReason.longMsgID,
                    detail: "Nats-Msg-Id is \(msgID.utf8.count) bytes; its key \(keyPrefix)<id> must fit in \(NATSSubjects.maxKeyBytes)"))
        }
        let isPost = subject.utf8.starts(with: postSubjectHead)
        let isPut = !isPost && subject.utf8.starts(with: putSubjectHead)
        guard isPost || isPut else {
            return .failure(
                .init(
                    code: DeadLetterReason.unknownSubject,
                    detail: "subject \(subject) is neither \(post).<event> nor \(put).<slot>"))
        }
        // After the head, which ends with an ASCII dot: a whole character.
        let name = String(Substring(subject.utf8.dropFirst((isPost ? postSubjectHead : putSubjectHead).count)))
        guard !name.isEmpty, name.utf8.count <= NATSSubjects.maxNameBytes else {
            return .failure(.init(code: DeadLetterReason.badName, detail: "a name is 1 to \(NATSSubjects.maxNameBytes) bytes"))
        }
        if body.isEmpty && isPost { return .success(.post(event: name, payload: nil)) }
        guard JSONScanner.isValidDocument(body) else {
            let what = body.isEmpty ? "a put needs a body" : "the body is not one JSON value"
            return .failure(.init(code: DeadLetterReason.badJSON, detail: what))
        }
        return .success(isPost ? .post(event: name, payload: body) : .put(slot: name, value: body))
    }

    /// Splits `notifbus.<device>.invoke.<channel…>.<method>`: the method is the last token,
    /// the channel everything between (channels may hold dots, methods may not).
    public func invokeTarget(_ subject: String) -> (channel: String, method: String)? {
        let head = prefix + "invoke."
        guard subject.hasPrefix(head) else { return nil }
        let rest = subject.dropFirst(head.count)
        guard let dot = rest.lastIndex(of: ".") else { return nil }
        let channel = String(rest[..<dot]), method = String(rest[rest.index(after: dot)...])
        guard !channel.isEmpty, !method.isEmpty,
            channel.utf8.count <= NATSSubjects.maxNameBytes, method.utf8.count <= NATSSubjects.maxNameBytes
        else { return nil }
        return (channel, method)
    }
}
