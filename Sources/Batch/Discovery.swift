import BLECore

/// A discovery rule: which advertisements belong to a device class.
public struct DiscoveryRule: Sendable, Equatable {
    public var className: String
    public var namePrefix: String?
    public var serviceUUID: BluetoothUUID?
    public var minimumRSSI: Int8?
    /// Only devices in application mode that offer the buttonless characteristic: the advertisement must carry one
    /// of ``dfuServices`` and must not look like a bootloader; the flash checks the characteristic on connect.
    public var buttonlessInAppMode: Bool
    /// The services that name a DFU device: the updater's families' (`DefaultFamilies.services()`, set by the
    /// CLI when it loads the plan). The line itself knows no DFU family.
    public var dfuServices: Set<BluetoothUUID>
    public var line: Int

    public init(
        className: String, namePrefix: String? = nil, serviceUUID: BluetoothUUID? = nil, minimumRSSI: Int8? = nil,
        buttonlessInAppMode: Bool = false, dfuServices: Set<BluetoothUUID> = [], line: Int = 0
    ) {
        self.className = className
        self.namePrefix = namePrefix
        self.serviceUUID = serviceUUID
        self.minimumRSSI = minimumRSSI
        self.buttonlessInAppMode = buttonlessInAppMode
        self.dfuServices = dfuServices
        self.line = line
    }

    /// The names DFU bootloaders advertise: the SDK default and the unique names the line hands out.
    public static func looksLikeBootloader(name: String?) -> Bool {
        guard let name else { return false }
        return name == "DfuTarg" || BootloaderNames.isGenerated(name)
    }

    public func matches(_ advertisement: Advertisement) -> Bool {
        guard advertisement.connectable else { return false }
        let filter = ScanFilter(namePrefix: namePrefix, serviceUUID: serviceUUID, minimumRSSI: minimumRSSI)
        guard filter.matches(advertisement) else { return false }
        if buttonlessInAppMode {
            let parsed = advertisement.parsed
            guard parsed.serviceUUIDs.contains(where: dfuServices.contains) else { return false }
            if Self.looksLikeBootloader(name: parsed.name) { return false }
        }
        return true
    }
}

/// A device the line will update.
public struct BatchTarget: Sendable, Hashable {
    public var peer: PeerAddress
    /// The advertised name, when it was seen.
    public var name: String?
    public var className: String
    public var rssi: Int8?

    public init(peer: PeerAddress, name: String? = nil, className: String, rssi: Int8? = nil) {
        self.peer = peer
        self.name = name
        self.className = className
        self.rssi = rssi
    }

    public var address: BluetoothAddress { peer.address }
}

/// Applies the rules to advertisements: first matching rule wins; a device is kept once (by address), and a
/// bootloader at address + 1 of a device already kept is the same device.
public struct DiscoveryMatcher: Sendable {
    public var rules: [DiscoveryRule]
    public private(set) var found: [BluetoothAddress: BatchTarget] = [:]
    public private(set) var order: [BluetoothAddress] = []

    public init(rules: [DiscoveryRule]) { self.rules = rules }

    /// Returns the new target when the advertisement adds a device.
    @discardableResult
    public mutating func offer(_ advertisement: Advertisement) -> BatchTarget? {
        let address = advertisement.peer.address
        guard found[address] == nil else { return nil }
        guard let rule = rules.first(where: { $0.matches(advertisement) }) else { return nil }
        if found.values.contains(where: { $0.address.nordicBootloaderAddress == address }) { return nil }
        let target = BatchTarget(
            peer: advertisement.peer, name: advertisement.parsed.name, className: rule.className, rssi: advertisement.rssi)
        found[address] = target
        order.append(address)
        return target
    }

    public var targets: [BatchTarget] { order.compactMap { found[$0] } }
}

/// Scans the plan's adapters with its rules.
public enum DeviceDiscovery {
    /// Scans every adapter at once for `discovery.duration` seconds, or until `expect` devices are known: matched
    /// now or in `known` (the batch's devices from an earlier run, which may wait in their bootloader under another
    /// name and so match no rule).
    public static func discover(_ discovery: BatchPlan.Discovery, adapters: [any BLEAdapter], known: Set<BluetoothAddress> = [])
        async throws -> [BatchTarget]
    {
        guard !discovery.rules.isEmpty, !adapters.isEmpty else { return [] }
        func enough(_ matcher: DiscoveryMatcher) -> Bool {
            guard let expect = discovery.expect else { return false }
            return known.union(matcher.targets.map(\.address)).count >= expect
        }
        if enough(DiscoveryMatcher(rules: discovery.rules)) { return [] }
        let duration = Duration.milliseconds(Int64(discovery.duration * 1000))
        let (stream, continuation) = AsyncStream<Advertisement>.makeStream()
        let scanners = Task {
            defer { continuation.finish() }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for adapter in adapters {
                    group.addTask {
                        for try await advertisement in adapter.scan(filter: ScanFilter(), duration: duration) {
                            continuation.yield(advertisement)
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        var matcher = DiscoveryMatcher(rules: discovery.rules)
        for await advertisement in stream {
            matcher.offer(advertisement)
            if enough(matcher) { break }
        }
        if enough(matcher) {
            scanners.cancel()
        } else {
            try await scanners.value
        }
        return matcher.targets
    }
}

/// Bootloader names that keep devices apart after the buttonless jump.
public enum BootloaderNames {
    static let prefix = "Dfu"

    /// "Dfu" and the address's last three bytes in hex: C6:05:04:03:02:01 → Dfu030201 (as `bledfu flash
    /// --unique-name`).
    public static func name(for address: BluetoothAddress) -> String {
        prefix + address.bytes.suffix(3).map { hex($0) }.joined()
    }

    /// Names for every address, unique among them: a clash gets the fourth byte too, then a counter.
    public static func unique(for addresses: [BluetoothAddress]) -> [BluetoothAddress: String] {
        var result: [BluetoothAddress: String] = [:]
        var used = Set<String>()
        for address in addresses {
            var candidate = name(for: address)
            if used.contains(candidate) { candidate = prefix + address.bytes.suffix(4).map { hex($0) }.joined() }
            var counter = 2
            let base = candidate
            while used.contains(candidate) {
                candidate = "\(base)-\(counter)"
                counter += 1
            }
            used.insert(candidate)
            result[address] = candidate
        }
        return result
    }

    static func isGenerated(_ name: String) -> Bool {
        guard name.hasPrefix(prefix) else { return false }
        let rest = name.dropFirst(prefix.count)
        return rest.count >= 6 && rest.prefix(6).allSatisfy(\.isHexDigit)
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }
}
