import BLECore
import Crypto

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

extension LegacyInitPacket {
    /// A packet for `image` in one of nrfutil 0.5's `--dfu-ver` layouts (not ``Layout/crcOnly``): 0.5 and 0.6 carry
    /// the image's CRC-16, 0.7 and 0.8 its length and plain-order SHA-256; 0.8 is signed with
    /// ``signed(with:)``. The signature starts as 64 zero bytes.
    public init(
        layout: Layout, deviceType: UInt16, deviceRevision: UInt16, applicationVersion: UInt32, softdeviceReq: [UInt16],
        image: [UInt8]
    ) {
        self.layout = layout
        self.deviceType = deviceType
        self.deviceRevision = deviceRevision
        self.applicationVersion = applicationVersion
        self.softdeviceReq = softdeviceReq
        self.signedBytes = []
        switch layout {
        case .crcOnly, .v05:
            crc16 = CRC16.ccittFalse(image)
        case .v06:
            extPacketID = 0
            crc16 = CRC16.ccittFalse(image)
        case .v07, .v08:
            extPacketID = layout == .v07 ? 1 : 2
            firmwareLength = UInt32(clamping: image.count)
            sha256 = Array(SHA256.hash(data: image))
            if layout == .v08 { signature = [UInt8](repeating: 0, count: 64) }
        }
        if layout == .v08 { signedBytes = Array(encode().dropLast(64)) }
    }

    /// The 0.8 packet with an ECDSA P-256/SHA-256 signature (plain big-endian r‖s) over ``signedBytes``.
    public func signed(with key: P256.Signing.PrivateKey) throws(PackageError) -> LegacyInitPacket {
        guard layout == .v08 else { return self }
        var packet = self
        do {
            packet.signature = Array(try key.signature(for: signedBytes).rawRepresentation)
        } catch {
            throw PackageError(.invalidKey, "signing failed: \(error)")
        }
        return packet
    }

    /// The `.dat` bytes (the layout in the type's documentation).
    public func encode() -> [UInt8] {
        var w = ByteWriter()
        if layout == .crcOnly {
            w.write(crc16 ?? 0)
            return w.bytes
        }
        w.write(deviceType ?? 0xFFFF)
        w.write(deviceRevision ?? 0xFFFF)
        w.write(applicationVersion ?? 0xFFFF_FFFF)
        w.write(UInt16(clamping: softdeviceReq.count))
        for value in softdeviceReq.prefix(Int(UInt16.max)) { w.write(value) }
        switch layout {
        case .crcOnly, .v05:
            w.write(crc16 ?? 0)
        case .v06:
            w.write(UInt32(0))
            w.write(crc16 ?? 0)
        case .v07, .v08:
            w.write(UInt32(layout == .v07 ? 1 : 2))
            w.write(firmwareLength ?? 0)
            w.write(contentsOf: (sha256 ?? []) + [UInt8](repeating: 0, count: max(0, 32 - (sha256?.count ?? 0))))
            if layout == .v08 { w.write(contentsOf: signature ?? [UInt8](repeating: 0, count: 64)) }
        }
        return w.bytes
    }
}

extension LegacyInitPacket.Layout {
    /// nrfutil 0.5's `--dfu-ver` value for this layout (nil for the SDK 6 CRC-only packet).
    public var dfuVersion: Double? {
        switch self {
        case .crcOnly: nil
        case .v05: 0.5
        case .v06: 0.6
        case .v07: 0.7
        case .v08: 0.8
        }
    }

    /// The layout nrfutil 0.5 writes for `--dfu-ver` 0.5 … 0.8, nil for other values.
    public init?(dfuVersion: Double) {
        guard let layout = [Self.v05, .v06, .v07, .v08].first(where: { abs(($0.dfuVersion ?? 0) - dfuVersion) < 1e-9 }) else {
            return nil
        }
        self = layout
    }
}
