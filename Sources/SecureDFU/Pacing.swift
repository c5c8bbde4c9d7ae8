import BLECore

/// How a burst of data packets ends.
public enum PacingCheckpoint: Hashable, Sendable {
    /// No check: the next burst follows (after the pause, if any).
    case none
    /// Wait for the Packet Receipt Notification the device sends every PRN packets.
    case packetReceipt
    /// Send Calculate Checksum and wait for its answer.
    case checksum
}

/// One burst: up to `packets` Write Commands, then a checkpoint, then an optional pause.
public struct PacingBurst: Hashable, Sendable {
    public var packets: Int
    public var checkpoint: PacingCheckpoint
    public var pause: Duration?

    public init(packets: Int, checkpoint: PacingCheckpoint, pause: Duration? = nil) {
        self.packets = max(1, packets)
        self.checkpoint = checkpoint
        self.pause = pause
    }
}

/// What a checkpoint found.
public enum CheckpointOutcome: Hashable, Sendable {
    /// Offset and CRC as expected.
    case clean
    /// Fewer bytes than sent, with a true prefix: the engine continues inside the object.
    case shortfall
    /// The CRC does not match: the engine recreates the object.
    case mismatch
    /// No answer within the checkpoint timeout.
    case timeout
}

/// Decides how data packets are paced and checked. The engine always ends an object with a checkpoint
/// (Calculate Checksum, or the PRN that falls on the last packet) before Execute, whatever the policy says.
public protocol PacingPolicy: Sendable, CustomStringConvertible {
    /// The PRN value to configure for the data phase (0 = off). May change after ``slowDown()``.
    var packetReceiptInterval: UInt16 { get }
    /// A pause after Create Data before streaming object `objectIndex` (flash erase on SDK 15-17 bootloaders).
    func delayAfterCreate(objectIndex: Int) -> Duration?
    /// The next burst, given how many packets of the current object remain.
    mutating func nextBurst(packetsLeftInObject: Int) -> PacingBurst
    /// Feedback from each checkpoint.
    mutating func record(_ outcome: CheckpointOutcome)
    /// Called once after too many failed checkpoints in a row: smaller bursts, more checkpoints.
    mutating func slowDown()
    /// Where the losses the next ``record(_:)`` reports began: the index of the first lost packet since the object's
    /// Create Data (the engine finds it from the device's offset and CRC, ``PrefixCRC/firstLostPacket(of:offset:crc:)``).
    mutating func lossLocated(atPacket index: Int)
    /// How long to wait for a receipt before asking with Calculate Checksum, when shorter than the configuration's
    /// `checkpointTimeout` (nil: that timeout). A receipt a device never sends then costs this, not the timeout.
    var receiptTimeout: Duration? { get }
}

extension PacingPolicy {
    public func delayAfterCreate(objectIndex: Int) -> Duration? { nil }
    public mutating func lossLocated(atPacket index: Int) {}
    public var receiptTimeout: Duration? { nil }
    public mutating func record(_ outcome: CheckpointOutcome) {}
}

/// `prn:N`: the device sends a receipt every N packets; the engine checks offset and CRC of each.
public struct ReceiptPacing: PacingPolicy {
    public private(set) var interval: UInt16
    public var firstObjectDelay: Duration?
    public var label: String?

    public init(interval: UInt16, firstObjectDelay: Duration? = nil, label: String? = nil) {
        self.interval = max(1, interval)
        self.firstObjectDelay = firstObjectDelay
        self.label = label
    }

    public var packetReceiptInterval: UInt16 { interval }
    public func delayAfterCreate(objectIndex: Int) -> Duration? { objectIndex == 0 ? firstObjectDelay : nil }
    public mutating func nextBurst(packetsLeftInObject: Int) -> PacingBurst {
        PacingBurst(packets: Int(interval), checkpoint: .packetReceipt)
    }
    public mutating func slowDown() { interval = max(1, interval / 2) }
    public var description: String { label ?? "prn:\(interval)" }
}

/// `checksum:N`: Calculate Checksum after every N packets (`with-response`: after every packet).
public struct ChecksumPacing: PacingPolicy {
    public private(set) var interval: Int
    public var label: String?

    public init(interval: Int, label: String? = nil) {
        self.interval = max(1, interval)
        self.label = label
    }

    public var packetReceiptInterval: UInt16 { 0 }
    public mutating func nextBurst(packetsLeftInObject: Int) -> PacingBurst {
        PacingBurst(packets: interval, checkpoint: .checksum)
    }
    public mutating func slowDown() { interval = max(1, interval / 2) }
    public var description: String { label ?? "checksum:\(interval)" }
}

/// `object`: the whole object in one flow-controlled burst, one checksum at its end (`nrfutil`, `android`).
public struct ObjectPacing: PacingPolicy {
    /// Set by ``slowDown()``: from then on a checksum every so many packets (4, halved by each further call).
    public private(set) var slowInterval: Int?
    public var label: String?

