import BLECore
import Foundation
import LinuxIO
import Testing
import VirtualRadio

/// Issue 22: a virtual device advertises only while no central is connected (`nrf_dfu_ble.c` restarts advertising on
/// `BLE_GAP_EVT_DISCONNECTED`; a connectable advertiser stops when a central connects), so no host can find a stale
/// advertisement during a connection or right after the jump.
@Suite(.serialized, .timeLimit(.minutes(10))) struct SimulatorAdvertisingTests {
    /// Waits (bounded, generously: 30 s, without holding a thread) until `condition` holds.
    func eventually(_ condition: () -> Bool) async -> Bool {
        await OffPool.poll(timeout: .seconds(30)) { condition() }
    }

    @Test func noAdvertisementWhileConnectedAndBackAfter() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let simulator = try await FlashSimulator(directory: directory, speedup: 1000)
        defer { simulator.stop() }
        let address = try #require(BluetoothAddress(FlashFixture.device))
        let advertisement = simulator.radio + "/" + AdvertisementFile.advertisementName(address)
        #expect(FileManager.default.fileExists(atPath: advertisement))
        let radio = VirtualRadio(directory: simulator.radio)
        let link = try await radio.connect(to: PeerAddress(address, type: .random), options: ConnectOptions())
        // Exchange MTU: the device has accepted the connection once it answers.
        try await link.send([0x02, 0xF7, 0x00])
        #expect(try await link.receive() == [0x03, 0xF7, 0x00])
        #expect(await eventually { !FileManager.default.fileExists(atPath: advertisement) }, "advertising while connected")
        await link.close()
        #expect(await eventually { FileManager.default.fileExists(atPath: advertisement) }, "not advertising after the link")
    }
}
