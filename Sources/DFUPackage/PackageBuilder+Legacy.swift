import BLECore
import Crypto

/// Legacy DFU packages (nRF5 SDK ≤ 11 bootloaders), as nrfutil 0.5's `nrfutil dfu genpkg` makes them.
///
/// Rules (nrfutil 0.5.x): one init-packet header for every part (`--dev-type`, `--dev-revision`,
/// `--application-version`, `--sd-req`; defaults 0xFFFF, 0xFFFF, 0xFFFFFFFF, [0xFFFE]); `--dfu-ver` picks the
/// layout (0.5 CRC-16; 0.6 ext id 0 + CRC-16; 0.7 ext id 1 + length + SHA-256; 0.8 also an ECDSA signature); a
/// `--key-file` makes it 0.8. SD + BL are merged into `sd_bl.bin` with `sd_size` and `bl_size` directly in the
/// manifest part; other images keep their stem. The manifest carries `dfu_version` and each part's
/// `init_packet_data` (informational: the `.dat` is what is sent):
/// ```json
/// {"manifest": {"application": {"bin_file": "app.bin", "dat_file": "app.dat",
///                               "init_packet_data": {"application_version": 4294967295, "device_revision": 65535,
///                                                    "device_type": 65535, "firmware_crc16": 8838,
///                                                    "softdevice_req": [100]}},
///               "dfu_version": 0.5}}
/// ```
/// 0.6 adds `ext_packet_id`; 0.7 has `ext_packet_id`, `firmware_length` and `firmware_hash` (hex) instead of the
/// CRC; 0.8 adds `init_packet_ecds` (hex).
public struct LegacyOptions: Hashable, Sendable {
    /// The `.dat` layout (`--dfu-ver`); a signing key makes it ``LegacyInitPacket/Layout/v08``.
    public var layout: LegacyInitPacket.Layout
    public var deviceType: UInt16
    public var deviceRevision: UInt16

    public init(layout: LegacyInitPacket.Layout = .v05, deviceType: UInt16 = 0xFFFF, deviceRevision: UInt16 = 0xFFFF) {
        self.layout = layout
        self.deviceType = deviceType
        self.deviceRevision = deviceRevision
    }
}

extension PackageBuilder {
    /// The files of a Legacy package (name, bytes), sorted by name.
    func legacyFiles(_ options: LegacyOptions) throws(PackageError) -> [(name: String, bytes: [UInt8])] {
        let secureOnly: [(Bool, String)] = [
            (hwVersion != nil, "--hw-version"), (bootloaderVersion != nil, "--bootloader-version"), (sdID != nil, "--sd-id"),
            (debugMode, "--debug-mode"), (externalApplication, "--external-app"),
            (appBootValidation != .crc || sdBootValidation != .crc, "boot validation"),
        ]
        if let (_, option) = secureOnly.first(where: { $0.0 }) {
            throw PackageError(.invalidOptions, "\(option) applies to Secure DFU packages only, not to Legacy (--dfu-ver)")
        }
        guard options.layout != .crcOnly else { throw PackageError(.invalidOptions, "--dfu-ver must be 0.5, 0.6, 0.7 or 0.8") }
        let layout: LegacyInitPacket.Layout = signingKey != nil ? .v08 : options.layout
        if layout == .v08, signingKey == nil { throw PackageError(.invalidOptions, "--dfu-ver 0.8 needs --key-file") }
        var sdReq: [UInt16] = []
        for value in self.sdReq ?? [0xFFFE] {
            guard let narrow = UInt16(exactly: value) else {
                throw PackageError(.invalidOptions, "--sd-req 0x\(String(value, radix: 16)) does not fit the 16-bit Legacy field")
            }
            sdReq.append(narrow)
        }
        var images: [(kind: PartKind, bin: String, bytes: [UInt8], sizes: (sd: UInt32, bl: UInt32)?)] = []
        if let softdevice, let bootloader {
            let sizes = (UInt32(softdevice.bytes.count), UInt32(bootloader.bytes.count))
            images.append((.softdeviceBootloader, "sd_bl.bin", softdevice.bytes + bootloader.bytes, sizes))
        } else if let softdevice {
            images.append((.softdevice, softdevice.stem + ".bin", softdevice.bytes, nil))
        } else if let bootloader {
            images.append((.bootloader, bootloader.stem + ".bin", bootloader.bytes, nil))
        }
        if let application { images.append((.application, application.stem + ".bin", application.bytes, nil)) }

        var files: [(name: String, bytes: [UInt8])] = []
        var parts: [Manifest.Part] = []
        for image in images {
            let dat = String(image.bin.dropLast(4)) + ".dat"
            guard !files.contains(where: { $0.name == image.bin || $0.name == dat }) else {
                throw PackageError(.invalidInput, "two images would both be named \(image.bin)")
            }
            var packet = LegacyInitPacket(
                layout: layout, deviceType: options.deviceType, deviceRevision: options.deviceRevision,
                applicationVersion: applicationVersion ?? 0xFFFF_FFFF, softdeviceReq: sdReq, image: image.bytes)
            if let signingKey { packet = try packet.signed(with: signingKey) }
            files.append((image.bin, image.bytes))
            files.append((dat, packet.encode()))
            var part = Manifest.Part(kind: image.kind, binFile: image.bin, datFile: dat, sdSize: image.sizes?.sd, blSize: image.sizes?.bl)
            part.initPacketData = Self.initPacketData(packet)
            parts.append(part)
        }
        files.append(("manifest.json", Manifest(parts: parts, dfuVersion: layout.dfuVersion).encoded()))
        return files.sorted { $0.name < $1.name }
    }

    /// nrfutil 0.5's `init_packet_data` object for a packet.
    static func initPacketData(_ packet: LegacyInitPacket) -> JSONValue {
        var data: [String: JSONValue] = [
            "application_version": .number(Double(packet.applicationVersion ?? 0xFFFF_FFFF)),
            "device_revision": .number(Double(packet.deviceRevision ?? 0xFFFF)),
            "device_type": .number(Double(packet.deviceType ?? 0xFFFF)),
            "softdevice_req": .array(packet.softdeviceReq.map { .number(Double($0)) }),
        ]
        if let crc = packet.crc16 { data["firmware_crc16"] = .number(Double(crc)) }
        if packet.layout != .v05, let ext = packet.extPacketID { data["ext_packet_id"] = .number(Double(ext)) }
        if let length = packet.firmwareLength { data["firmware_length"] = .number(Double(length)) }
        if let sha = packet.sha256 { data["firmware_hash"] = .string(sha.hexString) }
        if let signature = packet.signature { data["init_packet_ecds"] = .string(signature.hexString) }
        return .object(data)
    }
}
