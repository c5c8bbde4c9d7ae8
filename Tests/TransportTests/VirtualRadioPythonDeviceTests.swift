import BLECore
import Foundation
import LinuxIO
import Testing
import VirtualRadio

/// Drives tools/example-virtual-device.py (written against docs/virtual-radio.md only) with raw ATT PDUs.
@Suite(.timeLimit(.minutes(5))) struct VirtualRadioPythonDeviceTests {
    static let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("tools/example-virtual-device.py").path
    static let isCI = ProcessInfo.processInfo.environment["CI"] == "true"

    /// 8e7f0001-4b5d-4e2a-9c3b-1d0f6a2b3c4d, little-endian as on the wire.
    static let serviceUUIDLE: [UInt8] = [
        0x4D, 0x3C, 0x2B, 0x6A, 0x0F, 0x1D, 0x3B, 0x9C, 0x2A, 0x4E, 0x5D, 0x4B, 0x01, 0x00, 0x7F, 0x8E,
    ]

    @Test(.enabled(if: python != nil || isCI, "python3 is not installed"))
    func readWriteAndNotify() async throws {
        let python = try #require(VirtualRadioPythonDeviceTests.python, "python3 is required in CI")
        let radio = makeRadioDirectory()
        defer { try? FileManager.default.removeItem(atPath: radio) }
        let address = try #require(BluetoothAddress("C0:FF:EE:00:00:42"))
        let device = try ChildProcess.spawn(
            python, arguments: [
                VirtualRadioPythonDeviceTests.script, "--radio", radio, "--address", address.description, "--name", "PyDevice",
            ], ownProcessGroup: false)
        // SIGTERM, without waiting here (a `defer` cannot await, and a blocking wait would hold a thread of the
        // cooperative pool): ChildProcess reaps the child when it goes.
        defer { device.signal(SIGTERM) }

        // Scanning finds the device once it advertises (the scan ends at the first match).
        let adapter = VirtualRadio(directory: radio)
        var found: Advertisement?
        for try await advertisement in adapter.scan(filter: ScanFilter(namePrefix: "PyDev"), duration: .seconds(10)) {
            found = advertisement
            break
        }
        let advertisement = try #require(found, "the Python device never advertised")
        #expect(advertisement.peer == PeerAddress(address, type: .random))
        #expect(advertisement.parsed.serviceUUIDs.first.map { $0.littleEndian128 } == VirtualRadioPythonDeviceTests.serviceUUIDLE)

        let link = try await adapter.connect(to: advertisement.peer, options: ConnectOptions(timeout: .seconds(5)))
        func exchange(_ request: [UInt8]) async throws -> [UInt8] {
            try await link.send(request)
            return try await link.receive()
        }
        // Exchange MTU Request (client Rx 517) -> Response (server Rx 247).
        #expect(try await exchange([0x02, 0x05, 0x02]) == [0x03, 0xF7, 0x00])
        // Read By Group Type (0x0001-0xFFFF, Primary Service) -> one 20-byte entry: handles 1-4, the UUID.
        #expect(
            try await exchange([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28])
                == [0x11, 0x14, 0x01, 0x00, 0x04, 0x00] + VirtualRadioPythonDeviceTests.serviceUUIDLE)
        // Read By Type (Characteristic) -> declaration 0x0002: properties 0x1E, value handle 0x0003.
        let characteristic = try await exchange([0x08, 0x01, 0x00, 0x04, 0x00, 0x03, 0x28])
        #expect(Array(characteristic.prefix(7)) == [0x09, 0x15, 0x02, 0x00, 0x1E, 0x03, 0x00])
        // Find Information (0x0004) -> format 1, handle 0x0004 = CCCD (0x2902).
        #expect(try await exchange([0x04, 0x04, 0x00, 0x04, 0x00]) == [0x05, 0x01, 0x04, 0x00, 0x02, 0x29])
        // Read Request 0x0003 -> the name.
        #expect(try await exchange([0x0A, 0x03, 0x00]) == [0x0B] + Array("PyDevice".utf8))
        // Enable notifications (Write Request to the CCCD) -> Write Response.
        #expect(try await exchange([0x12, 0x04, 0x00, 0x01, 0x00]) == [0x13])
        // Write Request to the value -> Write Response, then a notification carrying the new value.
        #expect(try await exchange([0x12, 0x03, 0x00, 0x68, 0x69]) == [0x13])
        #expect(try await link.receive() == [0x1B, 0x03, 0x00, 0x68, 0x69])
        // Write Command: no response, only the notification.
        try await link.send([0x52, 0x03, 0x00, 0x21])
        #expect(try await link.receive() == [0x1B, 0x03, 0x00, 0x21])
        #expect(try await exchange([0x0A, 0x03, 0x00]) == [0x0B, 0x21])
        // Unknown request -> Error Response, Request Not Supported.
        #expect(try await exchange([0x20]) == [0x01, 0x20, 0x00, 0x00, 0x06])
        await link.close()
    }
}
