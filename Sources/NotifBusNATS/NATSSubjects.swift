// The NATS subjects and headers of one device, and the reading of an inbound message into a
// post or put, or a dead-letter reason. Pure: no NATS, no broker, no clock.
import NotifBusProtocol

/// What an inbound stream message asks the device to do.
public enum InboundAction: Equatable, Sendable {
    case post(event: String, payload: JSONValue)
    case put(slot: String, value: JSONValue)
}

/// Why an inbound message was refused to the dead-letter subject. The codes are wire names.
public struct DeadLetterReason: Equatable, Error {
    /// `no_msg_id`, `unknown_subject`, `bad_name`, `bad_json` or `reserved_slot`.
    public let code: String
    public let detail: String

    public init(code: String, detail: String) {
        self.code = code
        self.detail = detail
    }

    public static let noMsgID = "no_msg_id"
    public static let unknownSubject = "unknown_subject"
    public static let badName = "bad_name"
    public static let badJSON = "bad_json"
    public static let reservedSlot = "reserved_slot"
}

/// Subject names for one device (`notifbus.<device>.…`), written once here.
public struct NATSSubjects: Sendable {
    public let device: String

    public init(device: String) { self.device = device }

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

    public var prefix: String { "notifbus." + device + "." }
    public var post: String { prefix + "post" }
    public var put: String { prefix + "put" }
    public var invokeWildcard: String { prefix + "invoke.>" }
    public var result: String { prefix + "result" }
    public var dead: String { prefix + "dead" }
    public func event(_ name: String) -> String { prefix + "event." + name }
    public var eventWildcard: String { prefix + "event.>" }
    /// The inbound stream's subjects.
    public var inboundSubjects: [String] { [post + ".>", put + ".>"] }
    /// The outbound stream's subjects.
    public var outboundSubjects: [String] { [result, dead, eventWildcard] }
    /// The broker slot the bridge keeps its send marker in (see Protocol/NATS.md §4); NATS may not put it.
    public var markerSlot: String { "notifbus-bridge.nats." + device }

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
        let isPost = subject.hasPrefix(post + ".")
        let isPut = subject.hasPrefix(put + ".")
        guard isPost || isPut else {
            return .failure(
                .init(
                    code: DeadLetterReason.unknownSubject,
                    detail: "subject \(subject) is neither \(post).<event> nor \(put).<slot>"))
        }
        let name = String(subject.dropFirst((isPost ? post : put).count + 1))
        guard !name.isEmpty, name.utf8.count <= NATSSubjects.maxNameBytes else {
            return .failure(.init(code: DeadLetterReason.badName, detail: "a name is 1 to \(NATSSubjects.maxNameBytes) bytes"))
        }
        if isPut && name == markerSlot {
            return .failure(.init(code: DeadLetterReason.reservedSlot, detail: "slot \(name) is the bridge's own marker"))
        }
        let value: JSONValue
        if body.isEmpty && isPost {
            value = .null
        } else {
            do { value = try JSONValue(parsing: body) } catch {
                return .failure(.init(code: DeadLetterReason.badJSON, detail: "the body is not JSON: \(error)"))
            }
        }
        return .success(isPost ? .post(event: name, payload: value) : .put(slot: name, value: value))
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
