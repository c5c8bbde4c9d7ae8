import ArgumentParser
import DFUPackage
import Foundation

/// `bledfu package create`: nrfutil 6.1.7 `pkg generate`-compatible package creation (docs/packages.md).
struct PackageCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create a Secure DFU package (same options and format as `nrfutil pkg generate`).",
        discussion: """
            Images may be .hex (MBR below 0x1000 and UICR are dropped, gaps filled with 0xFF) or .bin. A SoftDevice \
            and a bootloader are merged into sd_bl.bin. Supported: APP, BL, SD, SD+BL, SD+BL+APP, SD+APP (not BL+APP).
            """)

    @Option(name: .long, help: "The application firmware (.hex or .bin).") var application: String?
    @Option(name: .long, help: "The application version (integer).") var applicationVersion: String?
    @Option(name: .long, help: "The application version as MAJOR.MINOR.PATCH (stored as MAJOR*10000+MINOR*100+PATCH).")
    var applicationVersionString: String?
    @Option(name: .long, help: "The bootloader firmware (.hex or .bin).") var bootloader: String?
    @Option(name: .long, help: "The bootloader version (integer).") var bootloaderVersion: String?
    @Option(name: .long, help: "The SoftDevice firmware (.hex or .bin).") var softdevice: String?
    @Option(name: .long, help: "The hardware version (e.g. 52).") var hwVersion: String?
    @Option(name: .long, help: "Required SoftDevice FWIDs, comma-separated (e.g. 0xB7,0x101; 0xFFFE = any).") var sdReq: String?
    @Option(name: .long, help: "The SoftDevice FWID the application requires after a SoftDevice update (SD+APP).")
    var sdId: String?
    @Option(name: .long, help: "PEM private key to sign the init packets with (nrfutil keys generate).") var keyFile: String?
    @Flag(name: .long, help: "Debug mode: is_debug set; hw/app/bl versions default to 0xFFFFFFFF and sd_req to 0xFFFE.")
    var debugMode = false
    @Flag(name: .long, help: "Package the application as EXTERNAL_APPLICATION.") var externalApp = false
    @Option(name: .long, help: "NO_VALIDATION, VALIDATE_GENERATED_CRC (default), VALIDATE_GENERATED_SHA256 or VALIDATE_ECDSA_P256_SHA256.")
    var appBootValidation: String = "VALIDATE_GENERATED_CRC"
    @Option(name: .long, help: "Boot validation for the SoftDevice (same values as --app-boot-validation).")
    var sdBootValidation: String = "VALIDATE_GENERATED_CRC"
    @Argument(help: "The package to write (.zip).") var output: String

    func validate() throws {
        for value in [appBootValidation, sdBootValidation] where ValidationType(name: value) == nil {
            throw ValidationError("'\(value)' is not a boot validation type (NO_VALIDATION, VALIDATE_GENERATED_CRC, VALIDATE_GENERATED_SHA256, VALIDATE_ECDSA_P256_SHA256)")
        }
        if applicationVersion != nil, applicationVersionString != nil {
            throw ValidationError("use either --application-version or --application-version-string")
        }
    }

    func run() async throws {
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
        builder.appBootValidation = ValidationType(name: appBootValidation) ?? .crc
        builder.sdBootValidation = ValidationType(name: sdBootValidation) ?? .crc
        let archive: [UInt8]
        do {
            archive = try builder.archive()
        } catch {
            throw PackageCLI.cliError(error)
        }
        try PackageCLI.write(archive, to: output)
        print("created \(output) (\(archive.count) bytes)")
    }
}
