import BLECore
import Logging
import Synchronization
import SystemPackage

/// Writes ATT PDUs to a btsnoop capture file (the format of `btsnoop_hci.log`, readable by Wireshark/tshark).
///
/// File header (16 bytes, big-endian):
///
///     62 74 73 6E 6F 6F 70 00   identification "btsnoop\0"
///     00 00 00 01               version 1
///     00 00 03 EA               datalink 1002 (HCI UART, H4: each packet starts with its H4 type byte)
///
/// Each record (24-byte header, big-endian, then the packet):
///
///     UInt32 original length, UInt32 included length (equal here)
///     UInt32 flags: bit 0 direction (0 = sent by the host, 1 = received), bit 1 (0 = data, 1 = command/event)
///     UInt32 cumulative drops (0)
///     Int64  timestamp, microseconds since 0000-01-01 ("0 AD"); 1970-01-01 is 0x00DCDDB30F2F8000
///
/// The packet wraps one ATT PDU as on a real LE link:
///
///     02                      H4 packet type: ACL data
///     HH HH                   handle (12 bits) | PB flag 0b10 (start) << 12 | BC 0 << 14, little-endian
///     LL LL                   ACL data length = 4 + PDU length, little-endian
///     LL LL                   L2CAP length = PDU length, little-endian
///     04 00                   L2CAP CID 0x0004 (ATT)
///     ...                     the ATT PDU
public final class BTSnoopWriter: PDUObserver {
    /// Microseconds from 0000-01-01 to 1970-01-01 in the btsnoop time base.
    public static let unixEpochOffset: Int64 = 0x00DC_DDB3_0F2F_8000
    public static let datalinkH4: UInt32 = 1002
    /// The connection handle used when the link does not report one.
    public static let defaultHandle: UInt16 = 0x0040
    static let attCID: UInt16 = 0x0004
    static let packetBoundaryStart: UInt16 = 0x2

    private let fd: Mutex<CInt?>
    private let handle: UInt16
    let now: @Sendable () -> Int64
    /// The handles of the links open now.
    let links = Mutex<Set<UInt16>>([])
    private let logger: Logger

    /// Creates (truncates) `path` and writes the file header.
    /// - Parameters:
    ///   - handle: the ACL connection handle written in each record (12 bits).
    ///   - now: wall-clock microseconds since 1970 (injected by tests).
    public init(
        path: String, handle: UInt16 = BTSnoopWriter.defaultHandle,
        now: @escaping @Sendable () -> Int64 = system_realtimeMicroseconds,
        logger: Logger = Logger(label: "bledfu.capture")
    ) throws(Errno) {
        let fd = try FileIO.create(path)
        do throws(Errno) {
            try FileIO.writeAll(fd, BTSnoopWriter.fileHeader)
        } catch {
            _ = try? FileIO.close(fd)  // already failing with the write error
            throw error
        }
        self.fd = Mutex(fd)
        self.handle = handle & 0x0FFF
        self.now = now
        self.logger = logger
    }

    /// The 16-byte file header.
    public static var fileHeader: [UInt8] {
        var writer = ByteWriter(capacity: 16)
        writer.write(contentsOf: Array("btsnoop".utf8) + [0])
        writer.write(contentsOf: bigEndian(UInt32(1)))
        writer.write(contentsOf: bigEndian(datalinkH4))
        return writer.bytes
    }

    /// One record for `pdu` (header and H4/ACL/L2CAP-wrapped packet).
    public static func record(pdu: [UInt8], sent: Bool, handle: UInt16, unixMicroseconds: Int64) -> [UInt8] {
        var packet = ByteWriter(capacity: 9 + pdu.count)
        packet.write(UInt8(0x02))
        packet.write(UInt16(handle & 0x0FFF) | packetBoundaryStart << 12)
        packet.write(UInt16(truncatingIfNeeded: pdu.count + 4))
        packet.write(UInt16(truncatingIfNeeded: pdu.count))
        packet.write(attCID)
        packet.write(contentsOf: pdu)
        var record = ByteWriter(capacity: 24 + packet.bytes.count)
        let length = UInt32(truncatingIfNeeded: packet.bytes.count)
        record.write(contentsOf: bigEndian(length))
        record.write(contentsOf: bigEndian(length))
        record.write(contentsOf: bigEndian(UInt32(sent ? 0 : 1)))
        record.write(contentsOf: bigEndian(UInt32(0)))
        record.write(contentsOf: bigEndian(UInt64(bitPattern: unixMicroseconds + unixEpochOffset)))
        record.write(contentsOf: packet.bytes)
        return record.bytes
    }

