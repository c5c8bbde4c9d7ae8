import BLECore
import Crypto
import DFUPackage
import DFUProtocol

/// SHA-256 as the simulator computes image digests (natural byte order).
public enum DFUSimulatorDigest {
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] { ImageDigest.sha256(bytes) }
    /// Lowercase hex, as `InstalledImage.sha256` holds it.
    public static func sha256Hex(_ bytes: [UInt8]) -> String { ImageDigest.sha256Hex(bytes) }
}

enum ImageDigest {
    static func sha256(_ bytes: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: bytes)) }
    static func sha256Hex(_ bytes: [UInt8]) -> String { ByteWriter.hex(sha256(bytes)) }
}

extension ByteWriter {
    /// Lowercase hex without separators.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] })
    }
}

/// `SD_REQ_APP_OVERWRITES_SD` and `SD_REQ_ANY_VERSION` (nrf_dfu_ver_validation.c).
let sdReqAppOverwritesSD: UInt32 = 0x00
let sdReqAnyVersion: UInt32 = 0xFFFE

extension BootloaderStateMachine {
    /// The stored init packet, decoded (`stored_init_cmd_decode`).
    func decodedInit(_ settings: BootloaderSettings) -> InitCommand? {
        guard settings.commandSize != 0 else { return nil }
        // An undecodable stored command counts as "no init command" (stored_init_cmd_decode returns false).
        return try? SecureInitPacket(decoding: settings.initCommand).command
    }

    /// `update_data_size_get`: the number of firmware bytes the init command announces.
    func firmwareSize(_ settings: BootloaderSettings) -> UInt32? {
        guard let command = decodedInit(settings) else { return nil }
        return Self.firmwareSize(command)
    }

    static func firmwareSize(_ command: InitCommand) -> UInt32? {
        guard let type = command.type else { return nil }
        var size: UInt32 = 0
        if type == .application || type == .externalApplication {
            size = command.appSize ?? 0
        } else {
            if type.rawValue & FirmwareType.softdevice.rawValue != 0 { size = command.sdSize ?? 0 }
            if type.rawValue & FirmwareType.bootloader.rawValue != 0 { size &+= command.blSize ?? 0 }
        }
        return size == 0 ? nil : size
    }

    /// `nrf_dfu_validation_init_cmd_execute` for a newly received init command: decode, signature, versions, size,
    /// room in the bank.
    func validateInit(_ bytes: [UInt8]) -> DFUStatus {
        guard let packet = try? SecureInitPacket(decoding: bytes) else {
            return .failure(.invalidObject)  // "Failed to decode init packet".
        }
        let command = packet.command
        // Signature (nrf_dfu_validation_prevalidate → nrf_dfu_validation_signature_check).
        if signatureRequired(command.type) {
            guard let signature = packet.signature else { return .extended(.signatureMissing) }
            guard packet.signatureType == SecureInitPacket.ecdsaP256Sha256 else {
                return .extended(.wrongSignatureType)
            }
            guard signature.count == 64 else { return .failure(.operationFailed) }
            guard Self.verify(signature: signature, over: packet.initCommandBytes, keys: profile.publicKeys) else {
                return .failure(.invalidObject)
            }
        }
        let versions = versionCheck(command)
        guard versions == .success else { return versions }
        // update_data_size_get.
        guard let type = command.type, let size = Self.firmwareSize(command) else {
            return .extended(.initCommandInvalid)
        }
        if type.rawValue & FirmwareType.bootloader.rawValue != 0, type != .externalApplication,
            (command.blSize ?? 0) > UInt32(DeviceProfile.bootloaderMaxSize)
        {
            return .failure(.insufficientResources)
        }
        // update_data_addr_get → nrf_dfu_cache_prepare.
        if Int(size) > profile.flash.bankSize { return .failure(.insufficientResources) }
        return .success
    }

    /// `signature_required`: application updates follow `NRF_DFU_REQUIRE_SIGNED_APP_UPDATE`, everything else always
    /// needs one. A profile without public keys checks no signature at all.
    func signatureRequired(_ type: FirmwareType?) -> Bool {
        guard !profile.publicKeys.isEmpty else { return false }
        if type == .application { return profile.requireSignedApp }
        return true
    }

    /// `nrf_dfu_ver_validation_check` (downgrade prevention on, same version accepted for app/SD).
    func versionCheck(_ command: InitCommand) -> DFUStatus {
        let known: [FirmwareType] = [
            .application, .softdevice, .bootloader, .softdeviceBootloader, .externalApplication,
        ]
        guard let type = command.type, known.contains(type) else { return .extended(.initCommandInvalid) }
        guard command.hash?.type == .sha256 else { return .extended(.wrongHashType) }
        if command.isDebug == true { return .success }  // NRF_DFU_DEBUG builds skip the rest for debug packets.
        guard let hw = command.hwVersion else { return .extended(.initCommandInvalid) }
        guard hw == profile.hwVersion else { return .extended(.hardwareVersionFailure) }
        guard sdReqOK(command, type: type) else { return .extended(.softDeviceVersionFailure) }
        if let version = command.fwVersion {
            let ok: Bool
            switch type {
            case .application, .softdevice: ok = version >= (installed.application?.version ?? 0)
            case .externalApplication: ok = true
            default: ok = version > installed.bootloader.version
            }
            if !ok { return .extended(.firmwareVersionFailure) }
        } else if type != .softdevice && type != .externalApplication {
            return .extended(.initCommandInvalid)  // "FW version missing".
        }
        return .success
    }

    /// `sd_req_ok` with a SoftDevice present.
    func sdReqOK(_ command: InitCommand, type: FirmwareType) -> Bool {
        let fwid = UInt32(profile.softDeviceFWID)
        let acceptAny = type == .externalApplication
        func matches() -> Bool { command.sdReq.contains { $0 == fwid || (acceptAny && $0 == sdReqAnyVersion) } }
        guard let first = command.sdReq.first else { return false }
        if first != sdReqAppOverwritesSD { return matches() }
        if type == .application {
            // A BLE bootloader never lets an application overwrite the SoftDevice when more FWIDs are listed.
            return command.sdReq.count <= 1
        }
        if type == .externalApplication { return false }
        return type != .softdevice
    }

    /// ECDSA P-256 / SHA-256 over `data`; the stored signature has r and s each byte-reversed (nrfutil's order).
    /// A key entry may also be a private key PEM (its public half is used).
    static func verify(signature: [UInt8], over data: [UInt8], keys: [String]) -> Bool {
        keys.contains { pem in
            // An entry that is no P-256 PEM key verifies nothing (the CLI validates keys when it loads a profile).
            guard let key = try? PackageKeys.publicKey(pem: pem) else { return false }
            return NordicSignature.isValid(stored: signature, over: data, key: key)
        }
    }

    /// `postvalidate`: the image's SHA-256 against the init packet's hash (stored byte-reversed), then the boot
    /// validation type.
    func postValidate(_ image: [UInt8]) -> DFUStatus {
        guard let command = decodedInit(settings), let hash = command.hash else { return .extended(.hashFailed) }
        let digest = ImageDigest.sha256(image)
        guard Array(hash.bytes.reversed()) == digest else { return .extended(.verificationFailed) }
        if let validation = command.bootValidation.first {
            let supported: [ValidationType] = [.noValidation, .crc, .sha256, .ecdsaP256Sha256]
            if !supported.contains(validation.type) { return .failure(.invalidObject) }
        }
        return .success
    }
}
