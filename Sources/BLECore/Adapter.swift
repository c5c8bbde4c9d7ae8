/// One advertising report, folded per device.
public struct Advertisement: Sendable, Hashable, Codable {
    public var peer: PeerAddress
    public var rssi: Int8?
    /// The raw advertising data (and scan response, appended) as AD structures.
    public var data: [UInt8]
    public var connectable: Bool
    /// Directed advertising (ADV_DIRECT_IND): the one central it is addressed to, which alone sees it and may
    /// connect; nil: undirected. On the virtual radio a central is named by its adapter (docs/virtual-radio.md §2).
    public var directedTo: String?

    public init(peer: PeerAddress, rssi: Int8?, data: [UInt8], connectable: Bool = true, directedTo: String? = nil) {
        self.peer = peer
        self.rssi = rssi
        self.data = data
        self.connectable = connectable
        self.directedTo = directedTo
    }

    /// The parsed AD structures; malformed trailing bytes are ignored (Core Supplement Part A 1.x).
    public var parsed: AdvertisingData { AdvertisingData(parsing: data) }
}

/// Advertising data parsed into the fields a scanner filters on (Core Supplement Part A).
public struct AdvertisingData: Sendable, Hashable, Codable {
    public var flags: UInt8?
    public var completeName: String?
    public var shortName: String?
    public var serviceUUIDs: [BluetoothUUID] = []
    /// Company identifier and payload.
    public var manufacturerData: [ManufacturerData] = []
    public var txPower: Int8?
    /// AD structures whose type this parser does not interpret: (type, payload).
    public var other: [OtherField] = []
    /// True when the bytes ended inside an AD structure (the rest was ignored).
    public var truncated = false

    public struct ManufacturerData: Sendable, Hashable, Codable {
        public var companyID: UInt16
        public var payload: [UInt8]
    }

    public struct OtherField: Sendable, Hashable, Codable {
        public var type: UInt8
        public var payload: [UInt8]
    }

    public var name: String? { completeName ?? shortName }

    public init() {}

    public init(parsing bytes: [UInt8]) {
        var i = 0
        while i < bytes.count {
            let length = Int(bytes[i])
            if length == 0 { break }  // early termination (significant part ended)
            guard i + 1 + length <= bytes.count else {
                truncated = true
                break
            }
            let type = bytes[i + 1]
            let payload = Array(bytes[(i + 2)..<(i + 1 + length)])
            apply(type: type, payload: payload)
            i += 1 + length
        }
    }

    private mutating func apply(type: UInt8, payload: [UInt8]) {
        switch type {
        case 0x01: flags = payload.first
        case 0x02, 0x03: appendUUIDs(payload, width: 2)
        case 0x04, 0x05: appendUUIDs(payload, width: 4)
        case 0x06, 0x07: appendUUIDs(payload, width: 16)
        case 0x08: shortName = String(decoding: payload, as: UTF8.self)
        case 0x09: completeName = String(decoding: payload, as: UTF8.self)
        case 0x0A: txPower = payload.first.map { Int8(bitPattern: $0) }
        case 0xFF where payload.count >= 2:
            manufacturerData.append(
                ManufacturerData(
                    companyID: UInt16(payload[0]) | UInt16(payload[1]) << 8, payload: Array(payload[2...])))
        default: other.append(OtherField(type: type, payload: payload))
        }
    }

    private mutating func appendUUIDs(_ payload: [UInt8], width: Int) {
        var i = 0
        while i + width <= payload.count {
            if let uuid = BluetoothUUID(littleEndianBytes: Array(payload[i..<i + width])) { serviceUUIDs.append(uuid) }
            i += width
        }
    }

    /// Encodes flags, name and 16-bit/128-bit service UUIDs as AD structures (used by virtual devices).
    public static func build(flags: UInt8? = 0x06, name: String?, services: [BluetoothUUID] = [], manufacturer: ManufacturerData? = nil) -> [UInt8] {
        var out: [UInt8] = []
        if let flags { out += [2, 0x01, flags] }
        let short = services.compactMap(\.uuid16)
        if !short.isEmpty {
            out.append(UInt8(1 + 2 * short.count))
            out.append(0x03)
            for s in short { out += [UInt8(s & 0xFF), UInt8(s >> 8)] }
        }
        for long in services where long.uuid16 == nil { out += [17, 0x07] + long.littleEndian128 }
        if let manufacturer {
            out += [UInt8(3 + manufacturer.payload.count), 0xFF, UInt8(manufacturer.companyID & 0xFF), UInt8(manufacturer.companyID >> 8)]
            out += manufacturer.payload
        }
        if let name {
            let utf8 = Array(name.utf8.prefix(29))
            out += [UInt8(1 + utf8.count), 0x09] + utf8
        }
        return out
    }
}

