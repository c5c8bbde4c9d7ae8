/// A central's Bluetooth controller as far as several links on one adapter are concerned
/// (/work/shared/reference/many-links.md §1, §3): how many LE links it carries, what a Create Connection beyond that
/// gets, and how long it reserves for each link's connection events.
///
/// The presets hold the published figures; a figure that is not published is not invented: the generic controller
/// takes Home Assistant's default of 5 connection slots per local adapter and the status the Core specification
/// names for the case.
public struct ControllerProfile: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The HCI status a Create Connection gets when the controller is at its limit, and the errno the kernel turns it
    /// into (`bt_to_errno()`, net/bluetooth/lib.c, identical in Linux 6.1 and 6.12).
    public enum Refusal: String, Sendable, Hashable, Codable, CaseIterable {
        /// 0x09 Connection Limit Exceeded → EMLINK ("Too many links"): the status Core Vol 1 Part F names for it.
        case connectionLimitExceeded = "connection-limit-exceeded"
        /// 0x07 Memory Capacity Exceeded → ENOMEM: a Zephyr controller with no free connection context
        /// (ull_central.c:ll_create_connection).
        case memoryCapacityExceeded = "memory-capacity-exceeded"
        /// 0x0D Rejected due to Limited Resources → ECONNREFUSED: a Raspberry Pi 3B+ at its 10th link.
        case limitedResources = "limited-resources"

        /// The HCI status code.
        public var status: UInt8 {
            switch self {
            case .connectionLimitExceeded: 0x09
            case .memoryCapacityExceeded: 0x07
            case .limitedResources: 0x0D
            }
        }

        /// The errno name the central's socket sees.
        public var errnoName: String {
            switch self {
            case .connectionLimitExceeded: "EMLINK"
            case .memoryCapacityExceeded: "ENOMEM"
            case .limitedResources: "ECONNREFUSED"
            }
        }

        public var statusName: String {
            switch self {
            case .connectionLimitExceeded: "Connection Limit Exceeded"
            case .memoryCapacityExceeded: "Memory Capacity Exceeded"
            case .limitedResources: "Rejected due to Limited Resources"
            }
        }
    }

    public var name: String
    /// LE links the controller carries at once (at least 1).
    public var maximumLinks: Int
    /// What a Create Connection beyond ``maximumLinks`` gets.
    public var refusal: Refusal
    /// The time the controller gives each connection event of a link, µs, when it fixes one (Nordic S140: 3.75 ms);
    /// nil: it lets an event run as long as the link has packets, up to the interval (event length extension,
    /// Zephyr's and the nRF Connect SoftDevice Controller's default).
    public var eventLengthMicros: Double?
    /// Where the figures come from.
    public var source: String
    /// A connect to a device that does not advertise waits, as the kernel's passive scan does, until the connect
    /// timeout, and then fails as never seen (Linux: ECONNREFUSED after SO_SNDTIMEO, 40 s by default; many-links.md
    /// §2.3). False: it fails at once (the virtual radio's plain behaviour).
    public var waitsForUnseenDevices: Bool

    enum CodingKeys: String, CodingKey {
        case name
        case maximumLinks = "maximum_links"
        case refusal
        case eventLengthMicros = "event_length_us"
        case source
        case waitsForUnseenDevices = "waits_for_unseen_devices"
    }

    public init(
        name: String, maximumLinks: Int, refusal: Refusal, eventLengthMicros: Double? = nil, source: String,
        waitsForUnseenDevices: Bool = false
    ) {
        self.name = name
        self.maximumLinks = max(1, maximumLinks)
        self.refusal = refusal
        self.eventLengthMicros = eventLengthMicros
        self.source = source
        self.waitsForUnseenDevices = waitsForUnseenDevices
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            name: try container.decode(String.self, forKey: .name),
            maximumLinks: try container.decode(Int.self, forKey: .maximumLinks),
            refusal: try container.decode(Refusal.self, forKey: .refusal),
            eventLengthMicros: try container.decodeIfPresent(Double.self, forKey: .eventLengthMicros),
            source: try container.decodeIfPresent(String.self, forKey: .source) ?? "",
            waitsForUnseenDevices: try container.decodeIfPresent(Bool.self, forKey: .waitsForUnseenDevices) ?? false)
    }

    public var description: String {
        let event = eventLengthMicros.map { "events of \(Int($0)) µs" } ?? "events as long as the link's packets"
        return "\(name): \(maximumLinks) link\(maximumLinks == 1 ? "" : "s"), then HCI 0x"
            + String(refusal.status, radix: 16, uppercase: true).leftPadded(2) + " \(refusal.statusName) "
            + "(\(refusal.errnoName)); \(event)"
    }

    /// The controller of a virtual adapter unless told otherwise.
    public static let generic = ControllerProfile(
        name: "generic", maximumLinks: 5, refusal: .connectionLimitExceeded,
        source: "5: Home Assistant's default connection slots per local adapter (Bluetooth-Devices/bluetooth-adapters "
            + "const.py DEFAULT_CONNECTION_SLOTS); 0x09: Core Vol 1 Part F")

    public static let presets: [ControllerProfile] = [
        generic,
        ControllerProfile(
            name: "csr8510", maximumLinks: 5, refusal: .connectionLimitExceeded,
            source: "CSR8510 A10 dongles: about 5 links (home-assistant.io bluetooth.markdown; "
                + "bleak-retry-connector#67); refusal status not published"),
        ControllerProfile(
            name: "bcm20702", maximumLinks: 7, refusal: .connectionLimitExceeded,
            source: "Broadcom BCM20702 dongles: about 7 links (home-assistant.io bluetooth.markdown; "
                + "bleak-retry-connector#67); refusal status not published"),
        ControllerProfile(
            name: "rpi3b+", maximumLinks: 9, refusal: .limitedResources,
            source: "Raspberry Pi 3B+ (CYW43455): 8 within a minute, 9 rarely, the 10th refused with 0x0D "
                + "(dev.classmethod.jp, BlueZ 5.43)"),
        ControllerProfile(
            name: "s140", maximumLinks: 20, refusal: .connectionLimitExceeded, eventLengthMicros: 3750,
            source: "Nordic S140: 20 links combined (BLE_GAP_ROLE_COUNT_COMBINED_MAX), default event length "
                + "3 × 1.25 ms (BLE_GAP_EVENT_LENGTH_DEFAULT)"),
        ControllerProfile(
            name: "zephyr-hci-usb", maximumLinks: 1, refusal: .memoryCapacityExceeded,
            source: "Zephyr hci_usb sample with defaults: BT_MAX_CONN 1; Memory Capacity Exceeded from "
                + "ull_central.c:ll_create_connection"),
        ControllerProfile(
            name: "zephyr-hci-usb-16", maximumLinks: 16, refusal: .memoryCapacityExceeded,
            source: "Zephyr hci_usb with BT_MAX_CONN 16 (zephyrproject-rtos/zephyr#116670)"),
    ]

    /// A preset by name, or "NAME:links=N,event_us=X,refusal=R,unseen=wait" on top of one (`generic` when there are
    /// only options).
    public init(parsing text: String) throws(ControllerProfileError) {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        var base: ControllerProfile
        var options = parts.count > 1 ? parts[1] : ""
        if let preset = Self.presets.first(where: { $0.name == parts.first }) {
            base = preset
        } else if parts.count == 1, parts[0].contains("=") {
            base = .generic
            options = parts[0]
        } else {
            let names = Self.presets.map(\.name).joined(separator: ", ")
            throw ControllerProfileError("unknown controller '\(parts.first ?? "")' (known: \(names))")
        }
        for option in options.split(separator: ",") where !option.isEmpty {
            let pair = option.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2 else { throw ControllerProfileError("controller option '\(option)' is not key=value") }
            switch pair[0] {
            case "links":
                guard let links = Int(pair[1]), (1...64).contains(links) else {
                    throw ControllerProfileError("controller links must be 1-64, not '\(pair[1])'")
                }
                base.maximumLinks = links
            case "event_us":
                guard let micros = Double(pair[1]), micros >= 500, micros <= 4_000_000 else {
                    throw ControllerProfileError("controller event_us must be 500-4000000, not '\(pair[1])'")
                }
                base.eventLengthMicros = micros
            case "unseen":
                guard ["wait", "fail"].contains(pair[1]) else {
                    throw ControllerProfileError("controller unseen must be wait or fail, not '\(pair[1])'")
                }
                base.waitsForUnseenDevices = pair[1] == "wait"
            case "refusal":
                guard let refusal = Refusal(rawValue: pair[1]) else {
                    let known = Refusal.allCases.map(\.rawValue).joined(separator: ", ")
                    throw ControllerProfileError("controller refusal must be one of \(known)")
                }
                base.refusal = refusal
            default:
                throw ControllerProfileError("unknown controller option '\(pair[0])' (links, event_us, refusal, unseen)")
            }
        }
        if options.isEmpty == false { base.source += "; changed here: \(options)" }
        self = base
    }
}

/// A controller description that does not parse.
public struct ControllerProfileError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The text names no known controller, or a key or value the description does not take.
        public static let invalidProfile = Code(rawValue: "invalid-controller-profile")
    }

    public var code: Code { .invalidProfile }
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var message: String { reason }
    public var description: String { reason }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
