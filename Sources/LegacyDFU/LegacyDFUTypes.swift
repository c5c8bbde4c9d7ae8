import DFUPackage

/// One image to send in one bootloader session: Start DFU with its type and sizes, the init packet, the image.
public struct LegacyPart: Hashable, Sendable {
    /// For people: "application", "softdevice_bootloader".
    public var name: String
    public var imageType: LegacyImageType
    public var sizes: LegacyStartSizes
    /// The `.dat` bytes, exactly as in the package.
    public var initPacket: [UInt8]
    public var image: [UInt8]
    /// The init packet's layout (for error hints: the SDK 11 template checks CRC-16 only).
    public var initLayout: LegacyInitPacket.Layout?

    public init(
        name: String, imageType: LegacyImageType, sizes: LegacyStartSizes, initPacket: [UInt8], image: [UInt8],
        initLayout: LegacyInitPacket.Layout? = nil
    ) {
        self.name = name
        self.imageType = imageType
        self.sizes = sizes
        self.initPacket = initPacket
        self.image = image
        self.initLayout = initLayout
    }

    /// An application part (sizes 0, 0, image length).
    public static func application(_ image: [UInt8], initPacket: [UInt8], layout: LegacyInitPacket.Layout? = nil) -> LegacyPart {
        LegacyPart(
            name: "application", imageType: .application, sizes: LegacyStartSizes(application: UInt32(clamping: image.count)),
            initPacket: initPacket, image: image, initLayout: layout)
    }
}

extension LegacyPart {
    /// A package part as Legacy DFU sends it. A Secure part (protobuf init packet) is refused: it is for an
    /// SDK ≥ 12 bootloader.
    public init(_ part: PackagePart) throws(LegacyDFUError) {
        guard let legacy = part.legacyInit else {
            throw LegacyDFUError(
                .incompatible,
                "the package is a Secure DFU package (protobuf init packet in \(part.datFile)) but the device runs a Legacy DFU bootloader (service 1530); build a Legacy package with `bledfu package create --dfu-ver 0.5`")
        }
        let length = UInt32(clamping: part.image.count)
        var sizes = LegacyStartSizes()
        let type: LegacyImageType
        switch part.kind {
        case .application:
            type = .application
            sizes.application = length
        case .softdevice:
            type = .softdevice
            sizes.softdevice = length
        case .bootloader:
            type = .bootloader
            sizes.bootloader = length
        case .softdeviceBootloader:
            type = [.softdevice, .bootloader]
            sizes.softdevice = part.manifestSDSize ?? 0
            sizes.bootloader = part.manifestBLSize ?? 0
            guard sizes.total == UInt64(length), sizes.softdevice > 0, sizes.bootloader > 0 else {
                throw LegacyDFUError(
                    .incompatible,
                    "\(part.binFile): the manifest's sd_size \(sizes.softdevice) + bl_size \(sizes.bootloader) do not add up to the image's \(length) bytes")
            }
        }
        self.init(
            name: part.kind.description, imageType: type, sizes: sizes, initPacket: part.initPacketBytes, image: part.image,
            initLayout: legacy.layout)
    }

    /// The parts of a package in sending order (SoftDevice and bootloader first, then the application: nrfutil 0.5
    /// and the iOS and Android libraries send them in separate bootloader sessions in this order).
    public static func parts(of package: FirmwarePackage) throws(LegacyDFUError) -> [LegacyPart] {
        guard package.format == .legacy else {
            let file = package.parts.first?.datFile ?? "the init packet"
            throw LegacyDFUError(
                .incompatible,
                "the package is a Secure DFU package (protobuf init packet in \(file)) but the device runs a Legacy DFU bootloader (service 1530); build a Legacy package with `bledfu package create --dfu-ver 0.5`")
        }
        let order: [PartKind] = [.softdeviceBootloader, .softdevice, .bootloader, .application]
        var parts: [LegacyPart] = []
        for kind in order { if let part = package.part(kind) { parts.append(try LegacyPart(part)) } }
        return parts
    }
}

