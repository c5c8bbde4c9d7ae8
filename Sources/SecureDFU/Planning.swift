import BLECore
import DFUProtocol

/// Pure transfer planning: object ranges, packet sizes, prefix CRCs and the resume rules
/// (secure-dfu-anchors.md 3.3 and 3.4). No I/O.
public enum DFUPlanning {
    /// The smallest ATT_MTU (Core v5.x Vol 3 Part F §3.2.8: "ATT_MTU … minimum 23 for LE").
    public static let minimumMTU = 23

    /// Consecutive object ranges of at most `maxObjectSize` bytes covering `0..<imageSize`.
    public static func objectRanges(imageSize: Int, maxObjectSize: Int) -> [Range<Int>] {
        guard imageSize > 0, maxObjectSize > 0 else { return [] }
        return stride(from: 0, to: imageSize, by: maxObjectSize).map { $0..<min($0 + maxObjectSize, imageSize) }
    }

    /// Write Command payload: ATT_MTU − 3 (opcode + handle), rounded down to a multiple of 4 as the SDK bootloader
    /// and iOS do (MTU 23 → 20, 185 → 180, 247 → 244). Nil below the minimum MTU.
    public static func packetSize(mtu: Int) -> Int? {
        guard mtu >= minimumMTU else { return nil }
        return (mtu - 3) & ~3
    }

    /// Packet ranges (at most `packetSize` bytes each) covering `range`.
    public static func packets(in range: Range<Int>, packetSize: Int) -> [Range<Int>] {
        guard packetSize > 0 else { return [] }
        return stride(from: range.lowerBound, to: range.upperBound, by: packetSize)
            .map { $0..<min($0 + packetSize, range.upperBound) }
    }

    /// Number of packets for `byteCount` bytes.
    public static func packetCount(_ byteCount: Int, packetSize: Int) -> Int {
        packetSize > 0 ? (byteCount + packetSize - 1) / packetSize : 0
    }
}

/// CRC-32 of every prefix of an image, answered quickly: running values are kept every ``stride`` bytes.
public struct PrefixCRC: Sendable {
    public let bytes: [UInt8]
    public let stride: Int
    private let marks: [UInt32]

    public init(_ bytes: [UInt8], stride: Int = 256) {
        self.bytes = bytes
        self.stride = max(1, stride)
        var marks: [UInt32] = [0]
        var crc = CRC32()
        var offset = 0
        while offset + self.stride <= bytes.count {
            crc.update(bytes[offset..<offset + self.stride])
            marks.append(crc.value)
            offset += self.stride
        }
        self.marks = marks
    }

    /// CRC-32 of `bytes[0..<offset]`; nil when `offset` is outside `0...bytes.count`.
    public func crc(upTo offset: Int) -> UInt32? {
        guard offset >= 0, offset <= bytes.count else { return nil }
        let mark = offset / stride
        var crc = CRC32(continuing: marks[mark])
        crc.update(bytes[mark * stride..<offset])
        return crc.value
    }

    /// Whether the device's (offset, CRC) is a true prefix of the local bytes.
    public func matches(offset: Int, crc: UInt32) -> Bool { self.crc(upTo: offset) == crc }

    /// Where a device lost packets it was sent: `packets` went out back to back after a true prefix, the device
    /// reports `offset` bytes with `crc` (it appends what it takes, so a dropped packet shifts the rest). Returns the
    /// index in `packets` of the first packet of the one contiguous run of lost packets that explains the report, or
    /// nil when none does (losses in several places, or corrupted data). A bootloader whose flash queue or receive
    /// buffers are full drops every packet until one frees, so its losses are one run; where the run starts says
    /// what overran it (docs/benchmarks.md "How adaptive works").
    public func firstLostPacket(of packets: [Range<Int>], offset: Int, crc: UInt32) -> Int? {
        guard let first = packets.first, let last = packets.last, offset >= first.lowerBound, offset < last.upperBound,
            let base = self.crc(upTo: first.lowerBound), last.upperBound <= bytes.count
        else { return nil }
        let lostBytes = last.upperBound - offset
        for start in packets.indices {
            var size = 0
            var end = start
            while end < packets.count, size < lostBytes {
                size += packets[end].count
                end += 1
            }
            guard size == lostBytes else { continue }
            var running = CRC32(continuing: base)
            running.update(bytes[first.lowerBound..<packets[start].lowerBound])
            if end < packets.count { running.update(bytes[packets[end].lowerBound..<last.upperBound]) }
            if running.value == crc { return start }
        }
        return nil
    }
}

