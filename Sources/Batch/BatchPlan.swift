import BLECore

/// A production-line plan (docs/batch.md): which devices, which package per device class, which adapters, and the
/// policies. Made by ``PlanParser`` from YAML; every value carries the line it came from so later checks (a missing
/// package, an unknown class) can still name the line.
public struct BatchPlan: Sendable, Equatable {
    /// One radio and how many links it may hold at once.
    public struct Adapter: Sendable, Equatable {
        /// As `--adapter` takes it: `hci0`, `any`, `virtual:DIR`.
        public var name: String
        /// Links at once: the plan's number, or (``auto``) the adapter's controller's own limit once resolved
        /// (``BatchPlan/resolvingAuto(limit:)``).
        public var connections: Int
        /// `connections: auto` (the default): as many links as the adapter's controller carries, fewer when it
        /// refuses one (the scheduler measures: docs/batch.md "Links per adapter").
        public var auto: Bool
        /// Unique within the plan (the name, or `name#2` for a second entry with the same name).
        public var label: String
        public var line: Int

        public init(name: String, connections: Int, auto: Bool = false, label: String? = nil, line: Int = 0) {
            self.name = name
            self.connections = connections
            self.auto = auto
            self.label = label ?? name
            self.line = line
        }
    }

    /// The number of links `connections: auto` starts with when the adapter's controller is not known (a real
    /// adapter: the kernel does not say how many links its controller carries): the generic controller's 5 (Home
    /// Assistant's default connection slots per local adapter, many-links.md §3); a refusal lowers it.
    public static let autoConnections = 5

    /// The plan with each `auto` adapter's connections set to `limit(adapter)` (its controller's links), or
    /// ``autoConnections`` when unknown. An explicit number above a known limit is refused (one line naming the
    /// adapter's line in the plan and the limit; `batch` exit 51): the plan promises links the controller cannot carry.
    public func resolvingAuto(limit: (Adapter) -> Int?) throws(PlanError) -> BatchPlan {
        var plan = self
        for index in plan.adapters.indices {
            let adapter = plan.adapters[index]
            let known = limit(adapter)
            if adapter.auto {
                plan.adapters[index].connections = max(1, known ?? Self.autoConnections)
            } else if let known, adapter.connections > known {
                throw PlanError(
                    .tooManyConnections, line: adapter.line,
                    "adapter \(adapter.label): connections \(adapter.connections) is more than its controller carries (\(known) "
                        + "links): give at most \(known), or connections: auto")
            }
        }
        return plan
    }

    /// A kind of device and the package it gets.
    public struct DeviceClass: Sendable, Equatable {
        public var name: String
        /// As written in the plan (relative paths are relative to the plan's directory).
        public var package: String
        public var line: Int

        public init(name: String, package: String, line: Int = 0) {
            self.name = name
            self.package = package
            self.line = line
        }
    }

    /// A device named by address.
    public struct ExplicitDevice: Sendable, Equatable {
        public var address: BluetoothAddress
        public var addressType: AddressType
        public var className: String
        public var line: Int

        public init(address: BluetoothAddress, addressType: AddressType = .random, className: String, line: Int = 0) {
            self.address = address
            self.addressType = addressType
            self.className = className
            self.line = line
        }
    }

    /// Scanning for devices: the rules, how long to scan, and how many devices to expect.
    public struct Discovery: Sendable, Equatable {
        public var rules: [DiscoveryRule] = []
        /// Seconds of scanning.
        public var duration: Double = 10
        /// Stop scanning once this many devices matched (nil: scan for the whole duration).
        public var expect: Int?

        public init(rules: [DiscoveryRule] = [], duration: Double = 10, expect: Int? = nil) {
            self.rules = rules
            self.duration = duration
            self.expect = expect
        }
    }

    /// What the line does around each device.
    public struct Policies: Sendable, Equatable {
        /// Attempts after the first one for a failed device.
        public var retries = 1
        /// Skip (record as done) a device whose application already runs the target version or newer.
        public var skipAtTargetVersion = true
        /// Start no new device once this many devices failed for good (nil: never stop).
        public var stopAfterFailures: Int?

