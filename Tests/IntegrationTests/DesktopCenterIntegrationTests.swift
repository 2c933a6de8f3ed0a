// The Swift `NotificationCenter` against the real desktop bridge: a private session bus,
// python-dbusmock's notification_daemon, a broker and `notifbus-desktop`, all started here.
// add, the delivered list, removal, server information, a click coming back, no server.
import Foundation
import Glibc
import NotifBusClient
import NotifBusProtocol
import Testing

final class PrivateDesktop: @unchecked Sendable {
    let folder = TempFolder()
    let bus: Child
    let address: String
    var server: Child?
    var environment: [String: String]

    init() throws {
        let config = folder.path + "/bus.conf"
        try """
        <busconfig><type>session</type><listen>unix:dir=\(folder.path)</listen><auth>EXTERNAL</auth>
        <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/>
        <allow own="*"/></policy></busconfig>
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let daemon = try Child("/usr/bin/dbus-daemon", ["--config-file", config, "--nofork", "--print-address=1"])
        guard daemon.waitFor(.seconds(10), { daemon.stdout.contains("\n") }) else { throw TestFailure("dbus-daemon printed no address") }
        bus = daemon
        address = daemon.stdoutLines[0]
        environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = address
        environment["DISPLAY"] = nil
    }

    func gdbus(_ args: [String]) throws -> String {
        let c = try Child("/usr/bin/gdbus", args, environment: environment)
        guard c.waitExit(.seconds(10)) == 0 else { throw TestFailure("gdbus \(args): \(c.stderr)") }
        return c.stdout
    }

    func serverOwned() -> Bool {
        (try? gdbus([
            "call", "--session", "-d", "org.freedesktop.DBus", "-o", "/org/freedesktop/DBus",
            "-m", "org.freedesktop.DBus.NameHasOwner", "org.freedesktop.Notifications",
        ]))?.contains("true") ?? false
    }

    func startServer(capabilities: String) throws {
        let s = try Child(
            "/usr/bin/python3",
            [
                "-m", "dbusmock", "--session", "-t", "notification_daemon",
                "-p", "{\"capabilities\": \"\(capabilities)\"}",
            ], environment: environment)
        server = s
        guard s.waitFor(.seconds(15), { serverOwned() }) else { throw TestFailure("dbusmock did not start: \(s.stderr)") }
    }

    func stopServer() {
        server?.stop()
        server = nil
        _ = bus.waitFor(.seconds(10)) { !serverOwned() }
    }

    func emit(_ name: String, _ signature: String, _ args: String) throws {
        _ = try gdbus([
            "call", "--session", "-d", "org.freedesktop.Notifications", "-o", "/org/freedesktop/Notifications",
            "-m", "org.freedesktop.DBus.Mock.EmitSignal", "org.freedesktop.Notifications", name, signature, args,
        ])
    }

    func startBridge(socket: String) throws -> Child {
        let exe = URL(fileURLWithPath: Binaries.notifbus).deletingLastPathComponent().appendingPathComponent("notifbus-desktop").path
        let bridge = try Child(exe, ["--socket", socket, "--app-name", "SwiftTest"], environment: environment)
        guard bridge.waitFor(.seconds(15), { bridge.stderr.contains("serving channel") }) else {
            throw TestFailure("the bridge did not start: \(bridge.stderr)")
        }
        return bridge
    }

    deinit {
        server?.stop()
        bus.stop()
    }
}

/// Collects values from handler tasks for a test to wait on.
final class Inbox<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [T] = []

    func put(_ item: T) { lock.withLock { items.append(item) } }

    func next(within timeout: Duration = .seconds(15)) async -> T? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let item = lock.withLock({ items.isEmpty ? nil : items.removeFirst() }) { return item }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }
}

@Suite(.serialized) struct DesktopCenterIntegrationTests {
    @Test func notificationCenterThroughTheBridge() async throws {
        let desktop = try PrivateDesktop()
        try desktop.startServer(capabilities: "actions body inline-reply")
        let broker = try BrokerUnderTest()
        let bridge = try desktop.startBridge(socket: broker.socket)
        defer { bridge.stop() }
        let bus = try await NotifBusConnection.connect(socket: broker.socket, name: "swift-center")
        defer { bus.close() }
        try await bus.setNotificationCategories([
            NotificationCategory(
                identifier: "INVITE",
                actions: [
                    NotificationAction(identifier: "ACCEPT", title: "Accept", options: [.foreground])
                ])
        ])
        let center = NotificationCenter(connection: bus, timeout: .seconds(15))

        let info = try await center.serverInformation()
        #expect(
            info
                == NotificationServerInfo(
                    name: "mock-notify", vendor: "test vendor", version: "1.0", specVersion: "1.1",
                    capabilities: ["actions", "body", "inline-reply"]))

        let inbox = Inbox<NotificationResponse>()
        try await bus.addDidReceiveObserver { response in
            inbox.put(response)
            return .handled
        }
        let invite = NotifBusClient.Notification(
            identifier: "inv-1",
            content: NotificationContent(
                title: "Team lunch", categoryIdentifier: "INVITE", userInfo: ["eventId": "ev-9"]))
        let delivery = try await center.add(invite)
        #expect(delivery == NotificationDelivery(presented: true, options: .banner, desktopId: 1))
        #expect(try await center.deliveredNotifications() == [DeliveredNotification(notification: invite, desktopId: 1)])

        try desktop.emit("ActionInvoked", "us", "[<uint32 1>, <'ACCEPT'>]")
        let response = await inbox.next()
        #expect(response == NotificationResponse(actionIdentifier: "ACCEPT", notification: invite))
        #expect(try await center.deliveredNotifications() == [])

        let second = NotifBusClient.Notification(identifier: "inv-2", content: NotificationContent(title: "Board"))
        #expect(try await center.add(second).desktopId == 2)
        #expect(try await center.removeDeliveredNotifications(withIdentifiers: ["inv-2", "unknown"]) == ["inv-2"])
        #expect(try await center.removeAllDeliveredNotifications() == [])

        desktop.stopServer()
        do {
            _ = try await center.serverInformation()
            Issue.record("serverInformation without a server succeeded")
        } catch {
            #expect(error.code == DesktopChannel.ErrorCode.noNotificationServer.rawValue)
        }
    }
}
