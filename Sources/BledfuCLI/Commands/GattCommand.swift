import ArgumentParser
import Batch
import BLECore
import GATT

/// `bledfu gatt`: talk GATT to one device.
struct GattCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatt",
        abstract: "Connect to a device and list, read, write or subscribe to its GATT attributes.",
        subcommands: [GattList.self, GattRead.self, GattWrite.self, GattSubscribe.self],
        defaultSubcommand: GattList.self
    )
}

/// Resolves a `0xNNNN` handle or a characteristic UUID to a value handle.
func resolveValueHandle(_ target: String, _ gatt: GATTClient) async throws -> (UInt16, GATTCharacteristic?) {
    if target.lowercased().hasPrefix("0x") { return (try parseHandle(target), nil) }
    guard let uuid = BluetoothUUID(target) else {
        throw ValidationError("'\(target)' is neither a handle (0x000E) nor a characteristic UUID (2A00, 8EC90001-...)")
    }
    let services: [GATTService]
    do { services = try await gatt.discoverAll() } catch { throw CLIError(error) }
    for service in services {
        if let characteristic = service.characteristic(uuid) { return (characteristic.valueHandle, characteristic) }
    }
    throw CLIError("the device has no characteristic \(uuid)", exitCode: BledfuExit.protocolError)
}

/// Runs `body` on an open connection and closes it on every path.
func withConnection<T>(
    _ options: GlobalOptions, _ device: DeviceOptions, _ body: (OpenConnection) async throws -> T
) async throws -> T {
    let connection = try await openConnection(options, device)
    do {
        let result = try await body(connection)
        await connection.close()
        return result
    } catch let error as ATTClientError {
        await connection.close()
        throw CLIError(error)
    } catch {
        await connection.close()
        throw error
    }
}
