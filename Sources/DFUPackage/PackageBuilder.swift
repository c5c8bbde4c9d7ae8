import Crypto
import Foundation

/// Builds a Secure DFU package in nrfutil 6.1.7's format (`nrfutil pkg generate`).
///
/// What is byte-compatible: the manifest text (sorted keys, 4-space indent, `info_read_only_metadata` for SD+BL),
/// the init command (every field written in field-number order, zeros included; reversed SHA-256; sd_req packed),
/// the `.dat` layout (signed: `signature_type` 0 and r, s each byte-reversed), file names (`<stem>.bin/.dat`,
/// `sd_bl.bin/.dat`), stored zip entries. The zip has a fixed timestamp; only ECDSA signatures vary between runs.
///
/// nrfutil rules applied: SD and BL are merged into `sd_bl.bin` (SD image then BL image) with type
/// SOFTDEVICE_BOOTLOADER and the bootloader version; a SoftDevice's fw_version is 0xFFFFFFFF; the bootloader's
/// boot validation is always VALIDATE_GENERATED_CRC (SD+BL lists the SD's, then the BL's); an application next to a
/// SoftDevice uses `sdID` as its sd_req; debug mode defaults hw/app/bl versions to 0xFFFFFFFF and sd_req to
/// [0xFFFE]; BL + APP without SD is rejected.
public struct PackageBuilder {
    /// A firmware input, already normalized to a `.bin` (see ``IntelHex``).
    public struct Image: Hashable, Sendable {
        /// The file-name stem used in the package (`app` → `app.bin`, `app.dat`).
        public var stem: String
        public var bytes: [UInt8]

        public init(stem: String, bytes: [UInt8]) {
            self.stem = stem
            self.bytes = IntelHex.padded(bytes)
        }

        /// Loads a `.hex` (Intel HEX, by extension or leading ':') or a raw `.bin` file.
        public static func load(_ url: URL) throws(PackageError) -> Image {
            let data: Data
            do {
                data = try Data(contentsOf: url)
            } catch {
                throw PackageError(.io, FileProblem.describe("read", url.path, error))
            }
            guard data.count <= 32 << 20 else { throw PackageError(.invalidInput, "\(url.lastPathComponent) is too large") }
            let stem = url.deletingPathExtension().lastPathComponent
            if url.pathExtension.lowercased() == "hex" || (data.first == UInt8(ascii: ":") && url.pathExtension.lowercased() != "bin") {
                return Image(stem: stem, bytes: try IntelHex.binary(from: String(decoding: data, as: UTF8.self)))
            }
            guard !data.isEmpty else { throw PackageError(.invalidInput, "\(url.lastPathComponent) is empty") }
            return Image(stem: stem, bytes: Array(data))
        }
    }

    public var application: Image?
    public var bootloader: Image?
    public var softdevice: Image?
    public var applicationVersion: UInt32?
    public var bootloaderVersion: UInt32?
    public var hwVersion: UInt32?
    public var sdReq: [UInt32]?
    /// The SoftDevice ID the application requires after a SoftDevice update (`--sd-id`).
    public var sdID: [UInt32]?
    public var debugMode = false
    public var externalApplication = false
    public var appBootValidation: ValidationType = .crc
    public var sdBootValidation: ValidationType = .crc
    public var signingKey: P256.Signing.PrivateKey?
    /// Set for a Legacy DFU package (nrfutil 0.5 `dfu genpkg`, see `PackageBuilder+Legacy.swift`); nil for Secure.
    public var legacy: LegacyOptions?

    public init() {}

    /// "2.7.31" → 20731 (`major * 10000 + minor * 100 + patch`), as `--application-version-string`.
    public static func version(string: String) throws(PackageError) -> UInt32 {
        let parts = string.split(separator: ".", omittingEmptySubsequences: false).map { UInt32($0) }
        guard parts.count == 3, let major = parts[0], let minor = parts[1], let patch = parts[2], minor < 100, patch < 100,
            major < 429_496
        else { throw PackageError(.invalidInput, "version string '\(string)' is not MAJOR.MINOR.PATCH") }
        return major * 10000 + minor * 100 + patch
    }

    private struct Plan {
        var kind: PartKind
        var type: FirmwareType
        var image: [UInt8]
        var bin: String
        var fwVersion: UInt32
        var sdReq: [UInt32]
        var sdSize: UInt32 = 0
        var blSize: UInt32 = 0
        var validation: [ValidationType]
        /// What an ECDSA boot-validation signature covers (the SD part for SD+BL).
        var signedImage: [UInt8]
    }