    static func bigEndian<I: FixedWidthInteger>(_ value: I) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }

    public func observe(pdu: [UInt8], sent: Bool) {
        write(pdu: pdu, sent: sent)
    }

    /// Appends one record. A failed write is logged at debug level and the capture stops (the link goes on).
    public func write(pdu: [UInt8], sent: Bool) {
        write(pdu: pdu, sent: sent, handle: handle)
    }

    /// Appends one ACL record on `handle`.
    func write(pdu: [UInt8], sent: Bool, handle: UInt16) {
        append(BTSnoopWriter.record(pdu: pdu, sent: sent, handle: handle, unixMicroseconds: now()))
    }

    /// Appends an HCI event record (received by the host).
    func writeEvent(code: UInt8, parameters: [UInt8]) {
        append(Self.eventRecord(code: code, parameters: parameters, unixMicroseconds: now()))
    }

    /// Appends one whole record.
    func append(_ record: [UInt8]) {
        fd.withLock { fd in
            guard let descriptor = fd else { return }
            do throws(Errno) {
                try FileIO.writeAll(descriptor, record)
            } catch {
                logger.debug("capture write failed; capture stopped", metadata: ["errno": "\(error)"])
                _ = try? FileIO.close(descriptor)  // the capture is abandoned either way
                fd = nil
            }
        }
    }

    /// Flushes and closes the file (idempotent).
    public func close() {
        fd.withLock { fd in
            guard let descriptor = fd else { return }
            fd = nil
            do throws(Errno) {
                try FileIO.fsync(descriptor)
                try FileIO.close(descriptor)
            } catch {
                logger.debug("capture close failed", metadata: ["errno": "\(error)"])
            }
        }
    }

    deinit { close() }
}

/// Wraps a bearer and shows every PDU to observers (a ``BTSnoopWriter``, a `--verbose` trace) before it is sent
/// and after it is received.
public final class CapturingBearer: ATTBearer {
    public let base: any ATTBearer
    private let observers: [any PDUObserver]

    public init(wrapping base: any ATTBearer, observers: [any PDUObserver]) {
        self.base = base
        self.observers = observers
    }

    public var linkInfo: LinkInfo { base.linkInfo }

    public func send(_ pdu: [UInt8]) async throws(BearerError) {
        // Recorded before it is handed to the link: once sent, the peer's answer can arrive, be recorded and end the
        // program before this task resumes, which would leave the request out of the capture. A PDU whose send then
        // fails is still recorded: the capture shows what was attempted.
        for observer in observers { observer.observe(pdu: pdu, sent: true) }
        try await base.send(pdu)
    }

    public func receive() async throws(BearerError) -> [UInt8] {
        let pdu: [UInt8]
        do {
            pdu = try await base.receive()
        } catch {
            ended(error)
            throw error
        }
        for observer in observers { observer.observe(pdu: pdu, sent: false) }
        return pdu
    }

    /// A receive ended the link: the peer (or the radio) ended it, unless this side closed it.
    private func ended(_ error: BearerError) {
        guard error.code == .disconnected else { return }
        for observer in observers { observer.linkEnded(byPeer: true) }
    }

    public func send(burst pdus: [[UInt8]]) async throws(BearerError) {
        for pdu in pdus {
            for observer in observers { observer.observe(pdu: pdu, sent: true) }
        }
        try await base.send(burst: pdus)
    }

    public func receive(upTo maximumCount: Int) async throws(BearerError) -> [[UInt8]] {
        let pdus: [[UInt8]]
        do {
            pdus = try await base.receive(upTo: maximumCount)
        } catch {
            ended(error)
            throw error
        }
        for pdu in pdus {
            for observer in observers { observer.observe(pdu: pdu, sent: false) }
        }
        return pdus
    }

    public func close() async {
        await base.close()
        // An observer records the end once (a link lost before this close was recorded as ended by the peer).
        for observer in observers { observer.linkEnded(byPeer: false) }
    }

    public func securityLevel() async -> LinkSecurityLevel { await base.securityLevel() }

    public func raiseSecurity(to level: LinkSecurityLevel) async throws(BearerError) -> LinkSecurityLevel {
        try await base.raiseSecurity(to: level)
    }
}
