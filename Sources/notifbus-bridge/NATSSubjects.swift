// The NATS subjects and headers of one device, and the reading of an inbound message into a
// post or put, or a dead-letter reason. Pure: no NATS, no broker, no clock.
import NotifBusProtocol

/// What an inbound stream message asks the device to do.
enum InboundAction: Equatable {
    case post(event: String, payload: JSONValue)
    case put(slot: String, value: JSONValue)
}

/// Why an inbound message was refused to the dead-letter subject. The codes are wire names.
struct DeadLetterReason: Equatable, Error {
    /// `no_msg_id`, `unknown_subject`, `bad_name`, `bad_json` or `reserved_slot`.
    let code: String
    let detail: String

    static let noMsgID = "no_msg_id"
    static let unknownSubject = "unknown_subject"
    static let badName = "bad_name"
    static let badJSON = "bad_json"
    static let reservedSlot = "reserved_slot"
}

/// Subject names for one device (`notifbus.<device>.…`), written once here.
struct NATSSubjects: Sendable {
    let device: String

    /// The largest name the broker accepts (protocol §3), in bytes.
    static let maxNameBytes = 256
    /// Header names the bridge reads and writes besides `Nats-Msg-Id`.
    static let reasonHeader = "Notifbus-Reason"
    static let detailHeader = "Notifbus-Detail"
    static let subjectHeader = "Notifbus-Subject"
    static let inboundIDHeader = "Notifbus-Msg-Id"
    static let timeoutHeader = "Notifbus-Timeout-Ms"
    static let eventHeader = "Notifbus-Event"
    static let clientHeader = "Notifbus-Client"

    var prefix: String { "notifbus." + device + "." }
    var post: String { prefix + "post" }
    var put: String { prefix + "put" }
    var invokeWildcard: String { prefix + "invoke.>" }
    var result: String { prefix + "result" }
    var dead: String { prefix + "dead" }
    func event(_ name: String) -> String { prefix + "event." + name }
    var eventWildcard: String { prefix + "event.>" }
    /// The inbound stream's subjects.
    var inboundSubjects: [String] { [post + ".>", put + ".>"] }
    /// The outbound stream's subjects.
    var outboundSubjects: [String] { [result, dead, eventWildcard] }
    /// The broker slot the bridge keeps its send marker in (see Protocol/NATS.md §4); NATS may not put it.
    var markerSlot: String { "notifbus-bridge.nats." + device }

    /// A device id becomes one subject token: 1 to 64 of `A-Z a-z 0-9 - _`.
    static func isValidDevice(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64 && id.utf8.allSatisfy {
            ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F
        }
    }

    /// Reads an inbound message. Checked in this order: message id, subject form, name, body.
    func classify(subject: String, msgID: String?, body: [UInt8]) -> Result<InboundAction, DeadLetterReason> {
        guard let msgID, !msgID.isEmpty else {
            return .failure(.init(code: DeadLetterReason.noMsgID, detail: "the message has no Nats-Msg-Id header"))
        }
        _ = msgID
        let isPost = subject.hasPrefix(post + ".")
        let isPut = subject.hasPrefix(put + ".")
        guard isPost || isPut else {
            return .failure(.init(code: DeadLetterReason.unknownSubject,
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
    func invokeTarget(_ subject: String) -> (channel: String, method: String)? {
        let head = prefix + "invoke."
        guard subject.hasPrefix(head) else { return nil }
        let rest = subject.dropFirst(head.count)
        guard let dot = rest.lastIndex(of: ".") else { return nil }
        let channel = String(rest[..<dot]), method = String(rest[rest.index(after: dot)...])
        guard !channel.isEmpty, !method.isEmpty,
              channel.utf8.count <= NATSSubjects.maxNameBytes, method.utf8.count <= NATSSubjects.maxNameBytes else { return nil }
        return (channel, method)
    }
}
