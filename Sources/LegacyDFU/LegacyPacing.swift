import BLECore

/// How a window of firmware packets ended.
public enum LegacyWindowOutcome: Hashable, Sendable {
    /// Its receipt came with the byte count of everything sent.
    case clean
    /// No receipt within the receipt timeout, but Report Received Image Size confirmed every byte (or, on a device
    /// without `07`, the receipt came later).
    case lateReceipt
}

/// Decides how firmware packets are paced and checked in Legacy DFU.
///
/// The device counts the packets it *accepts* and notifies `11 <bytes>` every ``receiptInterval`` of them (SDK 11
/// `app_data_process`); a packet it refuses (no receive buffer, full flash queue) is answered `10 03 06`, is not
/// written and not counted, and the image is shifted for good: Legacy DFU cannot resume inside an image, so a loss
/// costs the whole attempt (the engine resets the device and the image starts again from zero). A policy sends a
/// *window* of packets, waits for the receipt of its last packet (the round trip lets the flash catch up), checks the
/// count, and goes on; the receipts in between are checked as they come.
public protocol LegacyPacingPolicy: Sendable, CustomStringConvertible {
    /// The PRN value to request for an attempt (1…255; 0: no receipts). InfiniTime reads only its low byte.
    var receiptInterval: UInt16 { get }
    /// Packets in the next window, a multiple of ``receiptInterval``; nil: send the rest without waiting.
    mutating func nextWindow() -> Int?
    /// Feedback from each window.
    mutating func record(_ outcome: LegacyWindowOutcome)
    /// An attempt lost packets (or failed validation) with windows of `window` packets (nil: streaming): the next
    /// attempt must be slower.
    mutating func attemptLost(window: Int?)
    /// How long to wait for a receipt before asking with Report Received Image Size (nil: the response timeout).
    var receiptTimeout: Duration? { get }
    /// Packets sized from the ATT MTU (MTU − 3) whatever the device takes, as Android-DFU-Library does by default
    /// (it requests MTU 517; #526); false: what the device takes (``LegacyDFUFamily/packetSize(mtu:identity:pacing:)``).
    var sizesPacketsFromMTU: Bool { get }
}

extension LegacyPacingPolicy {
    public var receiptTimeout: Duration? { nil }
    public var sizesPacketsFromMTU: Bool { false }
    public mutating func record(_ outcome: LegacyWindowOutcome) {}
}

/// `prn:N`: a receipt every N packets, and the next N only after it (iOS: 12, nrfutil 0.5: 10).
public struct LegacyReceiptPacing: LegacyPacingPolicy {
    public private(set) var interval: UInt16
    public var label: String?

    public init(interval: UInt16, label: String? = nil) {
        self.interval = min(max(1, interval), LegacyAdaptivePacing.maximumReceiptInterval)
        self.label = label
    }

    public var receiptInterval: UInt16 { interval }
    public mutating func nextWindow() -> Int? { Int(interval) }
    public mutating func attemptLost(window: Int?) { interval = max(1, interval / 2) }
    public var description: String { label ?? "prn:\(interval)" }
}

/// `stream`: no receipts; every packet back to back, flow control only, then the device's answer to the last one
/// (Android-DFU-Library on Android ≥ 6, where PRNs are off by default). After a loss: receipts every 10 packets.
public struct LegacyStreamPacing: LegacyPacingPolicy {
    public private(set) var slowed: LegacyReceiptPacing?
    public var label: String?
    public let sizesPacketsFromMTU: Bool

    public init(label: String? = nil, sizesPacketsFromMTU: Bool = false) {
        self.label = label
        self.sizesPacketsFromMTU = sizesPacketsFromMTU
    }

    public var receiptInterval: UInt16 { slowed?.receiptInterval ?? 0 }
    public mutating func nextWindow() -> Int? {
        guard var slowed else { return nil }
        defer { self.slowed = slowed }
        return slowed.nextWindow()
    }
    public mutating func attemptLost(window: Int?) {
        if slowed == nil { slowed = LegacyReceiptPacing(interval: 10) } else { slowed?.attemptLost(window: window) }
    }
    public var description: String { label ?? "stream" }
}

/// `adaptive`, the default: learns the longest window of packets the device takes without losses.
///
/// The device sends a receipt every ``Tuning/receiptInterval`` packets. The window starts at
/// ``Tuning/initialWindow`` and doubles after every clean receipt, up to a ceiling (``ceiling``; at first
/// ``Tuning/maximumWindow``); a receipt that came only after asking (``LegacyWindowOutcome/lateReceipt``) halves it.
/// Beyond the ceiling nothing grows. A lost attempt sets the ceiling to half the window that lost packets (a device
/// whose flash is slower than the link overflows its receive buffers after so many packets back to back, however
/// long it rested before); at the smallest window the receipt interval halves too. Each attempt starts at the
/// initial window again and climbs back to the ceiling in a few receipts; the ceiling is what carries over to the
/// next attempt (keep the policy value) and the next connection.
public struct LegacyAdaptivePacing: LegacyPacingPolicy {
    /// InfiniTime reads the PRN request's low byte only (`nbPacketsToNotify = om_data[1]`).
    public static let maximumReceiptInterval: UInt16 = 255

