// swift-tools-version:6.0
// notifbus: a broker that shares one notification delegate across processes.
// Layers depend downward only: Protocol <- Core <- Transport <- notifbus, Protocol <- Client.
import PackageDescription

/// Lifetime annotations (`@_lifetime`) on what returns a value that is not `Escapable`: the
/// decoded messages whose user data are views of the frame body (`JSONBytes`), which the
/// compiler then keeps from outliving it.
let lifetimes: [SwiftSetting] = [.enableExperimentalFeature("Lifetimes")]

/// The modules every frame passes through skip dynamic exclusivity checks in release
/// builds: they cost about a tenth of the broker's instructions per frame (callgrind), and
/// debug builds, which every test runs, keep them on.
let hotPath: [SwiftSetting] = lifetimes + [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "notifbus",
    products: [
        .executable(name: "notifbus", targets: ["notifbus"]),
        .executable(name: "notifbus-desktop", targets: ["notifbus-desktop"]),
        .executable(name: "notifbus-bridge", targets: ["notifbus-bridge"]),
        .library(name: "NotifBusClient", targets: ["NotifBusClient"]),
        .library(name: "NotifBusProtocol", targets: ["NotifBusProtocol"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibevent",
            pkgConfig: "libevent_core",
            providers: [.apt(["libevent-dev", "pkg-config"])]
        ),
        .systemLibrary(
            name: "CSdBus",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev", "pkg-config"])]
        ),
        .systemLibrary(
            name: "CNats",
            pkgConfig: "libnats",
            providers: [.apt(["libnats-dev", "pkg-config"])]
        ),
        .target(name: "NotifBusProtocol", swiftSettings: hotPath),
        .target(name: "NotifBusCore", dependencies: ["NotifBusProtocol"], swiftSettings: hotPath),
        .target(name: "NotifBusTransport", dependencies: ["CLibevent", "NotifBusCore", "NotifBusProtocol"], swiftSettings: hotPath),
        .target(name: "NotifBusClient", dependencies: ["NotifBusProtocol"]),
        .executableTarget(
            name: "notifbus",
            dependencies: ["NotifBusTransport", "NotifBusClient", "NotifBusProtocol"],
            // Release builds carry the Swift runtime inside: the broker then maps only the
            // pages it uses (about 8 MiB resident at idle against 11 MiB with shared libraries).
            linkerSettings: [.unsafeFlags(["-static-stdlib"], .when(configuration: .release))]
        ),
        // The desktop bridge: its own executable, the only one that links sd-bus. Its mapping
        // rules (no D-Bus in them) are a library of their own so that tests reach them.
        .target(name: "NotifBusDesktop", dependencies: ["NotifBusClient", "NotifBusProtocol"]),
        .executableTarget(name: "notifbus-desktop", dependencies: ["CSdBus", "NotifBusDesktop", "NotifBusClient", "NotifBusProtocol"]),
        // The NATS bridge and its benchmark link cnats; the broker binary above never does.
        .target(name: "NotifBusNATS", dependencies: ["CNats", "NotifBusClient", "NotifBusProtocol"]),
        .executableTarget(name: "notifbus-bridge", dependencies: ["NotifBusNATS", "NotifBusClient", "NotifBusProtocol"]),
        .executableTarget(
            name: "notifbus-nats-bench", dependencies: ["NotifBusNATS", "NotifBusClient", "NotifBusProtocol"],
            path: "Benchmarks/nats", exclude: ["run.sh"]),
        .executableTarget(
            name: "notifbus-bench",
            path: "Benchmarks/notifbus-bench",
            linkerSettings: [.linkedLibrary("event_core"), .linkedLibrary("systemd")]
        ),
        .executableTarget(
            name: "notifbus-microbench", dependencies: ["NotifBusCore", "NotifBusProtocol", "TestSupport"], path: "Benchmarks/microbench"),
        // Fuzzing: libFuzzer drivers when built with -sanitize=fuzzer; corpus replayers otherwise.
        .target(name: "CFuzzerSupport", path: "Fuzz/CFuzzerSupport"),
        .target(name: "FuzzJSONView", dependencies: ["NotifBusProtocol"], path: "Fuzz/FuzzJSONView"),
        .target(name: "FuzzDriver", dependencies: ["CFuzzerSupport"], path: "Fuzz/FuzzDriver"),
        .executableTarget(
            name: "fuzz-decoder", dependencies: ["CFuzzerSupport", "FuzzDriver", "FuzzJSONView", "NotifBusProtocol"], path: "Fuzz/fuzz-decoder",
            swiftSettings: lifetimes),
        .executableTarget(
            name: "fuzz-core", dependencies: ["CFuzzerSupport", "FuzzDriver", "FuzzJSONView", "NotifBusCore", "NotifBusProtocol"],
            path: "Fuzz/fuzz-core", swiftSettings: lifetimes),
        // The NATS bridge's exactly-once machine against models of JetStream and the broker:
        // run by NotifBusNATSTests' seeded explorer and by fuzz-bridge under libFuzzer.
        .target(name: "BridgeSimulation", dependencies: ["NotifBusNATS", "NotifBusProtocol", "TestSupport"], path: "Fuzz/BridgeSimulation"),
        .executableTarget(
            name: "fuzz-bridge", dependencies: ["BridgeSimulation", "CFuzzerSupport", "FuzzDriver"], path: "Fuzz/fuzz-bridge"),
        // Examples that are processes of their own.
        .target(name: "MailClickSupport", dependencies: ["NotifBusClient"], path: "Examples/MailClick/Sources/MailClickSupport"),
        .executableTarget(
            name: "mailclick-host", dependencies: ["MailClickSupport", "NotifBusClient"], path: "Examples/MailClick/Sources/mailclick-host"),
        .executableTarget(
            name: "mailclick-app", dependencies: ["MailClickSupport", "NotifBusClient"], path: "Examples/MailClick/Sources/mailclick-app"),
        .executableTarget(name: "categories-observer", dependencies: ["NotifBusClient"], path: "Examples/Categories/Sources/categories-observer"),
        // Test support shared by several test targets: the scenario files and their matcher, JSON depth.
        .target(name: "TestSupport", dependencies: ["NotifBusProtocol"], path: "Tests/TestSupport"),
        .testTarget(name: "NotifBusProtocolTests", dependencies: ["NotifBusProtocol", "TestSupport"], swiftSettings: lifetimes),
        .testTarget(name: "NotifBusCoreTests", dependencies: ["NotifBusCore", "NotifBusProtocol", "TestSupport"], swiftSettings: lifetimes),
        .testTarget(name: "NotifBusDesktopTests", dependencies: ["NotifBusDesktop", "NotifBusClient", "NotifBusProtocol", "TestSupport"]),
        .testTarget(name: "NotifBusNATSTests", dependencies: ["BridgeSimulation", "NotifBusNATS", "NotifBusProtocol"]),
        .testTarget(name: "NotifBusTransportTests", dependencies: ["CLibevent", "NotifBusTransport", "NotifBusCore", "NotifBusProtocol"]),
        .testTarget(name: "NotifBusClientTests", dependencies: ["NotifBusClient", "NotifBusProtocol", "TestSupport"]),
        .testTarget(name: "IntegrationTests", dependencies: ["NotifBusClient", "NotifBusProtocol", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