/// Engine settings.
public struct LegacyDFUConfiguration: Sendable {
    /// How firmware packets are paced and checked (default ``LegacyAdaptivePacing``, the `adaptive` mode).
    public var pacing: any LegacyPacingPolicy
    /// Bytes per Packet write. 20 by default: the SDK 11 Packet characteristic's `max_len` (MAX_DFU_PKT_LEN), and
    /// what InfiniTime asserts; a write longer than the characteristic allows is dropped (Android-DFU-Library #526).
    public var packetSize: Int
    /// How long to wait for an answer (init check, Validate, a receipt, the last flash write).
    public var responseTimeout: Duration
    /// How long to wait for the answer to Start DFU: the device erases first (a whole bank on SDK 11 dual bank,
    /// about 4 s on an nRF52; ≈ 5 s of SPI NOR on InfiniTime, InfiniTime #1933).
    public var eraseTimeout: Duration
    /// The DFU Version the device reported; nil when it has no DFU Version characteristic (SDK ≤ 6.1: a 2-byte
    /// init packet after a bare `02`).
    public var deviceVersion: LegacyDFUVersion?
    /// Ask Report Received Image Size (`07`) after the last packet and compare it with the image size, and ask it
    /// when a window's receipt is late. Off for the DFU service inside InfiniTime, which does not answer `07`: a late
    /// receipt is then waited for until ``responseTimeout``.
    public var checkReceivedSize: Bool
    /// Send Reset (`06`) when the transfer is cancelled. Off by default: the device keeps its state and times out.
    public var resetOnCancel: Bool
    /// The device type the init packet must carry, checked before Start DFU (nil: not checked here, the device
    /// decides). The Adafruit bootloader takes 0x0052 only and checks it after Start, which on its single bank has
    /// erased the application (``LegacyBootloaderIdentity``).
    public var requiredDeviceType: UInt16?

    public init(
        pacing: any LegacyPacingPolicy = LegacyAdaptivePacing(), packetSize: Int = 20,
        responseTimeout: Duration = .seconds(10), eraseTimeout: Duration = .seconds(30),
        deviceVersion: LegacyDFUVersion? = .sdk11, checkReceivedSize: Bool = true, resetOnCancel: Bool = false
    ) {
        self.pacing = pacing
        self.packetSize = max(4, packetSize & ~3)
        self.responseTimeout = responseTimeout
        self.eraseTimeout = eraseTimeout
        self.deviceVersion = deviceVersion
        self.checkReceivedSize = checkReceivedSize
        self.resetOnCancel = resetOnCancel
        requiredDeviceType = nil
    }
}

/// Which bytes a Packet burst comes from.
public enum LegacyPacketSource: Hashable, Sendable {
    case initPacket
    case firmware
}

/// Write Commands to the Packet characteristic: each range is one packet of the source.
public struct LegacyPacketBurst: Hashable, Sendable, CustomStringConvertible {
    public var source: LegacyPacketSource
    public var packets: [Range<Int>]

    public init(source: LegacyPacketSource, packets: [Range<Int>]) {
        self.source = source
        self.packets = packets
    }

    public var span: Range<Int> { (packets.first?.lowerBound ?? 0)..<(packets.last?.upperBound ?? 0) }
    public var description: String { "\(packets.count) packet(s) of \(source) \(span)" }
}

/// A timer the engine asked for. Only the latest one counts; older ones firing are ignored.
public struct LegacyTimer: Hashable, Sendable {
    public var id: Int
    public init(id: Int) { self.id = id }
}

/// Where one attempt at one part stands.
public struct LegacyProgress: Hashable, Sendable {
    /// Firmware bytes the device confirmed (by a receipt, or by its answer to the last packet).
    public var bytesConfirmed: Int
    /// Firmware bytes written in this attempt.
    public var bytesSent: Int
    public var totalBytes: Int

    public init(bytesConfirmed: Int, bytesSent: Int, totalBytes: Int) {
        self.bytesConfirmed = bytesConfirmed
        self.bytesSent = bytesSent
        self.totalBytes = totalBytes
    }

    /// 0...100.
    public var percent: Int { totalBytes > 0 ? bytesConfirmed * 100 / totalBytes : 100 }
}

/// What happens to the engine.
public enum LegacyDFUEvent: Hashable, Sendable {
    /// The link is ready (Control Point notifications enabled).
    case started
    /// A Control Point notification.
    case notification([UInt8])
    /// The last ``LegacyDFUAction/sendPackets(_:)`` burst was written.
    case packetsSent
    case timerFired(LegacyTimer)
    case disconnected
    /// The write of the last Control Point request failed (no Write Response: the link went down).
    case requestNotAcknowledged
    case cancelled
}

/// What the engine asks its driver to do, in order.
public enum LegacyDFUAction: Hashable, Sendable {
    case writeControlPoint(LegacyRequest)
    /// One Write Command to the Packet characteristic (the start sizes, an SDK 6 CRC).
    case writePacket([UInt8])
    /// Write Commands; answer with ``LegacyDFUEvent/packetsSent`` when written.
    case sendPackets(LegacyPacketBurst)
    /// Fire ``LegacyDFUEvent/timerFired(_:)`` after the duration (replaces any earlier timer).
    case startTimer(LegacyTimer, Duration)
    case progress(LegacyProgress)
    /// The device acknowledged Activate and Reset: it installs the image and resets (the link drops).
    case completed
    case failed(LegacyDFUError)
}
