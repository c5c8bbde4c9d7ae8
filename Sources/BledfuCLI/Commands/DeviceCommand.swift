import ArgumentParser
import Batch
import BLECore
import BledfuKit
import DFUCore
import Foundation

/// `bledfu device`: look at one device (`info`), or bring one left in its bootloader back (`reset`).
struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract: "Look at a device (family, mode, versions, what an update would do) or bring it back from its bootloader.",
        subcommands: [DeviceInfo.self, DeviceReset.self],
        defaultSubcommand: DeviceInfo.self
    )
}

/// The options `device info` and `device reset` share.
struct DeviceTargetOptions: ParsableArguments {
    @Argument(help: "The device address (C0:FF:EE:00:00:01): its application's, or its bootloader's.") var address: String

    @Option(name: .long, help: ArgumentHelp("The device's address type: public or random.", valueName: "type"))
    var addressType: AddressType = .random

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The DFU family: \(DefaultFamilies.all.map(\.id.rawValue).joined(separator: ", ")) or auto.",
            valueName: "family"))
    var family = "auto"

    func validate() throws {
        guard BluetoothAddress(address) != nil else {
            throw ValidationError("bad device address '\(address)': expected six hex bytes like C0:FF:EE:00:00:01")
        }
        guard !family.isEmpty else { throw ValidationError("--family must name a family or be auto") }
    }

    /// The library's request (no package).
    func request(_ global: GlobalOptions) throws -> InspectionRequest {
        let address = try parseAddress(address)
        return InspectionRequest(
            target: .address(PeerAddress(address, type: addressType)), family: family == "auto" ? nil : DFUFamilyID(family),
            scanTimeout: global.timeoutDuration, connectTimeout: global.timeoutDuration)
    }

    func updater(_ global: GlobalOptions) throws -> Updater {
        Updater(adapter: try makeAdapter(global), clock: ContinuousClock())
    }
}

/// An inspection's error as the CLI ends with it.
func deviceFailure(_ error: DFUError) -> CLIError {
    CLIError(error.message, exitCode: FlashExit.code(for: error))
}
