import ArgumentParser
import Batch
import BLECore
import BledfuKit
import DFUCore
import Foundation

/// `bledfu device reset ADDRESS`: a device left in its bootloader (a refused package, an interrupted update) back to
/// its application: Secure DFU Abort (SDK 15+), Legacy DFU Reset. A device already in its application is left alone.
struct DeviceReset: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset",
        abstract: "Bring a device that waits in its bootloader back to its application.",
        discussion: """
            ADDRESS is the application's address (the bootloader is then looked for where it advertises, e.g. \
            address + 1) or the bootloader's. Sends Secure DFU Abort (0C) or Legacy DFU Reset (06); the bootloader \
            resets and boots the application when it is valid. Then looks where the device went: exit 0 when it runs \
            its application again, \(ExitCodeRegistry.code("remote")) when it came back in its bootloader (no valid \
            application: flash a complete package), \(ExitCodeRegistry.code("updater-not-found")) when it did not \
            show up. Note: an interrupted upload starts again after a reset (SDK 15 keeps no progress by default).
            """)

    @OptionGroup var target: DeviceTargetOptions
    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let (updater, request) = (try target.updater(options), try target.request(options))
        let report: UpdaterExitReport
        do {
            report = try await updater.leaveUpdater(request)
        } catch {
            throw deviceFailure(error)
        }
        if options.json {
            Console.json(["event": "reset", "address": report.before.address, "back": report.backInApplication, "message": report.message])
        } else {
            print(report.message)
        }
    }
}
