// What waits behind durable writes, broker-wide: which connections hold requests back and in
// what order they began, the launch retentions waiting for `launch`, the count of arrivals
// that orders held takes against values, and the guard that keeps resuming from running
// inside itself. It keeps order only: whether a request may start is Broker+Writes.swift's
// decision, and each connection's own held requests stay in its ClientRecord.

/// The broker's requests held back behind durable writes.
///
/// The resume guard, for `Broker.resumeWaiting`:
///
///     idle ──beginResume() true──▶ resuming ──endResume()──▶ idle
///                                    │  ▲
///            beginResume() false ────┘  └── takeResumeRequest() clears the request
///            (marks a resume requested)
struct HeldRequests {
    /// Requests admitted so far: the broker-wide order of arrival of held requests.
    private(set) var arrivals = 0
    /// Connections with requests held back, in the order they began waiting.
    private var waitingClients: [ConnectionID] = []
    /// Launch retentions waiting for a write on `launch` to finish, oldest first.
    private var retentions = FIFO<RunningEvent>()
    private var resuming = false
    private var resumeRequested = false

    // MARK: Arrivals

    /// Counts one admitted request and returns its place in the order of arrival.
    @discardableResult
    mutating func arrive() -> Int {
        arrivals += 1
        return arrivals
    }

    // MARK: Waiting connections

    /// Whether any connection has requests held back.
    var hasWaitingClients: Bool { !waitingClients.isEmpty }

    /// `c` began holding requests back (its first one waits now).
    mutating func beganWaiting(_ c: ConnectionID) {
        waitingClients.append(c)
    }

    /// The waiting connections in the order they began, removed: whoever still waits after
    /// its turn is added back with `beganWaiting`, behind those that began meanwhile.
    mutating func takeWaitingClients() -> [ConnectionID] {
        let order = waitingClients
        waitingClients.removeAll()
        return order
    }

    // MARK: Launch retentions

    /// Whether any launch retention waits.
    var hasRetentions: Bool { !retentions.isEmpty }
    /// How many launch retentions wait, and their payloads' bytes: they hold their posts
    /// as the queue does, and count against its limits.
    var retentionCount: Int { retentions.count }
    private(set) var retentionBytes = 0

    /// Holds `event`'s retention behind those already waiting.
    mutating func holdRetention(_ event: RunningEvent) {
        retentionBytes += event.post.payloadCount
        retentions.append(event)
    }

    /// The oldest waiting retention, removed.
    mutating func popRetention() -> RunningEvent? {
        guard let event = retentions.popFirst() else { return nil }
        retentionBytes -= event.post.payloadCount
        return event
    }

    // MARK: The resume guard

    /// Enters resuming and returns true; while already resuming, returns false and notes
    /// that another pass was asked for.
    mutating func beginResume() -> Bool {
        guard !resuming else {
            resumeRequested = true
            return false
        }
        resuming = true
        return true
    }

    /// Leaves resuming.
    mutating func endResume() {
        resuming = false
    }

    /// Whether another pass was asked for since the last call; clears the request.
    mutating func takeResumeRequest() -> Bool {
        defer { resumeRequested = false }
        return resumeRequested
    }
}
