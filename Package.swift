// swift-tools-version:6.0
// notifbus: a broker that shares one notification delegate across processes.
// Layers depend downward only: Protocol <- Core <- Transport <- notifbus, Protocol <- Client.
import PackageDescription

let package = Package(
    name: "notifbus",
    products: [
        .executable(name: "notifbus", targets: ["notifbus"]),
        .library(name: "NotifBusClient", targets: ["NotifBusClient"]),
        .library(name: "NotifBusProtocol", targets: ["NotifBusProtocol"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibevent",
            pkgConfig: "libevent_core",
            providers: [.apt(["libevent-dev", "pkg-config"])]
        ),
        .target(name: "NotifBusProtocol"),
        .target(name: "NotifBusCore", dependencies: ["NotifBusProtocol"]),
        .target(name: "NotifBusTransport", dependencies: ["CLibevent", "NotifBusCore", "NotifBusProtocol"]),
        .target(name: "NotifBusClient", dependencies: ["NotifBusProtocol"]),
        .executableTarget(
            name: "notifbus",
            dependencies: ["NotifBusTransport", "NotifBusClient", "NotifBusProtocol"]
        ),
        .executableTarget(
            name: "notifbus-bench",
            path: "Benchmarks/notifbus-bench",
            linkerSettings: [.linkedLibrary("event_core")]
        ),
        .testTarget(name: "NotifBusProtocolTests", dependencies: ["NotifBusProtocol"]),
        .testTarget(name: "NotifBusCoreTests", dependencies: ["NotifBusCore", "NotifBusProtocol"]),
        .testTarget(name: "IntegrationTests", dependencies: ["NotifBusClient", "NotifBusProtocol"]),
    ],
    swiftLanguageModes: [.v6]
)