        public init(retries: Int = 1, skipAtTargetVersion: Bool = true, stopAfterFailures: Int? = nil) {
            self.retries = retries
            self.skipAtTargetVersion = skipAtTargetVersion
            self.stopAfterFailures = stopAfterFailures
        }
    }

    /// Options handed to each device's flash (the same meaning as `bledfu flash`'s options).
    public struct FlashOptions: Sendable, Equatable {
        public var mode = "adaptive"
        /// PEM keys the packages must verify with.
        public var keys: [String] = []
        public var scanTimeout: Double = 10
        public var rebootDelay: Double = 0.5
        public var reconnectAttempts = 5
        /// Seconds allowed for connecting.
        public var timeout: Double = 10
        /// Give each unbonded device a bootloader name of its own (DfuXXXXXX), so devices stay apart after the jump.
        public var uniqueBootloaderNames = true
        /// Seconds a device's flash may go without a sign of life (an event) before the line kills it; nil: the
        /// default, ``defaultStallTimeout``.
        public var stallTimeout: Double?
        /// The DFU service's UUID of devices whose vendor moved it (`flash --service-uuid`); nil: the standard one.
        public var serviceUUID: String?

        public init() {}

        /// The longest quiet stretch of a working `bledfu flash` is a scan, a connect and one unanswered ATT request
        /// (30 s) in a row; three times the scan and connect timeouts plus a minute covers it, and never less than
        /// two minutes.
        public var defaultStallTimeout: Double { max(120, 3 * (scanTimeout + timeout) + 60) }

        /// ``stallTimeout`` or the default.
        public var effectiveStallTimeout: Double { stallTimeout ?? defaultStallTimeout }
    }

    public var adapters: [Adapter]
    public var classes: [DeviceClass]
    public var devices: [ExplicitDevice]
    public var discovery: Discovery
    public var policies: Policies
    public var flash: FlashOptions
    /// `db:`: the batch log (an SQLite path, or a `postgres://` URL that makes the station part of a line);
    /// `--db` wins over it.
    public var database: String?
    /// `line:`: the line's name in a shared database (`--line` wins over it).
    public var lineName: String?

    public init(
        adapters: [Adapter], classes: [DeviceClass], devices: [ExplicitDevice] = [], discovery: Discovery = Discovery(),
        policies: Policies = Policies(), flash: FlashOptions = FlashOptions()
    ) {
        self.adapters = adapters
        self.classes = classes
        self.devices = devices
        self.discovery = discovery
        self.policies = policies
        self.flash = flash
    }

    public func deviceClass(named name: String) -> DeviceClass? { classes.first { $0.name == name } }

    /// All links the line may hold at once.
    public var totalConnections: Int { adapters.reduce(0) { $0 + $1.connections } }
}

/// Why a plan was rejected: the line (1-based, when known) and the reason. Codes are an open set.
public struct PlanError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Not YAML at all (the YAML parser's own message).
        public static let syntax = Code(rawValue: "syntax")
        /// A key the plan format does not know.
        public static let unknownKey = Code(rawValue: "unknown-key")
        /// A required key is missing.
        public static let missingKey = Code(rawValue: "missing-key")
        /// A value of the wrong type or out of range.
        public static let badValue = Code(rawValue: "bad-value")
        /// A device or rule names a class the plan does not define.
        public static let unknownClass = Code(rawValue: "unknown-class")
        /// A package is missing or invalid.
        public static let badPackage = Code(rawValue: "bad-package")
        /// An adapter's `connections` is above what its controller carries (where bledfu knows the controller).
        public static let tooManyConnections = Code(rawValue: "too-many-connections")
        public var description: String { rawValue }
    }

    public var code: Code
    public var line: Int?
    public var reason: String

    public init(_ code: Code, line: Int?, _ reason: String) {
        self.code = code
        self.line = line
        self.reason = reason
    }

    public var message: String { line.map { "line \($0): \(reason)" } ?? reason }
    public var description: String { message }
}
