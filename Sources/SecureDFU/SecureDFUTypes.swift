import DFUProtocol

/// One image to send in one connection: the init packet (command object) and the firmware (data objects).
public struct DFUPart: Hashable, Sendable {
    /// For people: "application", "softdevice+bootloader".
    public var name: String
    public var initPacket: [UInt8]
    public var image: [UInt8]
    /// The init command's `fw_version`, when known, for "firmware version too low" errors.
    public var firmwareVersion: UInt32?

    public init(name: String, initPacket: [UInt8], image: [UInt8], firmwareVersion: UInt32? = nil) {
        self.name = name
        self.initPacket = initPacket
        self.image = image
        self.firmwareVersion = firmwareVersion
    }
}

/// Engine settings.
public struct SecureDFUConfiguration: Sendable {
    /// How data packets are paced and checked (default ``AdaptiveStreamPacing``, the `adaptive` mode).
    public var pacing: any PacingPolicy
    /// Failed checkpoints in a row before the engine slows down. It gives up only on a device that took no new data
    /// in 2 × this many tries *and* ``stallTimeout``.
    public var maxAttempts: Int
    /// How long to wait for any control point answer or receipt.
    public var checkpointTimeout: Duration
    /// How long the device may take no new data (failed checkpoints, refused Creates, with waits between the tries)
    /// before the engine gives up, after at least 2 × ``maxAttempts`` tries (``StallBudget``, docs/engine.md).
    public var stallTimeout: Duration
    /// The firmware version the device runs, when known, for "firmware version too low" errors.
    public var deviceFirmwareVersion: UInt32?
    /// End of the data the journal says the device executed, if any (see ``DFUPlanning/dataResumeDecision``).
    public var executedOffset: Int?
    /// Send Abort when the transfer is cancelled. Off by default: Abort resets the device and, on bootloaders that
    /// do not save progress, throws away what was sent; a cancelled upload should stay resumable.
    public var abortOnCancel: Bool

    /// The default pacing is ``AdaptiveStreamPacing`` (the CLI's `adaptive`). Its prepare delay after Create Data is
    /// a timer the driver runs on its injected clock, so a test with a manual clock advances that clock past it (or
    /// passes a clock-free policy such as ``AdaptivePacing`` or ``ObjectPacing``).
    public init(
        pacing: any PacingPolicy = AdaptiveStreamPacing(), maxAttempts: Int = 3, checkpointTimeout: Duration = .seconds(10),
        deviceFirmwareVersion: UInt32? = nil, executedOffset: Int? = nil, abortOnCancel: Bool = false,
        stallTimeout: Duration = .seconds(10)
    ) {
        self.stallTimeout = stallTimeout
        self.abortOnCancel = abortOnCancel
        self.pacing = pacing
        self.maxAttempts = max(1, maxAttempts)
        self.checkpointTimeout = checkpointTimeout
        self.deviceFirmwareVersion = deviceFirmwareVersion
        self.executedOffset = executedOffset
    }
}

/// Which bytes a packet burst comes from.
public enum DFUPacketSource: Hashable, Sendable {
    case initPacket
    case firmware
}

/// Write Commands to the Packet characteristic: each range is one packet of the source.
public struct DFUPacketBurst: Hashable, Sendable, CustomStringConvertible {
    public var source: DFUPacketSource
    public var packets: [Range<Int>]

    public init(source: DFUPacketSource, packets: [Range<Int>]) {
        self.source = source
        self.packets = packets
    }

    /// All bytes covered.
    public var span: Range<Int> { (packets.first?.lowerBound ?? 0)..<(packets.last?.upperBound ?? 0) }

    public var description: String { "\(packets.count) packet(s) of \(source) \(span)" }
}

/// A timer the engine asked for. Only the latest one counts; older ones firing are ignored.
public struct DFUTimer: Hashable, Sendable {
    public var id: Int
    public init(id: Int) { self.id = id }
}

/// An object the device executed, for the journal.
public struct DFUExecutedObject: Hashable, Sendable, Codable {
    public var index: Int
    /// End of the object in the image (the bootloader's `offset_last` after Execute).
    public var offset: Int
    /// CRC-32 of the image up to ``offset``.
    public var crc: UInt32

    public init(index: Int, offset: Int, crc: UInt32) {
        self.index = index
        self.offset = offset
        self.crc = crc
    }
}

/// Where a transfer stands (per part).
public struct DFUProgress: Hashable, Sendable {
    public var objectIndex: Int
    public var objectCount: Int
    /// Bytes the device confirmed (offset and CRC checked).
    public var bytesConfirmed: Int
    public var totalBytes: Int
    /// Failed checkpoints so far.
    public var retries: Int
    /// Bytes sent more than once.
    public var bytesResent: Int

    public init(
        objectIndex: Int, objectCount: Int, bytesConfirmed: Int, totalBytes: Int, retries: Int, bytesResent: Int
    ) {
        self.objectIndex = objectIndex
        self.objectCount = objectCount
        self.bytesConfirmed = bytesConfirmed
        self.totalBytes = totalBytes
        self.retries = retries
        self.bytesResent = bytesResent
    }

    /// 0...100.
    public var percent: Int { totalBytes > 0 ? bytesConfirmed * 100 / totalBytes : 100 }
}

/// What happens to the engine.
public enum DFUEvent: Hashable, Sendable {
    /// The link is ready (Control Point notifications enabled) with this ATT_MTU.
    case started(mtu: Int)
    /// A Control Point notification (a response or a PRN).
    case controlPointNotification([UInt8])
    /// The last ``DFUAction/sendPackets(_:)`` burst was written (all of its packets).
    case packetsSent
    case timerFired(DFUTimer)
    case disconnected
    /// The write of the last Control Point request failed (no Write Response: the link went down), so the device may
    /// never have received it. Unlike ``disconnected`` this is never success, not even during the last Execute.
    case requestNotAcknowledged
    case cancelled
    /// Stop at the next safe point: once the object being sent is executed (or the init packet is), the run ends with
    /// ``DFUEngineError/Code/stopped``; nothing is aborted, so the transfer resumes later from the journal.
    case stopRequested
}

/// What the engine asks its driver to do, in order.
public enum DFUAction: Hashable, Sendable {
    case writeControlPoint(ControlPointRequest)
    /// Write Commands; answer with ``DFUEvent/packetsSent`` when written.
    case sendPackets(DFUPacketBurst)
    /// Fire ``DFUEvent/timerFired(_:)`` after the duration (replaces any earlier timer).
    case startTimer(DFUTimer, Duration)
    case progress(DFUProgress)
    /// Update the journal.
    case objectExecuted(DFUExecutedObject)
    /// The part is on the device (the device now resets; a disconnect is expected).
    case completed
    case failed(DFUEngineError)
}
