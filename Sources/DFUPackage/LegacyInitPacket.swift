import BLECore

/// A Legacy DFU init packet (nRF5 SDK ≤ 11 `.dat`), all integers little-endian.
///
/// Layout, chosen by length (n = sd_req_count):
/// ```
/// 2 bytes                 crc16                                              (SDK 6: CRC only)
/// otherwise               device_type u16, device_revision u16, application_version u32,
///                         sd_req_count u16, sd_req[n] u16, then
///   + 2                   crc16                                              (dfu_version 0.5: 14 + 2(n-1) bytes)
///   + 4 + 2               ext_packet_id u32 = 0, crc16                       (0.6: 18 bytes for n = 1)
///   + 4 + 4 + 32          ext_packet_id = 1, firmware_length u32, sha256     (0.7: 54 bytes for n = 2)
///   + 4 + 4 + 32 + 64     ext_packet_id = 2, firmware_length, sha256, ecds   (0.8: 116 bytes for n = 1)
/// ```
/// The SHA-256 is in plain order; the 0.8 signature is plain big-endian r‖s over all preceding bytes.
/// Example (0.5): `ff ff ff ff ff ff ff ff 01 00 64 00 38 39` = device type/revision 0xFFFF, version 0xFFFFFFFF,
/// sd_req [0x0064], crc16 0x3938.
public struct LegacyInitPacket: Hashable, Sendable {
    public enum Layout: String, Hashable, Sendable {
        case crcOnly = "crc16 only"
        case v05 = "dfu_version 0.5"
        case v06 = "dfu_version 0.6"
        case v07 = "dfu_version 0.7"
        case v08 = "dfu_version 0.8"
    }

    public var layout: Layout
    public var deviceType: UInt16?
    public var deviceRevision: UInt16?
    public var applicationVersion: UInt32?
    public var softdeviceReq: [UInt16]
    public var extPacketID: UInt32?
    public var crc16: UInt16?
    public var firmwareLength: UInt32?
    /// Plain-order SHA-256 of the image (0.7, 0.8).
    public var sha256: [UInt8]?
    /// Plain big-endian r‖s over the preceding bytes (0.8).
    public var signature: [UInt8]?
    /// The bytes the 0.8 signature covers (everything before it).
    public var signedBytes: [UInt8]

    public init(decoding bytes: [UInt8]) throws(PackageError) {
        layout = .crcOnly
        softdeviceReq = []
        signedBytes = []
        do {
            var r = ByteReader(bytes)
            if bytes.count == 2 {
                crc16 = try r.readUInt16("crc16")
                return
            }
            deviceType = try r.readUInt16("device_type")
            deviceRevision = try r.readUInt16("device_revision")
            applicationVersion = try r.readUInt32("application_version")
            let count = try r.readUInt16("sd_req_count")
            for _ in 0..<count { softdeviceReq.append(try r.readUInt16("sd_req")) }
            switch r.remainingCount {
            case 2:
                layout = .v05
                crc16 = try r.readUInt16("crc16")
            case 6, 40, 104:
                let ext = try r.readUInt32("ext_packet_id")
                extPacketID = ext
                switch (ext, r.remainingCount) {
                case (0, 2):
                    layout = .v06
                    crc16 = try r.readUInt16("crc16")
                case (1, 36), (2, 100):
                    layout = ext == 1 ? .v07 : .v08
                    firmwareLength = try r.readUInt32("firmware_length")
                    sha256 = try r.readBytes(32, "firmware_hash")
                    if ext == 2 {
                        signedBytes = Array(bytes[..<r.offset])
                        signature = try r.readBytes(64, "init_packet_ecds")
                    }
                default:
                    throw PackageError(.invalidInitPacket, "legacy init packet: ext_packet_id \(ext) does not fit \(bytes.count) bytes")
                }
            default:
                throw PackageError(
                    .invalidInitPacket, "legacy init packet: \(bytes.count) bytes do not match any layout (sd_req_count \(count))")
            }
        } catch let error as ByteReader.Truncated {
            throw PackageError(.invalidInitPacket, "legacy init packet \(error)")
        } catch let error as PackageError {
            throw error
        } catch {
            throw PackageError(.invalidInitPacket, "legacy init packet: \(error)")
        }
    }
}