/// What to do with the init packet after Select Command (secure-dfu-anchors.md 3.3).
public enum InitResumeDecision: Hashable, Sendable {
    /// Create the command object and send it all (this wipes the bootloader's progress).
    case create
    /// The device holds a true prefix: send the rest from this offset, without Create.
    case continueFrom(Int)
    /// The device holds the whole init packet: Execute it again (0x08 "already executed" counts as success).
    case executeAgain
}

/// What to do with the firmware after Select Data (secure-dfu-anchors.md 3.4).
public enum DataResumeDecision: Hashable, Sendable {
    /// Nothing on the device: Create object 0.
    case start
    /// The device holds whole objects up to the end of `objectIndex` with the right CRC: Execute it again
    /// (it may not have been executed; 0x08 counts as success), then go on with the next object.
    case executeAgain(objectIndex: Int)
    /// The device holds a true prefix ending inside object `objectIndex`: send the rest of it, without Create.
    case continueObject(objectIndex: Int, from: Int)
    /// The device's bytes differ from ours: Create object `objectIndex` again (the bootloader rewinds to the last
    /// executed offset).
    case recreate(objectIndex: Int)
    /// The bad bytes are in data the device already executed, or the device reports more than the image:
    /// only a new command object (which wipes progress) can repair it.
    case restartFromScratch
}

extension DFUPlanning {
    /// Init packet rule: offset 0, offset beyond the packet, or a CRC mismatch → Create; a true partial prefix →
    /// continue; the whole packet with the right CRC → Execute again.
    public static func initResumeDecision(initPacket: [UInt8], remote: ObjectInfo) -> InitResumeDecision {
        let offset = Int(remote.offset)
        guard offset > 0, offset <= initPacket.count,
            CRC32.checksum(initPacket[0..<offset]) == remote.crc
        else { return .create }
        return offset == initPacket.count ? .executeAgain : .continueFrom(offset)
    }

    /// Data rule. `executedOffset` is the end of data known to be executed (from the journal), if any.
    ///
    /// - offset 0 → start;  offset > image → restart from scratch.
    /// - CRC matches: offset at an object end (or the image end) → Execute that object again; inside an object →
    ///   continue inside it.
    /// - CRC differs: the object holding the last reported byte is recreated (at an object end that is the object
    ///   that ends there, as iOS, Android and nrfutil do), unless the journal says that object was already
    ///   executed, which Create Data cannot repair → restart from scratch.
    public static func dataResumeDecision(
        image: PrefixCRC, maxObjectSize: Int, remote: ObjectInfo, executedOffset: Int? = nil
    ) -> DataResumeDecision {
        let offset = Int(remote.offset)
        guard maxObjectSize > 0 else { return .restartFromScratch }
        if offset == 0 { return .start }
        guard offset <= image.bytes.count else { return .restartFromScratch }
        let lastByteObject = (offset - 1) / maxObjectSize
        if image.matches(offset: offset, crc: remote.crc) {
            if offset % maxObjectSize == 0 || offset == image.bytes.count {
                return .executeAgain(objectIndex: lastByteObject)
            }
            return .continueObject(objectIndex: lastByteObject, from: offset)
        }
        let objectStart = lastByteObject * maxObjectSize
        if let executedOffset, executedOffset > objectStart { return .restartFromScratch }
        return .recreate(objectIndex: lastByteObject)
    }
}
