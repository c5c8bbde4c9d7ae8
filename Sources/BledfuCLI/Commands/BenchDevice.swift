import Batch
import Bench
import DFUPackage
import Foundation
import MCUbootImage

/// `bledfu bench --device ADDR --package ZIP`: the `Bench` module's ``DeviceBench`` (a `bledfu flash` child per mode
/// and repetition) with this executable and the package's image bytes.
extension BenchModes {
    func runDevice(address: String, package: String) async throws -> [BenchRun] {
        let bench = DeviceBench(
            executable: Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0]), address: address,
            package: package, imageBytes: try Self.imageBytes(package), adapter: adapter, modes: deviceModes(package),
            repetitions: self.repeat)
        do throws(BenchError) {
            return try await bench.run { emit($0) }
        } catch {
            throw CLIError(error)
        }
    }

    /// Image bytes of a Secure DFU zip or an MCUboot image / NCS zip.
    static func imageBytes(_ path: String) throws -> Int {
        if let bytes = FileManager.default.contents(atPath: path).map(Array.init), MCUbootPackage.looksLikeMCUboot(bytes) {
            do {
                return try MCUbootPackage(bytes: bytes, name: path).parts.reduce(0) { $0 + $1.image.bytes.count }
            } catch {
                throw CLIError(error.message, exitCode: BledfuExit.packageInvalid)
            }
        }
        return try PackageCLI.loadForFlash(path).parts.reduce(0) { $0 + $1.image.count }
    }
}