    public struct Tuning: Hashable, Sendable {
        public var receiptInterval: UInt16
        public var initialWindow: Int
        public var maximumWindow: Int
        public var receiptTimeout: Duration

        public init(
            receiptInterval: UInt16 = 8, initialWindow: Int = 8, maximumWindow: Int = 1024,
            receiptTimeout: Duration = .seconds(2)
        ) {
            self.receiptInterval = min(max(1, receiptInterval), LegacyAdaptivePacing.maximumReceiptInterval)
            self.initialWindow = max(1, initialWindow)
            self.maximumWindow = max(self.initialWindow, maximumWindow)
            self.receiptTimeout = receiptTimeout
        }
    }

    public let tuning: Tuning
    public private(set) var interval: UInt16
    /// The largest window allowed (lowered by a lost attempt).
    public private(set) var ceiling: Int
    /// The window of the next burst.
    public private(set) var window: Int
    /// Attempts that lost packets so far.
    public private(set) var lostAttempts = 0

    public init(tuning: Tuning = Tuning()) {
        self.tuning = tuning
        interval = tuning.receiptInterval
        ceiling = Self.align(tuning.maximumWindow, to: Int(tuning.receiptInterval))
        window = Self.align(tuning.initialWindow, to: Int(tuning.receiptInterval))
    }

    /// A multiple of `interval`, at least one interval.
    static func align(_ packets: Int, to interval: Int) -> Int { max(interval, packets / interval * interval) }

    public var receiptInterval: UInt16 { interval }
    public var receiptTimeout: Duration? { tuning.receiptTimeout }

    public mutating func nextWindow() -> Int? { min(window, ceiling) }

    public mutating func record(_ outcome: LegacyWindowOutcome) {
        switch outcome {
        case .clean: window = min(window * 2, ceiling)
        case .lateReceipt: window = Self.align(window / 2, to: Int(interval))
        }
    }

    public mutating func attemptLost(window lost: Int?) {
        lostAttempts += 1
        let failed = lost ?? ceiling
        if failed <= Int(interval) {
            interval = max(1, interval / 2)
        }
        ceiling = Self.align(failed / 2, to: Int(interval))
        window = Self.align(min(tuning.initialWindow, ceiling), to: Int(interval))
    }

    public var description: String { "adaptive" }
}

/// Parses a Legacy pacing policy from the command line.
public enum LegacyPacingPolicies {
    public struct ParseError: CodedError, Sendable {
        public struct Code: RawRepresentable, Hashable, Sendable {
            public var rawValue: String
            public init(rawValue: String) { self.rawValue = rawValue }
            /// The text names no pacing policy (or a parameter out of range).
            public static let unknownPacing = Code(rawValue: "unknown-pacing")
        }

        public var code: Code { .unknownPacing }
        public var text: String
        public var message: String { description }
        public var description: String {
            "unknown Legacy pacing '\(text)' (expected adaptive, prn:N with N in 1...255, stream, ios, android or nrfutil)"
        }
    }

    public static let names = ["adaptive", "prn:N", "stream", "ios", "android", "nrfutil"]

    public static func parse(_ text: String) throws(ParseError) -> any LegacyPacingPolicy {
        let fields = text.lowercased().split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        switch (fields.first ?? "", fields.count) {
        case ("adaptive", 1): return LegacyAdaptivePacing()
        case ("stream", 1): return LegacyStreamPacing()
        // IOS-DFU-Library: PRN 12 by default (`packetReceiptNotificationParameter`), 20-byte packets.
        case ("ios", 1): return LegacyReceiptPacing(interval: 12, label: "ios")
        // Android-DFU-Library's defaults on Android >= 6: PRNs off (flow control only), MTU 517 requested and packets
        // of MTU − 3 even for Legacy DFU (LegacyDfuImpl; #526: they fail on a 20-byte Packet characteristic, and
        // InfiniTime asserts 20, #1933; a newer Adafruit bootloader takes MTU − 3).
        case ("android", 1): return LegacyStreamPacing(label: "android", sizesPacketsFromMTU: true)
        // nrfutil 0.5.3: `08 0a 00` (PRN 10) and a wait for the receipt after every 10th packet.
        case ("nrfutil", 1): return LegacyReceiptPacing(interval: 10, label: "nrfutil")
        case ("prn", 2):
            if let n = UInt16(fields[1]), n > 0, n <= LegacyAdaptivePacing.maximumReceiptInterval {
                return LegacyReceiptPacing(interval: n)
            }
        default: break
        }
        throw ParseError(text: text)
    }
}
