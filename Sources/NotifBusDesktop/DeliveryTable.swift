// The notifications the bridge has on the desktop, by the server's id, and the rule that
// turns the server's signals into at most one `didReceive` per notification. A value type:
// inputs are the server's answers and signals, outputs the responses to post.
//
//     delivered ──ActionInvoked(known key)────────► response, entry removed
//         │   ──NotificationReplied (inline reply)─► response with userText, entry removed
//         │   ──NotificationClosed(2), customDismissAction─► dismiss response, entry removed
//         │   ──NotificationClosed(other reasons)──► nothing, entry removed
//         └── removed / reset / evicted ──────────► nothing (later signals find no entry)
import NotifBusClient
import NotifBusProtocol

/// Why the server closed a notification (`NotificationClosed`'s reason).
public enum CloseReason: UInt32, Sendable {
    case expired = 1
    case dismissedByUser = 2
    case closedByCall = 3
    case undefined = 4
}

/// The delivered notifications and their pending answer.
public struct DeliveryTable: Sendable {
    /// At most this many notifications are remembered; the oldest is forgotten first. A
    /// desktop shows far fewer, and servers that drop notifications silently must not make
    /// the table grow without bound.
    public static let defaultCapacity = 4096

    struct Entry: Sendable {
        let notification: NotifBusClient.Notification
        /// The notification's `userInfo` as the app sent it (one JSON object), when known:
        /// what its click is posted with, so that the app gets its data back unchanged.
        let userInfo: RawJSON?
        let category: NotificationCategory?
        let routes: [String: ActionRoute]
        let sequence: UInt64
        /// The unique name of the bridge connection that called `Notify`: the one dunst and
        /// GNOME Shell send this notification's signals to.
        let caller: String?
        /// The server's `ActivationToken` for it, when one came (memory only: it is meant
        /// for the start that follows the click, not for a later bridge).
        var activationToken: String? = nil
    }

    public let capacity: Int
    var entries: [UInt32: Entry] = [:]
    var idByIdentifier: [String: UInt32] = [:]
    var nextSequence: UInt64 = 0

    /// An empty table.
    public init(capacity: Int = DeliveryTable.defaultCapacity) {
        self.capacity = max(1, capacity)
    }

    /// How many notifications are delivered.
    public var count: Int { entries.count }

    /// The server's id of the delivered notification with this request identifier.
    public func desktopId(forIdentifier identifier: String) -> UInt32? { idByIdentifier[identifier] }

    /// The delivered notifications, oldest first.
    public var delivered: [DeliveredNotification] {
        entries.sorted { $0.value.sequence < $1.value.sequence }
            .map { DeliveredNotification(notification: $0.value.notification, desktopId: $0.key) }
    }

    /// Records that the server shows `notification` under `desktopId`. A notification with
    /// the same identifier, or a notification the server replaced under the same id, is
    /// forgotten. Returns the ids forgotten to stay within capacity.
    @discardableResult
    public mutating func record(
        _ notification: NotifBusClient.Notification, desktopId: UInt32, category: NotificationCategory?,
        routes: [String: ActionRoute], caller: String? = nil, userInfo: RawJSON? = nil
    ) -> [UInt32] {
        if let old = idByIdentifier[notification.identifier] { forget(old) }
        forget(desktopId)
        entries[desktopId] = Entry(
            notification: notification, userInfo: userInfo, category: category, routes: routes, sequence: nextSequence, caller: caller)
        idByIdentifier[notification.identifier] = desktopId
        nextSequence += 1
        var evicted: [UInt32] = []
        while entries.count > capacity, let oldest = entries.min(by: { $0.value.sequence < $1.value.sequence })?.key {
            forget(oldest)
            evicted.append(oldest)
        }
        return evicted
    }

    /// `ActivationToken(id, token)` (spec 1.3, sent before `ActionInvoked`): kept with the
    /// notification for the start that may follow its click.
    public mutating func activationToken(desktopId: UInt32, token: String) {
        entries[desktopId]?.activationToken = token
    }

    /// The activation token the server sent for a delivered notification.
    public func activationToken(desktopId: UInt32) -> String? { entries[desktopId]?.activationToken }

    /// The `userInfo` bytes the app sent for a delivered notification, when known.
    public func userInfo(desktopId: UInt32) -> RawJSON? { entries[desktopId]?.userInfo }

    /// Whether a notification is delivered under this id.
    public func contains(desktopId: UInt32) -> Bool { entries[desktopId] != nil }

    /// The bridge connections that called `Notify` for the notifications delivered, other
    /// than `current`: after a restart, the server still sends those notifications' signals to
    /// them.
    public func earlierCallers(than current: String?) -> Set<String> {
        Set(entries.values.compactMap(\.caller).filter { $0 != current })
    }

    /// `ActionInvoked(id, key)`: the response for a known notification and key, once.
    public mutating func actionInvoked(desktopId: UInt32, key: String) -> NotificationResponse? {
        guard let entry = entries[desktopId], let route = entry.routes[key] else { return nil }
        let response: NotificationResponse
        switch route {
        case .defaultAction:
            response = NotificationResponse(actionIdentifier: NotificationResponse.defaultActionIdentifier, notification: entry.notification)
        case .action(let action):
            response = NotificationResponse(actionIdentifier: action, notification: entry.notification)
        case .textInputButton(let action):
            response = NotificationResponse(actionIdentifier: action, notification: entry.notification, userText: "")
        case .inlineReply:
            // The reply field's answer comes as NotificationReplied; a bare invocation carries no text.
            return nil
        }
        forget(desktopId)
        return response
    }

    /// `NotificationReplied(id, text)`: the inline reply's action with `userText`, once.
    public mutating func replied(desktopId: UInt32, text: String) -> NotificationResponse? {
        guard let entry = entries[desktopId] else { return nil }
        for case .inlineReply(let action) in entry.routes.values {
            forget(desktopId)
            return NotificationResponse(actionIdentifier: action, notification: entry.notification, userText: text)
        }
        return nil
    }

    /// `NotificationClosed(id, reason)`: the dismiss response when the user dismissed a
    /// notification whose category has `customDismissAction`; the entry is gone either way.
    public mutating func closed(desktopId: UInt32, reason: UInt32) -> NotificationResponse? {
        guard let entry = entries[desktopId] else { return nil }
        forget(desktopId)
        guard reason == CloseReason.dismissedByUser.rawValue,
            entry.category?.options.contains(.customDismissAction) == true
        else { return nil }
        return NotificationResponse(actionIdentifier: NotificationResponse.dismissActionIdentifier, notification: entry.notification)
    }

    /// Forgets the notifications with these identifiers; returns (identifier, id) of those
    /// that were delivered, in the order asked.
    public mutating func remove(identifiers: [String]) -> [(identifier: String, desktopId: UInt32)] {
        var out: [(identifier: String, desktopId: UInt32)] = []
        for identifier in identifiers {
            guard let id = idByIdentifier[identifier] else { continue }
            forget(id)
            out.append((identifier, id))
        }
        return out
    }

    /// Forgets everything (the server went away); returns how many were delivered.
    @discardableResult
    public mutating func reset() -> Int {
        let n = entries.count
        entries.removeAll()
        idByIdentifier.removeAll()
        return n
    }

    mutating func forget(_ desktopId: UInt32) {
        guard let entry = entries.removeValue(forKey: desktopId) else { return }
        if idByIdentifier[entry.notification.identifier] == desktopId { idByIdentifier[entry.notification.identifier] = nil }
    }
}
