import ArgumentParser
import DFUPackage
import Foundation

/// `bledfu package verify PKG --key K`: exit 0 only when every check holds.
struct PackageVerify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check a package before sending it: structure, hashes, sizes and (with --key) signatures.",
        discussion: "Exits 0 only when all checks pass; otherwise prints one line per failure and exits 30-39.")

    @Argument(
        help: "The DFU package (.zip), an MCUboot image (.bin, .hex) or an NCS dfu_application.zip.", completion: Completions.package)
    var package: String
    @Option(
        name: .long, help: "A PEM public key (or private key) the init packets or MCUboot images must verify with (repeatable).",
        completion: Completions.key)
    var key: [String] = []
    @Option(name: .long, help: "MCUboot: the slot size the images must fit (bytes, decimal or 0x hex).") var slotSize: String?
    @Flag(name: .long, help: "Print one JSON object instead of text.") var json = false

    func run() async throws {
        if PackageMCUboot.handles(package) {
            let slot = try slotSize.map { Int(try PackageCLI.parseInteger($0, option: "--slot-size")) }
            return try PackageMCUboot.verify(package, keys: key, slotSize: slot, json: json)
        }
        let pkg = try PackageCLI.load(package)
        let keys = try PackageCLI.publicKeys(key)
        let report = pkg.verify(keys: keys)
        if json {
            Console.json(PackageInspect.jsonObject(pkg, report, path: package))
        } else {
            for (part, check) in zip(pkg.parts, report.parts) {
                print("\(part.kind): hash \(check.hash), signature \(check.signature)" + PackageInspect.bootSignatures(check, separator: ", "))
            }
            for warning in pkg.warnings + report.warnings { Console.warning(warning) }
        }
        if report.errors.isEmpty, !json { print("OK: \(package)") }
        try PackageCLI.fail(on: report.errors)
    }
}