    public init(label: String? = nil) { self.label = label }

    public var packetReceiptInterval: UInt16 { 0 }
    public mutating func nextBurst(packetsLeftInObject: Int) -> PacingBurst {
        if let slowInterval { return PacingBurst(packets: slowInterval, checkpoint: .checksum) }
        return PacingBurst(packets: packetsLeftInObject, checkpoint: .none)
    }
    public mutating func slowDown() { slowInterval = slowInterval.map { max(1, $0 / 2) } ?? 4 }
    public var description: String { label ?? "object" }
}

/// `burst:N:Tms`: N packets, then a fixed pause, no checkpoint in between (`seed-pacing` = 12 packets, 100 ms).
public struct BurstPacing: PacingPolicy {
    public private(set) var packets: Int
    public private(set) var pause: Duration
    public var label: String?

    public init(packets: Int, pause: Duration, label: String? = nil) {
        self.packets = max(1, packets)
        self.pause = pause
        self.label = label
    }

    public var packetReceiptInterval: UInt16 { 0 }
    public mutating func nextBurst(packetsLeftInObject: Int) -> PacingBurst {
        PacingBurst(packets: packets, checkpoint: .none, pause: pause)
    }
    public mutating func slowDown() {
        packets = max(1, packets / 2)
        pause = pause * 2
    }
    public var description: String {
        let milliseconds = pause.components.seconds * 1000 + pause.components.attoseconds / 1_000_000_000_000_000
        return label ?? "burst:\(packets):\(milliseconds)ms"
    }
}

/// The first adaptive policy: checksum checkpoints whose interval doubles while they come back clean (up to
/// ``maximum``) and halves on a shortfall, a mismatch or a timeout. ``slowDown()`` lowers the ceiling. The CLI's
/// `adaptive` is now ``AdaptiveStreamPacing``, which also streams whole objects and learns a prepare delay.
public struct AdaptivePacing: PacingPolicy {
    public private(set) var interval: Int
    public private(set) var maximum: Int

    public init(initial: Int = 8, maximum: Int = 64) {
        self.maximum = max(1, maximum)
        self.interval = min(max(1, initial), self.maximum)
    }

    public var packetReceiptInterval: UInt16 { 0 }
    public mutating func nextBurst(packetsLeftInObject: Int) -> PacingBurst {
        PacingBurst(packets: interval, checkpoint: .checksum)
    }
    public mutating func record(_ outcome: CheckpointOutcome) {
        switch outcome {
        case .clean: interval = min(maximum, interval * 2)
        case .shortfall, .mismatch, .timeout: interval = max(1, interval / 2)
        }
    }
    public mutating func slowDown() {
        maximum = max(1, maximum / 8)
        interval = 1
    }
    public var description: String { "adaptive" }
}

/// Parses a pacing policy from the command line.
public enum PacingPolicies {
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
            "unknown pacing '\(text)' (expected prn:N, checksum:N, object, burst:N:Tms, adaptive, ios, android, "
                + "nrfutil, seed-pacing or with-response)"
        }
    }

    public static let names = [
        "prn:N", "checksum:N", "object", "burst:N:Tms", "adaptive", "ios", "android", "nrfutil", "seed-pacing",
        "with-response",
    ]

    public static func parse(_ text: String) throws(ParseError) -> any PacingPolicy {
        let fields = text.lowercased().split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        switch (fields.first ?? "", fields.count) {
        case ("adaptive", 1): return AdaptiveStreamPacing()
        case ("object", 1): return ObjectPacing()
        // iOS: PRN 12, 0.4 s after creating the first data object (anchors 3.5, 3.6).
        case ("ios", 1): return ReceiptPacing(interval: 12, firstObjectDelay: .milliseconds(400), label: "ios")
        // Android >= 6: PRNs off, flow control only, one checksum per object (anchors 2.5, 4.2).
        case ("android", 1): return ObjectPacing(label: "android")
        // nrfutil: PRN 0, one checksum per object (anchors 5.4).
        case ("nrfutil", 1): return ObjectPacing(label: "nrfutil")
        case ("seed-pacing", 1): return BurstPacing(packets: 12, pause: .milliseconds(100), label: "seed-pacing")
        case ("with-response", 1): return ChecksumPacing(interval: 1, label: "with-response")
        case ("prn", 2):
            if let n = UInt16(fields[1]), n > 0 { return ReceiptPacing(interval: n) }
        case ("checksum", 2):
            if let n = Int(fields[1]), n > 0 { return ChecksumPacing(interval: n) }
        case ("burst", 3):
            let ms = fields[2].hasSuffix("ms") ? String(fields[2].dropLast(2)) : fields[2]
            if let n = Int(fields[1]), n > 0, let pause = Int(ms), pause >= 0 {
                return BurstPacing(packets: n, pause: .milliseconds(pause))
            }
        default: break
        }
        throw ParseError(text: text)
    }
}