    /// The package's files (name, bytes), in archive order (sorted by name).
    public func files() throws(PackageError) -> [(name: String, bytes: [UInt8])] {
        guard application != nil || bootloader != nil || softdevice != nil else {
            throw PackageError(.invalidOptions, "no image given (--application, --bootloader or --softdevice)")
        }
        if application != nil, bootloader != nil, softdevice == nil {
            throw PackageError(.invalidOptions, "bootloader and application without a SoftDevice: use two packages")
        }
        if let legacy { return try legacyFiles(legacy) }
        if externalApplication, bootloader != nil || softdevice != nil {
            throw PackageError(.invalidOptions, "an external application is packaged alone")
        }
        let hw = try required(hwVersion, "--hw-version", default: 0xFFFF_FFFF)
        let sdReq = try required(sdReq, "--sd-req", default: [0xFFFE])
        let validations = [appBootValidation, sdBootValidation]
        if validations.contains(.ecdsaP256Sha256), signingKey == nil {
            throw PackageError(.invalidOptions, "VALIDATE_ECDSA_P256_SHA256 needs --key-file")
        }
        var plans: [Plan] = []
        if let softdevice, let bootloader {
            let blVersion = try required(bootloaderVersion, "--bootloader-version", default: 0xFFFF_FFFF)
            var plan = Plan(
                kind: .softdeviceBootloader, type: .softdeviceBootloader, image: softdevice.bytes + bootloader.bytes,
                bin: "sd_bl.bin", fwVersion: blVersion, sdReq: sdReq, validation: [sdBootValidation, .crc],
                signedImage: softdevice.bytes)
            plan.sdSize = UInt32(softdevice.bytes.count)
            plan.blSize = UInt32(bootloader.bytes.count)
            plans.append(plan)
        } else if let softdevice {
            var plan = Plan(
                kind: .softdevice, type: .softdevice, image: softdevice.bytes, bin: softdevice.stem + ".bin",
                fwVersion: 0xFFFF_FFFF, sdReq: sdReq, validation: [sdBootValidation], signedImage: softdevice.bytes)
            plan.sdSize = UInt32(softdevice.bytes.count)
            plans.append(plan)
        } else if let bootloader {
            let blVersion = try required(bootloaderVersion, "--bootloader-version", default: 0xFFFF_FFFF)
            var plan = Plan(
                kind: .bootloader, type: .bootloader, image: bootloader.bytes, bin: bootloader.stem + ".bin",
                fwVersion: blVersion, sdReq: sdReq, validation: [.crc], signedImage: bootloader.bytes)
            plan.blSize = UInt32(bootloader.bytes.count)
            plans.append(plan)
        }
        if let application {
            let appVersion = try required(applicationVersion, "--application-version", default: 0xFFFF_FFFF)
            var appSdReq = sdReq
            if softdevice != nil {
                guard let sdID, !sdID.isEmpty else {
                    throw PackageError(.invalidOptions, "--sd-id is required when the package holds a SoftDevice and an application")
                }
                appSdReq = sdID
            }
            var plan = Plan(
                kind: .application, type: externalApplication ? .externalApplication : .application, image: application.bytes,
                bin: application.stem + ".bin", fwVersion: appVersion, sdReq: appSdReq, validation: [appBootValidation],
                signedImage: application.bytes)
            plan.sdSize = 0
            plans.append(plan)
        }
        var files: [(name: String, bytes: [UInt8])] = []
        var manifestParts: [Manifest.Part] = []
        for plan in plans {
            let dat = String(plan.bin.dropLast(4)) + ".dat"
            guard !files.contains(where: { $0.name == plan.bin || $0.name == dat }) else {
                throw PackageError(.invalidInput, "two images would both be named \(plan.bin)")
            }
            files.append((plan.bin, plan.image))
            files.append((dat, try initPacket(for: plan, hwVersion: hw).encode()))
            var part = Manifest.Part(kind: plan.kind, binFile: plan.bin, datFile: dat)
            if plan.kind == .softdeviceBootloader {
                part.sdSize = plan.sdSize
                part.blSize = plan.blSize
            }
            manifestParts.append(part)
        }
        files.append(("manifest.json", Manifest(parts: manifestParts).encoded()))
        return files.sorted { $0.name < $1.name }
    }

    /// The zip archive bytes.
    public func archive() throws(PackageError) -> [UInt8] {
        try ArchiveWriter.archive(files())
    }

    private func required<T>(_ value: T?, _ option: String, default fallback: T) throws(PackageError) -> T {
        if let value { return value }
        if debugMode { return fallback }
        throw PackageError(.invalidOptions, "\(option) is required")
    }

    private func initPacket(for plan: Plan, hwVersion: UInt32) throws(PackageError) -> SecureInitPacket {
        var validations: [BootValidation] = []
        for type in plan.validation {
            if type == .ecdsaP256Sha256, let signingKey {
                validations.append(BootValidation(type: type, bytes: try NordicSignature.sign(plan.signedImage, with: signingKey)))
            } else {
                validations.append(BootValidation(type: type))
            }
        }
        let command = InitCommand(
            fwVersion: plan.fwVersion, hwVersion: hwVersion, sdReq: plan.sdReq, type: plan.type, sdSize: plan.sdSize,
            blSize: plan.blSize, appSize: plan.kind == .application ? UInt32(plan.image.count) : 0,
            hash: ImageHash(type: .sha256, bytes: Array(SHA256.hash(data: plan.image)).reversed()),
            isDebug: debugMode, bootValidation: validations)
        guard let signingKey else { return SecureInitPacket(command: command) }
        let unsigned = SecureInitPacket(command: command)
        return SecureInitPacket(command: command, signature: try NordicSignature.sign(unsigned.initCommandBytes, with: signingKey))
    }
}
