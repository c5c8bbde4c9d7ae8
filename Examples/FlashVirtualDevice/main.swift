// Flashes a device on a virtual radio with BledfuKit's public API (docs/library.md).
// Usage: FlashVirtualDevice RADIO_DIRECTORY PACKAGE.zip DEVICE_ADDRESS
import BledfuKit
import Foundation
import VirtualRadio

let arguments = CommandLine.arguments
guard arguments.count == 4, let address = BluetoothAddress(arguments[3]) else {
    print("usage: FlashVirtualDevice RADIO_DIRECTORY PACKAGE.zip DEVICE_ADDRESS")
    exit(64)
}
let updater = Updater(adapter: VirtualRadio(directory: arguments[1]))
let request = try UpdateRequest(
    packageAt: URL(fileURLWithPath: arguments[2]), target: .address(PeerAddress(address, type: .random)))
let run = updater.start(request)
for await event in run {
    switch event {
    case .progress(let progress): print("part \(progress.part)/\(progress.parts): \(progress.percent)%")
    case .jumping, .updaterReady, .partCompleted, .completed: print(event)
    default: break
    }
}
do {
    let result = try await run.result()
    print("done: \(result.statistics.bytesSent) bytes in \(result.statistics.seconds) s")
} catch {
    print("failed: \(error)")  // a DFUError: error.code names the failure (DFUError.Code)
    exit(1)
}
