import ArgumentParser
import Batch
import BLECore
import BledfuKit
import DFUCore
import Foundation

/// `bledfu device info ADDRESS [--package PKG]`: the device's family and mode, what it tells (Device Information,
/// the family's versions) and, with a package, what an update with it would do. Changes nothing on the device.
struct DeviceInfo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show a device's family, mode, versions and model, and what an update with a package would do.",
        discussion: """
            Connects, recognises the DFU family and mode as `flash` does, reads the Device Information and what the \
            family tells (SMP: the image list, whether MCUboot refuses downgrades). With --package it checks the \
            package's requirements against what the device tells, as `flash` does before the jump, and exits with \
            \(ExitCodeRegistry.code("device-mismatch")) when the device would refuse it. Sends nothing that changes \
            the device.
            """)

    @OptionGroup var target: DeviceTargetOptions
    @OptionGroup var options: GlobalOptions
    @Option(name: .long, help: ArgumentHelp("A package to assess an update with.", valueName: "file"))
    var package: String?
    @Option(name: .long, help: "A PEM public key the package's signatures must verify with (repeatable).")
    var key: [String] = []

    func run() async throws {
        var request = try target.request(options)
        if let package {
            var settings = FlashSettings(
                packagePath: package, keyPaths: key, stateDirectory: URL(fileURLWithPath: "/"), target: .name(""),
                adapter: options.adapter)
            settings.family = target.family
            let update = try settings.request()
            request.package = update.package
            request.options = update.options
        }
        let updater = try target.updater(options)
        let inspection: DeviceInspection
        do {
            inspection = try await updater.inspect(request)
        } catch {
            throw deviceFailure(error)
        }
        if options.json {
            Console.jsonLine(inspection)
        } else {
            print(Self.render(inspection))
        }
        if !inspection.assessment.refusals.isEmpty {
            throw CLIError(
                "the device would refuse \(inspection.package ?? "the package"): "
                    + inspection.assessment.refusals.joined(separator: "; "),
                exitCode: ExitCodeRegistry.code("device-mismatch"))
        }
    }

    /// Lines for people.
    static func render(_ inspection: DeviceInspection) -> String {
        var lines: [String] = []
        let family = inspection.familyName ?? "no known DFU family"
        let mode: String
        switch inspection.mode {
        case .application?: mode = "runs its application (it can jump into its bootloader)"
        case .applicationWithoutEntry?: mode = "runs its application (no way into its bootloader)"
        case .updater?:
            mode = inspection.runsApplication ? "runs its application, which takes images itself" : "waits in its bootloader"
        case nil: mode = "is no device bledfu can update"
        }
        lines.append("\(inspection.address): \(family); the device \(mode)")
        if let note = inspection.note { lines.append("  \(note)") }
        lines.append("  \(inspection.information.summary)")
        if let name = inspection.information.name { lines.append("  name: \(name)") }
        for fact in inspection.assessment.facts { lines.append("  \(fact)") }
        let assessment = inspection.assessment
        if let package = inspection.package {
            lines.append("  with \(package): " + (assessment.effect ?? "no version to compare"))
            if !assessment.refusals.isEmpty { lines.append("    refused: " + assessment.refusals.joined(separator: "; ")) }
            if !assessment.checked.isEmpty { lines.append("    checked: " + assessment.checked.joined(separator: "; ")) }
            if !assessment.notChecked.isEmpty { lines.append("    not checked: " + assessment.notChecked.joined(separator: "; ")) }
        }
        if !inspection.runsApplication {
            lines.append("  `bledfu device reset \(inspection.address)` brings it back to its application")
        }
        return lines.joined(separator: "\n")
    }
}