/// What a scan keeps.
public struct ScanFilter: Sendable, Hashable {
    public var namePrefix: String?
    public var serviceUUID: BluetoothUUID?
    public var minimumRSSI: Int8?
    public var address: BluetoothAddress?

    public init(namePrefix: String? = nil, serviceUUID: BluetoothUUID? = nil, minimumRSSI: Int8? = nil, address: BluetoothAddress? = nil) {
        self.namePrefix = namePrefix
        self.serviceUUID = serviceUUID
        self.minimumRSSI = minimumRSSI
        self.address = address
    }

    public func matches(_ advertisement: Advertisement) -> Bool {
        if let address, advertisement.peer.address != address { return false }
        let ad = advertisement.parsed
        if let namePrefix {
            guard let name = ad.name, name.hasPrefix(namePrefix) else { return false }
        }
        if let serviceUUID, !ad.serviceUUIDs.contains(serviceUUID) { return false }
        if let minimumRSSI {
            guard let rssi = advertisement.rssi, rssi >= minimumRSSI else { return false }
        }
        return true
    }
}

/// Options for opening a connection.
public struct ConnectOptions: Sendable, Hashable {
    /// How long connection establishment may take.
    public var timeout: Duration
    /// BT_SECURITY level (1 low … 4 FIPS); nil leaves the kernel default.
    public var securityLevel: UInt8?
    /// Upper bound on bytes queued in the kernel's send buffer, so queued write commands cannot hide seconds of
    /// data (docs/architecture.md, "Back-pressure").
    public var sendBufferBytes: Int?

    public init(timeout: Duration = .seconds(10), securityLevel: UInt8? = nil, sendBufferBytes: Int? = 8192) {
        self.timeout = timeout
        self.securityLevel = securityLevel
        self.sendBufferBytes = sendBufferBytes
    }
}

/// Why an adapter operation failed. Each code maps to a documented CLI exit code.
public struct AdapterError: CodedError, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The kernel has no Bluetooth (socket() gives EAFNOSUPPORT).
        public static let noBluetoothInKernel = Code(name: "noBluetoothInKernel")
        public static let noAdapter = Code(name: "noAdapter")
        public static let adapterDown = Code(name: "adapterDown")
        public static let permissionDenied = Code(name: "permissionDenied")
        public static let badAddress = Code(name: "badAddress")
        public static let connectionTimeout = Code(name: "connectionTimeout")
        public static let connectionRefused = Code(name: "connectionRefused")
        /// Something else already owns the ATT channel of that link (EBUSY on a link that exists).
        public static let busy = Code(name: "busy")
        /// The adapter's controller has no free link: it is at its connection limit (HCI 0x09 Connection Limit
        /// Exceeded → EMLINK, 0x07 Memory Capacity Exceeded → ENOMEM, 0x0D Limited Resources → ECONNREFUSED while
        /// the adapter holds other links). Try again once one of its links has ended.
        public static let noFreeLink = Code(name: "noFreeLink")
        /// The adapter cannot create a connection right now: the controller answered Command Disallowed (0x0C,
        /// EBUSY after the wait), a link-layer error (EPROTO) or Hardware Failure (0x03, EIO) to a Create Connection
        /// while it scans or creates another one, or the adapter advertises and another creation is pending (EBUSY at
        /// once). Try again.
        public static let adapterBusy = Code(name: "adapterBusy")
        public static let disconnected = Code(name: "disconnected")
        public static let deviceNotFound = Code(name: "deviceNotFound")
        public static let system = Code(name: "system")
        public var description: String { name }
    }

    public var code: Code
    public var reason: String
    public var errno: Int32?

    public init(_ code: Code, _ reason: String, errno: Int32? = nil) {
        self.code = code
        self.reason = reason
        self.errno = errno
    }

    public var description: String { reason }
}

/// Scanning and connecting: the BlueZ adapter (`hci0`) and the virtual radio (`virtual:DIR`).
public protocol BLEAdapter: Sendable {
    /// A short name for messages ("hci0", "virtual:/tmp/radio").
    var name: String { get }
    /// Advertisements matching the filter, duplicates folded (a device is reported again only when its data or
    /// RSSI bucket changes). Ends after `duration`, or throws on failure.
    func scan(filter: ScanFilter, duration: Duration) -> AsyncThrowingStream<Advertisement, any Error>
    /// Opens an ATT bearer to the peer.
    func connect(to peer: PeerAddress, options: ConnectOptions) async throws(AdapterError) -> any ATTBearer
}

extension AdapterError.Code: RawRepresentable {
    public init(rawValue: String) { self.init(name: rawValue) }
    public var rawValue: String { name }
}

extension AdapterError {
    /// ``CodedError``'s one line: the reason.
    public var message: String { reason }
}
