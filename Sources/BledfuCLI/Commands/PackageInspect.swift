import ArgumentParser
import BLECore
import Crypto
import DFUPackage
import Foundation

/// `bledfu package inspect PKG`: what a package holds, part by part, in send order.
struct PackageInspect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Show a package's parts, versions, requirements, sizes, hashes and signature status.",
        discussion: "Lists every part; exits 0 when every check holds, else with the first failed check's code (30-39).")

    @Argument(
        help: "The DFU package (.zip), an MCUboot image (.bin, .hex) or an NCS dfu_application.zip.", completion: Completions.package)
    var package: String
    @Option(name: .long, help: "A PEM public key to check signatures with (repeatable).", completion: Completions.key)
    var key: [String] = []
    @Option(name: .long, help: "MCUboot: the slot size the images must fit (bytes, decimal or 0x hex).") var slotSize: String?
    @Flag(name: .long, help: "Print one JSON object instead of text.") var json = false

    func run() async throws {
        if PackageMCUboot.handles(package) {
            let slot = try slotSize.map { Int(try PackageCLI.parseInteger($0, option: "--slot-size")) }
            return try PackageMCUboot.inspect(package, keys: key, slotSize: slot, json: json)
        }
        let pkg = try PackageCLI.load(package)
        let keys = try PackageCLI.publicKeys(key)
        let report = pkg.verify(keys: keys)
        if json {
            Console.json(Self.jsonObject(pkg, report, path: package))
            return try PackageCLI.fail(on: report.errors)
        }
        let format = pkg.format == .secure ? "Secure DFU" : "Legacy DFU"
        var lines = ["package: \(package) (\(format), \(pkg.parts.count) image(s))"]
        if let version = pkg.manifest.dfuVersion { lines.append("dfu_version: \(version)") }
        for (index, (part, check)) in zip(pkg.parts, report.parts).enumerated() {
            lines.append("[\(index + 1)] \(part.kind): \(part.binFile) (\(part.image.count) bytes), \(part.datFile) (\(part.initPacketBytes.count) bytes)")
            lines.append(contentsOf: Self.describe(part, check).map { "    " + $0 })
        }
        for warning in pkg.warnings + report.warnings { lines.append("warning: \(warning)") }
        print(lines.joined(separator: "\n"))
        // A check that failed (a hash, a signature with the given keys) ends the listing with its exit code.
        try PackageCLI.fail(on: report.errors)
    }

    static func describe(_ part: PackagePart, _ check: PartVerification) -> [String] {
        var lines: [String] = []
        let sha = Array(SHA256.hash(data: part.image)).hexString
        switch part.initPacket {
        case .secure(let packet):
            let c = packet.command
            lines.append("type \(c.type?.description ?? "-"), fw_version \(c.fwVersion.map { "\($0) (\(PackageCLI.hex32($0)))" } ?? "-"), hw_version \(c.hwVersion.map(String.init) ?? "-")")
            lines.append("sd_req " + (c.sdReq.isEmpty ? "-" : c.sdReq.map(SoftDeviceNames.describe).joined(separator: ", ")))
            lines.append("sizes: sd \(c.sdSize.map(String.init) ?? "-"), bl \(c.blSize.map(String.init) ?? "-"), app \(c.appSize.map(String.init) ?? "-")")
            lines.append("debug \(c.isDebug.map(String.init) ?? "-"), boot validation " + (c.bootValidation.isEmpty ? "-" : c.bootValidation.map(\.type.description).joined(separator: ", ")))
        case .legacy(let packet):
            lines.append("legacy init packet (\(packet.layout.rawValue)), device_type \(packet.deviceType.map(String.init) ?? "-"), device_revision \(packet.deviceRevision.map(String.init) ?? "-"), application_version \(packet.applicationVersion.map(String.init) ?? "-")")
            lines.append("sd_req " + (packet.softdeviceReq.isEmpty ? "-" : packet.softdeviceReq.map { SoftDeviceNames.describe(UInt32($0)) }.joined(separator: ", ")))
        }
        lines.append("SHA-256 \(sha), CRC-32 \(PackageCLI.hex32(CRC32.checksum(part.image)))")
        lines.append("hash: \(check.hash); signature: \(check.signature)" + Self.bootSignatures(check, separator: "; "))
        return lines
    }

    /// "; boot validation signature valid with key 1" for the ECDSA boot validation entries, "" when there are none.
    static func bootSignatures(_ check: PartVerification, separator: String) -> String {
        guard !check.bootSignatures.isEmpty else { return "" }
        return separator + "boot validation signature " + check.bootSignatures.map(\.description).joined(separator: ", ")
    }

    static func jsonObject(_ pkg: FirmwarePackage, _ report: VerificationReport, path: String) -> [String: any Sendable] {
        var parts: [[String: any Sendable]] = []
        for (part, check) in zip(pkg.parts, report.parts) {
            var object: [String: any Sendable] = [
                "kind": part.kind.rawValue, "binFile": part.binFile, "datFile": part.datFile, "imageSize": part.image.count,
                "initPacketSize": part.initPacketBytes.count, "sha256": Array(SHA256.hash(data: part.image)).hexString,
                "crc32": Int(CRC32.checksum(part.image)), "hashStatus": check.hash.description,
                "signatureStatus": check.signature.description, "initPacket": part.initPacketBytes.hexString,
                "bootSignatureStatus": check.bootSignatures.map(\.description),
            ]
            switch part.initPacket {
            case .secure(let packet):
                let c = packet.command
                var command: [String: any Sendable] = [
                    "sdReq": c.sdReq.map { Int($0) }, "sdReqNames": c.sdReq.map(SoftDeviceNames.describe),
                    "bootValidation": c.bootValidation.map(\.type.description), "signed": packet.isSigned,
                ]
                if let v = c.type { command["type"] = v.description }
                if let v = c.fwVersion { command["fwVersion"] = Int(v) }
                if let v = c.hwVersion { command["hwVersion"] = Int(v) }
                if let v = c.sdSize { command["sdSize"] = Int(v) }
                if let v = c.blSize { command["blSize"] = Int(v) }
                if let v = c.appSize { command["appSize"] = Int(v) }
                if let v = c.isDebug { command["isDebug"] = v }
                if let v = c.hash { command["hash"] = v.bytes.hexString }
                object["initCommand"] = command
            case .legacy(let packet):
                var legacy: [String: any Sendable] = ["layout": packet.layout.rawValue, "sdReq": packet.softdeviceReq.map { Int($0) }]
                if let v = packet.deviceType { legacy["deviceType"] = Int(v) }
                if let v = packet.deviceRevision { legacy["deviceRevision"] = Int(v) }
                if let v = packet.applicationVersion { legacy["applicationVersion"] = Int(v) }
                if let v = packet.crc16 { legacy["crc16"] = Int(v) }
                if let v = packet.firmwareLength { legacy["firmwareLength"] = Int(v) }
                if let v = packet.sha256 { legacy["sha256"] = v.hexString }
                object["legacyInit"] = legacy
            }
            parts.append(object)
        }
        return [
            "package": path, "format": pkg.format.rawValue, "parts": parts, "warnings": pkg.warnings + report.warnings,
            "errors": report.errors.map(\.message), "valid": report.isValid,
        ]
    }
}
