import ArgumentParser
import DFUPackage
import Foundation

/// `bledfu package create`: nrfutil 6.1.7 `pkg generate`-compatible package creation (docs/packages.md).
struct PackageCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create a Secure DFU package (as `nrfutil pkg generate`), a Legacy DFU package or a signed MCUboot image.",
        discussion: """
            Images may be .hex (MBR below 0x1000 and UICR are dropped, gaps filled with 0xFF) or .bin. A SoftDevice \
            and a bootloader are merged into sd_bl.bin. Supported: APP, BL, SD, SD+BL, SD+BL+APP, SD+APP (not BL+APP).
            With --dfu-ver (0.5, 0.6, 0.7, 0.8) it makes a Legacy DFU package instead, as nrfutil 0.5 `dfu genpkg` \
            does: --dev-type, --dev-revision, --application-version and --sd-req fill the init packet; --key-file makes \
            it 0.8 (signed).
            With --mcuboot FIRMWARE (.bin or .hex) and --mcuboot-version it signs an MCUboot image instead, as \
            `imgtool sign --pad-header` does (RSA-2048/3072, ECDSA P-256 or Ed25519 --key-file; none: hash only); the \
            output is .bin, or .hex at the input hex's address.
            """)

    @Option(name: .long, help: "The application firmware (.hex or .bin).", completion: Completions.firmware) var application: String?
    @Option(name: .long, help: "The application version (integer).") var applicationVersion: String?
    @Option(name: .long, help: "The application version as MAJOR.MINOR.PATCH (stored as MAJOR*10000+MINOR*100+PATCH).")
    var applicationVersionString: String?
    @Option(name: .long, help: "The bootloader firmware (.hex or .bin).", completion: Completions.firmware) var bootloader: String?
    @Option(name: .long, help: "The bootloader version (integer).") var bootloaderVersion: String?
    @Option(name: .long, help: "The SoftDevice firmware (.hex or .bin).", completion: Completions.firmware) var softdevice: String?
    @Option(name: .long, help: "The hardware version (e.g. 52).") var hwVersion: String?
    @Option(name: .long, help: "Required SoftDevice FWIDs, comma-separated (e.g. 0xB7,0x101; 0xFFFE = any).") var sdReq: String?
    @Option(name: .long, help: "The SoftDevice FWID the application requires after a SoftDevice update (SD+APP).")
    var sdId: String?
    @Option(name: .long, help: "PEM private key to sign the init packets with (nrfutil keys generate).", completion: Completions.key)
    var keyFile: String?
    @Flag(name: .long, help: "Debug mode: is_debug set; hw/app/bl versions default to 0xFFFFFFFF and sd_req to 0xFFFE.")
    var debugMode = false
    @Flag(name: .long, help: "Package the application as EXTERNAL_APPLICATION.") var externalApp = false
    @Option(name: .long, help: "NO_VALIDATION, VALIDATE_GENERATED_CRC (default), VALIDATE_GENERATED_SHA256 or VALIDATE_ECDSA_P256_SHA256.")
    var appBootValidation: String?
    @Option(name: .long, help: "Boot validation for the SoftDevice (same values as --app-boot-validation).")
    var sdBootValidation: String?
    @Option(name: .long, help: "Legacy DFU package with this init packet version (nrfutil 0.5: 0.5, 0.6, 0.7 or 0.8).")
    var dfuVer: Double?
    @Option(name: .long, help: "Legacy: the device type (default 0xFFFF).") var devType: String?
    @Option(name: .long, help: "Legacy: the device revision (default 0xFFFF).") var devRevision: String?
    @Option(name: .long, help: "MCUboot: the firmware to sign (.bin or .hex) into an MCUboot image.", completion: Completions.firmware)
    var mcuboot: String?
    @Option(name: .long, help: "MCUboot: the image version, MAJOR.MINOR.REVISION[+BUILD].") var mcubootVersion: String?
    @Option(name: .long, help: "MCUboot: the header size (default 0x200).") var headerSize: String?
    @Option(name: .long, help: "MCUboot: the slot size the signed image must fit.") var slotSize: String?
    @Option(name: .long, help: "MCUboot: a security counter (protected SEC_CNT TLV).") var securityCounter: String?
    @Argument(help: "The package to write (.zip), or the MCUboot image (.bin, .hex).", completion: Completions.package) var output: String

    func validate() throws {
        for value in [appBootValidation, sdBootValidation].compactMap(\.self) where ValidationType(name: value) == nil {
            throw ValidationError("'\(value)' is not a boot validation type (NO_VALIDATION, VALIDATE_GENERATED_CRC, VALIDATE_GENERATED_SHA256, VALIDATE_ECDSA_P256_SHA256)")
        }
        if applicationVersion != nil, applicationVersionString != nil {
            throw ValidationError("use either --application-version or --application-version-string")
        }
        if let dfuVer, LegacyInitPacket.Layout(dfuVersion: dfuVer) == nil {
            throw ValidationError("--dfu-ver must be 0.5, 0.6, 0.7 or 0.8")
        }
        if dfuVer == nil, devType != nil || devRevision != nil {
            throw ValidationError("--dev-type and --dev-revision make a Legacy package: add --dfu-ver 0.5")
        }
        if dfuVer != nil, appBootValidation != nil || sdBootValidation != nil {
            throw ValidationError("boot validation applies to Secure packages only, not with --dfu-ver")
        }
    }

    func run() async throws {
        if let mcuboot {
            guard let mcubootVersion else { throw ValidationError("--mcuboot needs --mcuboot-version") }
            return try PackageMCUboot.create(
                firmware: mcuboot, version: mcubootVersion, keyFile: keyFile,
                headerSize: Int(try headerSize.map { try PackageCLI.parseInteger($0, option: "--header-size") } ?? 0x200),
                slotSize: try slotSize.map { Int(try PackageCLI.parseInteger($0, option: "--slot-size")) },
                securityCounter: try securityCounter.map { try PackageCLI.parseInteger($0, option: "--security-counter") },
                output: output)
        }
        var builder = PackageBuilder()
        do {
            builder.application = try application.map { path throws(PackageError) in try PackageBuilder.Image.load(URL(fileURLWithPath: path)) }
            builder.bootloader = try bootloader.map { path throws(PackageError) in try PackageBuilder.Image.load(URL(fileURLWithPath: path)) }
            builder.softdevice = try softdevice.map { path throws(PackageError) in try PackageBuilder.Image.load(URL(fileURLWithPath: path)) }
            if let applicationVersionString {
                builder.applicationVersion = try PackageBuilder.version(string: applicationVersionString)
            }
            if let keyFile {
                builder.signingKey = try PackageKeys.privateKey(pem: try PackageKeys.readPEM(URL(fileURLWithPath: keyFile)), name: keyFile)
            }
        } catch {
            throw PackageCLI.cliError(error)
        }
        if let applicationVersion { builder.applicationVersion = try PackageCLI.parseInteger(applicationVersion, option: "--application-version") }
        if let bootloaderVersion { builder.bootloaderVersion = try PackageCLI.parseInteger(bootloaderVersion, option: "--bootloader-version") }
        if let hwVersion { builder.hwVersion = try PackageCLI.parseInteger(hwVersion, option: "--hw-version") }
        if let sdReq { builder.sdReq = try PackageCLI.parseIntegers(sdReq, option: "--sd-req") }
        if let sdId { builder.sdID = try PackageCLI.parseIntegers(sdId, option: "--sd-id") }
        builder.debugMode = debugMode
        builder.externalApplication = externalApp
        builder.appBootValidation = appBootValidation.flatMap(ValidationType.init(name:)) ?? .crc
        builder.sdBootValidation = sdBootValidation.flatMap(ValidationType.init(name:)) ?? .crc
        if let dfuVer, let layout = LegacyInitPacket.Layout(dfuVersion: dfuVer) {
            var legacy = LegacyOptions(layout: layout)
            if let devType { legacy.deviceType = try Self.uint16(devType, option: "--dev-type") }
            if let devRevision { legacy.deviceRevision = try Self.uint16(devRevision, option: "--dev-revision") }
            if keyFile != nil, layout != .v08 { print("Key file was given, setting DFU version to 0.8") }
            builder.legacy = legacy
        }
        let archive: [UInt8]
        do {
            archive = try builder.archive()
        } catch {
            throw PackageCLI.cliError(error)
        }
        try PackageCLI.write(archive, to: output)
        print("created \(output) (\(archive.count) bytes)")
    }

    private static func uint16(_ text: String, option: String) throws -> UInt16 {
        let value = try PackageCLI.parseInteger(text, option: option)
        guard let narrow = UInt16(exactly: value) else { throw ValidationError("\(option): \(text) does not fit 16 bits") }
        return narrow
    }
}
