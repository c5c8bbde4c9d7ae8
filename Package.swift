// swift-tools-version: 6.1
//
// bledfu: firmware updates of BLE devices on Linux over raw ATT (BlueZ kernel L2CAP sockets): Nordic Secure DFU,
// Legacy DFU and MCUmgr SMP into MCUboot, as a command line and as the library product BledfuKit.
//
// The module graph is the layer graph (docs/architecture.md; tools/check-layers checks every edge, test targets
// included, and the docs' module table). The core modules (BLECore, ATT, GATT, DFUCore, DFUProtocol, DFUPackage,
// SecureDFU, LegacyDFU, MCUmgr, CBOR, MCUbootImage, DFUSimulator) make no syscalls and import neither Glibc nor
// a C shim; the transports (LinuxIO, VirtualRadio, BlueZTransport) do the I/O. tools/check-layers.py's LAYERS
// holds the layer of every target (the "Layer" notes below are older and coarser).
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let log = Target.Dependency.product(name: "Logging", package: "swift-log")

var targets: [Target] = [
    // Layer 0: C shim for libbluetooth (declarations and static inline helpers only).
    .target(
        name: "CBlueZShim",
        path: "Sources/CBlueZShim",
        linkerSettings: [.linkedLibrary("bluetooth")]
    ),
    // Layer 0: C declarations of the Linux calls Swift's Glibc module leaves out (epoll, sendmmsg/recvmmsg).
    .target(name: "CLinuxShim", path: "Sources/CLinuxShim"),
    // Layer 0: the commit slot `bledfu --version` reads (tools/stamp-commit writes the commit into a built binary).
    .target(name: "CBuildInfo", path: "Sources/CBuildInfo"),
    // Layer 1: pure value types shared by every layer (bytes, addresses, UUIDs, CRCs, the bearer protocol).
    .target(
        name: "BLECore",
        exclude: ["Data"],  // assigned-numbers.tsv; tools/generate-embedded carries it in Generated/AssignedNumbersData.swift
        swiftSettings: swiftSettings),
    // Layer 2: ATT PDU codec (pure).
    .target(name: "ATT", dependencies: ["BLECore"], swiftSettings: swiftSettings),
    // Layer 3: ATT client/server bearer logic and GATT client/server (pure Swift concurrency, no syscalls).
    .target(name: "GATT", dependencies: ["BLECore", "ATT", log], swiftSettings: swiftSettings),
    // Test support, lower half (test code only, never a product's dependency): the manual clock, the in-memory
    // bearer pair, a Secure DFU bootloader double. Low enough for GATTTests; BledfuTestSupport builds on it.
    .target(name: "TestDoubles", dependencies: ["BLECore", "DFUProtocol"], swiftSettings: swiftSettings),
    // Layer 4: transports. Every syscall goes through LinuxIO/Syscalls.swift.
    .target(
        name: "LinuxIO",
        dependencies: ["BLECore", "CLinuxShim", .product(name: "SystemPackage", package: "swift-system"), log],
        swiftSettings: swiftSettings + [.define("ENABLE_MOCKING", .when(configuration: .debug))]
    ),
    .target(
        name: "VirtualRadio",
        dependencies: ["BLECore", "LinuxIO", .product(name: "SystemPackage", package: "swift-system"), log],
        swiftSettings: swiftSettings
    ),
    .target(
        name: "BlueZTransport",
        dependencies: ["BLECore", "LinuxIO", "CBlueZShim", .product(name: "SystemPackage", package: "swift-system"), log],
        swiftSettings: swiftSettings
    ),
    // Layer 5: DFU package (zip + manifest + init packet), pure.
    .target(
        name: "DFUPackage",
        dependencies: [
            "BLECore",
            .product(name: "ZIPFoundation", package: "ZIPFoundation"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "SwiftProtobuf", package: "swift-protobuf"),
        ],
        exclude: ["Proto"],  // dfu-cc*.proto; tools/generate-protobuf writes Generated/*.pb.swift from them
        swiftSettings: swiftSettings
    ),
    // Layer 5': the family seam (docs/architecture.md): the protocol every DFU family implements, its events,
    // errors, journal and locations. Pure, protocol-neutral.
    .target(name: "DFUCore", dependencies: ["BLECore", "GATT", log], swiftSettings: swiftSettings),
    // Layer 6: Secure DFU wire protocol (control point messages, result codes), pure.
    .target(name: "DFUProtocol", dependencies: ["BLECore"], swiftSettings: swiftSettings),
    // Layer 7: the Secure DFU engine (state machine, pacing, driver actor), pure.
    .target(
        name: "SecureDFU",
        dependencies: ["BLECore", "ATT", "GATT", "DFUCore", "DFUProtocol", "DFUPackage", log],
        swiftSettings: swiftSettings
    ),
    // Layer 7: the Legacy DFU family (nRF5 SDK <= 11, Adafruit, InfiniTime): wire codec, state machine, driver, pure.
    .target(
        name: "LegacyDFU",
        dependencies: ["BLECore", "ATT", "GATT", "DFUCore", "DFUPackage", log],
        swiftSettings: swiftSettings
    ),
    // Layer 7': virtual devices (bootloader model, app mode, link timing model, faults), pure.
    .target(
        name: "DFUSimulator",
        dependencies: [
            "BLECore", "ATT", "GATT", "DFUProtocol", "DFUPackage", "LegacyDFU", "CBOR", "MCUmgr", "MCUbootImage",
            .product(name: "Crypto", package: "swift-crypto"), log,
        ],
        swiftSettings: swiftSettings
    ),
    // Layer 6': CBOR (RFC 8949), the body encoding of MCUmgr SMP messages, pure.
    .target(name: "CBOR", dependencies: ["BLECore"], swiftSettings: swiftSettings),
    // Layer 6'': MCUboot images (header, TLVs, signatures) and the nRF Connect SDK dfu_application.zip, pure.
    .target(
        name: "MCUbootImage",
        dependencies: [
            "BLECore", "DFUPackage",
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "_CryptoExtras", package: "swift-crypto"),
        ],
        swiftSettings: swiftSettings
    ),
    // Layer 7'': MCUmgr SMP (framing, groups, the BLE transport, the upload engine and update flows), pure.
    .target(
        name: "MCUmgr",
        dependencies: [
            "BLECore", "ATT", "GATT", "CBOR", "DFUCore", "DFUPackage", "MCUbootImage",
            .product(name: "Crypto", package: "swift-crypto"),
            log,
        ],
        swiftSettings: swiftSettings
    ),
    // Layer 8: the production line (batch plans, the scheduler, the SQLite log, reports; each device's flash a
    // `bledfu flash` child with its events read back) and the one exit-code registry the CLI and the log share.
    .target(
        name: "Batch",
        dependencies: [
            "BLECore", "GATT", "DFUCore", "DFUPackage", "BledfuKit", "LinuxIO", "VirtualRadio",
            .product(name: "SystemPackage", package: "swift-system"),
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Yams", package: "Yams"),
            .product(name: "Crypto", package: "swift-crypto"),
        ],
        swiftSettings: swiftSettings
    ),
    // Layer 8': the line's shared store on PostgreSQL (PostgresNIO): the batch log's second dialect.
    .target(
        name: "LineStore",
        dependencies: [
            "BLECore", "Batch", .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"), log,
        ],
        swiftSettings: swiftSettings
    ),
    // Layer 8'': the read-only line dashboard (Hummingbird), kept apart so the server stack builds only here.
    .target(
        name: "LineDashboard",
        dependencies: [
            "Batch", .product(name: "Hummingbird", package: "hummingbird"), .product(name: "HTTPTypes", package: "swift-http-types"),
            .product(name: "NIOCore", package: "swift-nio"), log,
        ],
        swiftSettings: swiftSettings
    ),
    // Layer 8': the updater, as a library: one update of one device, any family (docs/library.md).
    .target(
        name: "BledfuKit",
        dependencies: [
            "BLECore", "GATT", "DFUCore", "DFUPackage", "SecureDFU", "LegacyDFU", "MCUmgr", "LinuxIO", .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "SystemPackage", package: "swift-system"), log,
        ],
        swiftSettings: swiftSettings
    ),
    // The simulator host (`bledfu simulate`): what it runs (profiles, instances, overrides, fault plans), hosted
    // virtual devices on a BLEPeripheral (virtual radio, BlueZ), their --describe figures and status files.
    .target(
        name: "SimulatorHost",
        dependencies: ["BLECore", "DFUPackage", "DFUSimulator", "LinuxIO", "VirtualRadio", "BlueZTransport", log],
        swiftSettings: swiftSettings
    ),
    // The bench (`bledfu bench`, docs/benchmarks.md): one loop that runs every family's engine against in-process
    // virtual devices over real socket pairs and measures it against the model's bound; and the batch bench, N
    // simulated devices flashed through Batch's scheduler against one. The CLI only parses and renders it.
    .target(
        name: "Bench",
        dependencies: [
            "BLECore", "ATT", "GATT", "DFUCore", "DFUPackage", "DFUSimulator", "SecureDFU", "LegacyDFU", "MCUmgr",
            "MCUbootImage", "VirtualRadio", "LinuxIO", "BledfuKit", "SimulatorHost", "Batch",
            .product(name: "SystemPackage", package: "swift-system"),
        ],
        swiftSettings: swiftSettings
    ),
    // Test support, upper half: in-process virtual device adapters, synthetic packages, the Legacy corpus. The
    // low-layer doubles it builds on are in TestDoubles.
    .target(
        name: "BledfuTestSupport",
        dependencies: ["BLECore", "DFUCore", "GATT", "DFUSimulator", "DFUPackage", "LegacyDFU", "VirtualRadio", "TestDoubles"],
        swiftSettings: swiftSettings
    ),
    // Layer 9: the CLI (one subcommand per file) and its thin executable.
    .target(
        name: "BledfuCLI",
        dependencies: [
            "BLECore", "ATT", "GATT", "LinuxIO", "VirtualRadio", "BlueZTransport", "DFUPackage",
            "DFUCore", "SecureDFU", "LegacyDFU", "DFUSimulator", "Batch", "BledfuKit", "SimulatorHost", "MCUbootImage",
            "MCUmgr", "LineStore", "LineDashboard", "Bench", "CBuildInfo",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "Yams", package: "Yams"),
        ],
        swiftSettings: swiftSettings
    ),
    .executableTarget(name: "bledfu", dependencies: ["BledfuCLI", log], swiftSettings: swiftSettings),
    // docs/library.md's example: a Swift program that flashes a virtual device with the public API only.
    .executableTarget(
        name: "FlashVirtualDevice", dependencies: ["BledfuKit", "VirtualRadio"], path: "Examples/FlashVirtualDevice",
        swiftSettings: swiftSettings),
    // The libFuzzer entry point the fuzz targets share (libFuzzer's driver, or a crash-file replayer).
    .target(name: "FuzzSupport", swiftSettings: swiftSettings),
    // libFuzzer target for DFUPackage (tools/fuzz-package builds it with -sanitize=fuzzer -DFUZZING).
    .executableTarget(name: "FuzzPackage", dependencies: ["DFUPackage", "FuzzSupport"], swiftSettings: swiftSettings),
    // More libFuzzer targets (tools/fuzz builds each with -sanitize=fuzzer,address -DFUZZING; docs/reliability.md).
    .executableTarget(name: "FuzzInitPacket", dependencies: ["DFUPackage", "FuzzSupport"], swiftSettings: swiftSettings),
    .executableTarget(name: "FuzzATT", dependencies: ["ATT", "FuzzSupport"], swiftSettings: swiftSettings),
    .executableTarget(name: "FuzzATTClient", dependencies: ["GATT", "ATT", "BLECore", "FuzzSupport"], swiftSettings: swiftSettings),
    .executableTarget(
        name: "FuzzSecureDFU",
        dependencies: ["SecureDFU", "DFUSimulator", "DFUProtocol", "DFUPackage", "BLECore", "FuzzSupport"],
        swiftSettings: swiftSettings
    ),
    .executableTarget(name: "FuzzCBOR", dependencies: ["CBOR", "MCUmgr", "FuzzSupport"], swiftSettings: swiftSettings),
    .executableTarget(name: "FuzzPlan", dependencies: ["Batch", "FuzzSupport"], swiftSettings: swiftSettings),
    .executableTarget(
        name: "FuzzLegacyDFU",
        dependencies: ["LegacyDFU", "DFUSimulator", "DFUPackage", "BLECore", "FuzzSupport"],
        swiftSettings: swiftSettings
    ),
    // The fault campaign (tools/fault-campaign): seeded random faults on virtual devices, an ordinary executable.
    .executableTarget(
        name: "FuzzFaultCampaign",
        dependencies: [
            "BledfuKit", "BledfuTestSupport", "DFUCore", "SecureDFU", "DFUSimulator", "DFUPackage", "GATT", "BLECore",
            "LinuxIO",
        ],
        swiftSettings: swiftSettings
    ),

    // Tests.
    .testTarget(name: "BLECoreTests", dependencies: ["BLECore"], swiftSettings: swiftSettings),
    .testTarget(name: "ATTTests", dependencies: ["ATT", "BLECore"], swiftSettings: swiftSettings),
    .testTarget(
        name: "GATTTests",
        dependencies: ["GATT", "ATT", "BLECore", "VirtualRadio", "TestDoubles"],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "TransportTests",
        dependencies: [
            "LinuxIO", "VirtualRadio", "BlueZTransport", "CBlueZShim", "CLinuxShim", "BLECore", "ATT", "GATT",
            "TestDoubles", .product(name: "SystemPackage", package: "swift-system"),
        ],
        swiftSettings: swiftSettings + [.define("ENABLE_MOCKING", .when(configuration: .debug))]
    ),
    .testTarget(name: "DFUCoreTests", dependencies: ["DFUCore", "BLECore", "TestDoubles"], swiftSettings: swiftSettings),
    .testTarget(
        name: "BledfuKitTests",
        dependencies: [
            "BledfuKit", "BledfuTestSupport", "DFUCore", "LegacyDFU", "DFUPackage", "DFUSimulator", "GATT", "BLECore",
            "MCUmgr", "MCUbootImage", "TestDoubles", "DFUProtocol", "SecureDFU", "ATT", "CBOR", "VirtualRadio", "LinuxIO",
            .product(name: "Crypto", package: "swift-crypto"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(name: "DFUProtocolTests", dependencies: ["DFUProtocol", "BLECore"], swiftSettings: swiftSettings),
    .testTarget(
        name: "DFUPackageTests",
        dependencies: [
            "DFUPackage", "BLECore", .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "SwiftProtobuf", package: "swift-protobuf"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SecureDFUTests",
        dependencies: [
            "SecureDFU", "DFUCore", "DFUProtocol", "DFUPackage", "GATT", "ATT", "BLECore", "DFUSimulator", "TestDoubles", log,
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "LegacyDFUTests",
        dependencies: [
            "LegacyDFU", "DFUCore", "DFUSimulator", "DFUPackage", "GATT", "ATT", "BLECore", "VirtualRadio", log,
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "DFUSimulatorTests",
        dependencies: ["DFUSimulator", "DFUProtocol", "DFUPackage", "GATT", "ATT", "BLECore", "TestDoubles"],
        swiftSettings: swiftSettings
    ),
    .testTarget(name: "CBORTests", dependencies: ["CBOR", "BLECore"], swiftSettings: swiftSettings),
    .testTarget(
        name: "MCUbootImageTests",
        dependencies: ["MCUbootImage", "DFUPackage", "BLECore", "LinuxIO"],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "MCUmgrTests",
        dependencies: [
            "MCUmgr", "CBOR", "MCUbootImage", "DFUSimulator", "GATT", "BLECore", "TestDoubles",
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "BatchTests",
        dependencies: [
            "Batch", "DFUProtocol", "BLECore", "VirtualRadio", "LinuxIO", "TestDoubles", .product(name: "GRDB", package: "GRDB.swift"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "LineStoreTests",
        dependencies: ["LineStore", "Batch"],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "LineDashboardTests",
        dependencies: ["LineDashboard", "Batch"],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "BenchTests",
        dependencies: ["Bench", "BLECore", "Batch", "DFUSimulator", "LegacyDFU", "MCUmgr", "LinuxIO", "SecureDFU", "SimulatorHost"],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SimulatorHostTests",
        dependencies: ["SimulatorHost", "DFUSimulator", "VirtualRadio", "BLECore"],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "CLITests",
        dependencies: [
            "BledfuCLI", "bledfu", "FlashVirtualDevice", "BledfuKit", "DFUCore", "BledfuTestSupport", "LinuxIO", "BLECore", "ATT", "GATT", "DFUProtocol", "SecureDFU", "DFUPackage", "DFUSimulator",
            "VirtualRadio", "Batch", "Bench", "LineStore", "MCUmgr", "MCUbootImage", "BlueZTransport", "TestDoubles", "SimulatorHost",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ],
        swiftSettings: swiftSettings
    ),
]

// Development aid (docs/development.md): BLEDFU_TARGETS=ATT,GATT keeps only those targets, what they depend on,
// and their test targets, so that work on one layer builds and tests without the others.
if let only = Context.environment["BLEDFU_TARGETS"], !only.isEmpty {
    let byName = Dictionary(uniqueKeysWithValues: targets.map { ($0.name, $0) })
    var keep = Set<String>()
    func visit(_ name: String) {
        guard keep.insert(name).inserted, let target = byName[name] else { return }
        for dependency in target.dependencies {
            if case .byNameItem(let dep, _) = dependency { visit(dep) }
            if case .targetItem(let dep, _) = dependency { visit(dep) }
        }
    }
    for name in only.split(separator: ",").map(String.init) {
        visit(name)
        visit(name + "Tests")
    }
    targets = targets.filter { keep.contains($0.name) }
}

// The executable, and the libraries a Swift program uses (docs/library.md): the updater, the package reader, the
// transports (BlueZ, the virtual radio).
var products: [Product] = []
if targets.contains(where: { $0.name == "bledfu" }) { products.append(.executable(name: "bledfu", targets: ["bledfu"])) }
for library in ["BledfuKit", "DFUCore", "DFUPackage", "BlueZTransport", "VirtualRadio"]
where targets.contains(where: { $0.name == library }) {
    products.append(.library(name: library, targets: [library]))
}

let package = Package(
    name: "bledfu",
    platforms: [.macOS(.v15)],
    products: products,
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.20"),
        .package(url: "https://github.com/jpsim/Yams", from: "5.0.1"),
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    ],
    targets: targets
)

// Micro-benchmarks (Benchmarks/, docs/benchmarks.md), only with BLEDFU_BENCHMARKS=1: package-benchmark and its
// dependencies add minutes to a cold build. Run: BLEDFU_BENCHMARKS=1 swift package --scratch-path .build-bench benchmark
if Context.environment["BLEDFU_BENCHMARKS"] == "1",
    ["BLECore", "ATT", "GATT", "LinuxIO", "SecureDFU"].allSatisfy({ name in package.targets.contains { $0.name == name } })
{
    package.dependencies.append(
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]))
    package.targets.append(
        .executableTarget(
            name: "CoreBenchmarks",
            dependencies: ["BLECore", "ATT", "SecureDFU", .product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/CoreBenchmarks",
            swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ))
    // The send path of a burst of Write Commands, before and after issue 18 (allocations per burst).
    package.targets.append(
        .executableTarget(
            name: "SendPathBenchmarks",
            dependencies: ["BLECore", "ATT", "GATT", "LinuxIO", .product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/SendPathBenchmarks",
            swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ))
}
