import BLECore
import BledfuTestSupport
import DFUCore
import DFUSimulator
import Foundation
import LegacyDFU
import Testing

@testable import BledfuKit

/// The virtual InfiniTime watch takes the fault plan's byte-count faults (the fault campaign draws them for it): a link lost in the middle of the image and a power loss each cost an attempt, and the update ends
/// with the image installed; the device's fault log says what fired.
@Suite(.timeLimit(.minutes(10))) struct LegacyWatchFaultTests {
    @Test(arguments: ["disconnect-after-bytes=6000", "power-loss-after-bytes=9000", "disconnect-after-bytes=300,disconnect-after-bytes=20000"])
    func aWatchFaultCostsAnAttempt(plan: String) async throws {
        let image = (0..<24_000).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 3) }
        let device = VirtualLegacyDevice(
            profile: LegacyKitFixture.profile(LegacyDeviceProfile.pineTime), faults: try FaultPlan(parsing: plan),
            clock: ContinuousClock())
        let request = LegacyKitFixture.request(try LegacyKitFixture.package(image: image), family: .legacy)
        let result = try await Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock()).update(request)
        let state = await device.state()
        #expect(state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(image))
        #expect(!state.faults.isEmpty, "\(plan): no fault fired")
        #expect(result.statistics.bytesResent > 0, "\(plan): \(result.statistics)")
    }
}
