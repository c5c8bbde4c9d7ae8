import ArgumentParser
import MCUmgr

/// `bledfu smp params`: `mcumgr_params` (OS id 6): the device's SMP buffer size and count, which size `bledfu flash`'s
/// chunks (a request of at most buf_size bytes) and its window (buf_count − 1 in flight), and the bootloader
/// information (OS id 8) when the device answers it.
struct SMPParams: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "params", abstract: "Show the device's SMP buffer size and count (what uploads are sized by) and its bootloader.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let (parameters, bootloader, mode) = try await withSMPClient(options, device) { client throws(SMPError) in
            let parameters = try SMPParameters(body: try await client.send(.mcumgrParameters))
            // Bootloader information is optional (CONFIG_MCUMGR_GRP_OS_BOOTLOADER_INFO): ENOTSUP is no answer.
            let name = (try? await client.send(.bootloaderInfo())).map(SMPBootloaderInfo.init(body:))?.name
            let mode = (try? await client.send(.bootloaderInfo(query: "mode"))).map(SMPBootloaderInfo.init(body:))?.mode
            return (parameters, name, mode)
        }
        let window = max(1, parameters.bufferCount - 1)
        if options.json {
            var object: [String: any Sendable] = [
                "event": "params", "buf_size": parameters.bufferSize, "buf_count": parameters.bufferCount, "window": window,
            ]
            if let bootloader { object["bootloader"] = bootloader }
            if let mode { object["mode"] = mode }
            Console.json(object)
        } else {
            print("buf_size \(parameters.bufferSize)  buf_count \(parameters.bufferCount)  (uploads: requests of at most \(parameters.bufferSize) bytes, \(window) in flight)")
            if let bootloader { print("bootloader \(bootloader)" + (mode.map { "  mode \($0)" } ?? "")) }
        }
    }
}
