import DFUSimulator
import MCUbootImage
import MCUmgr
import Testing

/// Devices that lie end in a clear error, never in a confirmed wrong image.
@Suite(.timeLimit(.minutes(5))) struct SMPLyingDeviceTests {
    static let cases: [(SMPDeviceLie, SMPError.Code)] = [
        (.offsetBackwards, .protocolViolation),
        (.offsetPastEnd, .protocolViolation),
        (.wrongSequence, .protocolViolation),
        (.wrongReturnCode, .remote),
        (.wrongCommand, .protocolViolation),
        (.corruptImage, .reverted),
    ]

    @Test(arguments: cases)
    func liesEndInAClearError(_ lie: SMPDeviceLie, _ expected: SMPError.Code) async throws {
        let bench = SMPTestBench(faults: SMPFaults(lie: lie, lieAfterBytes: 12_000))
        let (_, image) = try SMPTestBench.image(size: 40_000, seed: 21)
        let before = await bench.device.imageState().active()
        do {
            _ = try await SMPTestBench.updater(bench).run([image])
            Issue.record("a device lying with \(lie) was updated")
        } catch {
            #expect(error.code == expected, "\(lie): \(error)")
            #expect(!error.reason.isEmpty)
        }
        // Never a confirmed wrong image: the device runs its old image, or the new one only if it is byte-exact.
        let active = try #require(await bench.device.imageState().active())
        #expect(active.hash == before?.hash)
        #expect(active.confirmed)
    }
}
