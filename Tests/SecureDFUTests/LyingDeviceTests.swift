import ATT
import BLECore
import DFUPackage
import DFUProtocol
import DFUSimulator
import GATT
import TestDoubles
import Testing

@testable import SecureDFU

/// One upload through the whole stack (ATTClient, GATTClient, GATTDFUTransport, SecureDFUDriver) to a virtual
/// device whose link lies (`LyingBearer`), over an in-memory bearer pair. The device keeps the truth: its installed
/// image says whether the engine believed a lie.
struct LyingSession {
    let device: VirtualDevice
    let part: DFUPart
    let store = JournalRecorder()
    let journal = DFUJournal(deviceAddress: "C0:11:22:33:44:FF", packageSHA256: "lying")

    init() throws {
        var profile = try SimulatorFixture.profile()
        profile.installed.application = nil  // bootloader only: every connection reaches the DFU service
        device = VirtualDevice(profile: profile, clock: ContinuousClock())
        part = SimulatorFixture.part()
    }

    struct Outcome {
        var result: Result<Void, DFUEngineError>
        var mtu: Int
        var liesTold: Int
        var failure: DFUEngineError? { if case .failure(let error) = result { error } else { nil } }
        /// Success, or the device reset before its answer to the last Execute came out (`execute-unconfirmed`,
        /// after which bledfu looks at the device): the tests then check the device's image.
        var succeeded: Bool { failure == nil || failure?.code == .executeUnconfirmed }
    }

    /// One connection, one run. `lies` nil: an honest link. With `advanceOnSleep`, the driver's clock is moved
    /// past the checkpoint timeout as soon as the driver waits on it (only for lies after which no answer can come).
    func upload(lies: LiePlan?, advanceOnSleep: Bool = false) async throws -> Outcome {
        let (clientEnd, deviceEnd) = InMemoryBearer.makePair(capacity: 64)
        let liar = lies.map { LyingBearer(wrapping: deviceEnd, plan: $0) }
        let device = self.device
        let served: any ATTBearer = liar ?? deviceEnd
        let serving = Task { await device.serve(served) }
        let att = ATTClient(bearer: clientEnd)
        let mtu = try await att.exchangeMTU(247)
        let transport = try await GATTDFUTransport.open(client: GATTClient(att: att))
        // Short waits (the engine's retry waits, at most 1 s) pass at once; timeouts wait for the ticker.
        let clock = AutoPauseClock()
        let ticker = Task {
            guard advanceOnSleep else { return }
            await clock.waitForSleepers(1)
            clock.advance(by: .seconds(11))
        }
        // A policy that never pauses on the clock: time moves only by the engine's retry waits or the ticker.
        let driver = SecureDFUDriver(
            transport: transport, clock: clock, configuration: SecureDFUConfiguration(pacing: AdaptivePacing()),
            checkpoint: store.checkpoint)
        let stored = try await store.load(deviceAddress: journal.deviceAddress, packageSHA256: journal.packageSHA256)
        let result: Result<Void, DFUEngineError>
        do {
            try await driver.run(part: part, journal: stored ?? journal)
            result = .success(())
        } catch {
            result = .failure(error)
        }
        ticker.cancel()
        await att.close()
        await serving.value
        return Outcome(result: result, mtu: mtu, liesTold: liar?.liesTold ?? 0)
    }

    /// SHA-256 of the application the device installed, nil when none.
    func installedSHA() async -> String? { await device.state().installed.application?.sha256 }
    var expectedSHA: String { DFUSimulatorDigest.sha256Hex(part.image) }

    /// The invariant of every lie: the engine never reports success unless the device holds the right image, and
    /// whatever holds on the device is either nothing or the right image.
    func checkNoWrongImage(_ outcome: Outcome) async {
        let installed = await installedSHA()
        if outcome.succeeded { #expect(installed == expectedSHA, "success reported without the right image") }
        #expect(installed == nil || installed == expectedSHA, "a wrong image was installed")
    }

    /// After a lie ended a run, an honest rerun on a new connection completes: the device was not left unable to
    /// take the next attempt.
    func checkHonestRerunCompletes() async throws {
        let rerun = try await upload(lies: nil)
        #expect(rerun.succeeded, "honest rerun failed: \(String(describing: rerun.failure))")
        #expect(await installedSHA() == expectedSHA)
    }
}

@Suite(.timeLimit(.minutes(5))) struct LyingDeviceTests {
    func expectClearFailure(_ outcome: LyingSession.Outcome, _ codes: Set<DFUEngineError.Code>) {
        #expect(outcome.liesTold > 0)
        guard let failure = outcome.failure else {
            Issue.record("the engine did not stop")
            return
        }
        #expect(codes.contains(failure.code), "unexpected \(failure)")
        #expect(!failure.reason.isEmpty && !failure.reason.contains("\n"))
    }

    @Test func wrongOffsetEveryTimeStopsAsAProtocolViolation() async throws {
        let session = try LyingSession()
        let outcome = try await session.upload(lies: LiePlan([.wrongOffset]))
        expectClearFailure(outcome, [.protocolViolation])
        #expect(outcome.failure?.reason.contains("offset") == true, "\(String(describing: outcome.failure))")
        await session.checkNoWrongImage(outcome)
        #expect(await session.installedSHA() == nil)
        try await session.checkHonestRerunCompletes()
    }

    @Test func wrongCRCEveryTimeStopsWithACRCMismatch() async throws {
        let session = try LyingSession()
        let outcome = try await session.upload(lies: LiePlan([.wrongCRC]))
        // Three tries of the init packet's checksum, then a CRC mismatch naming the offset.
        expectClearFailure(outcome, [.crcMismatch])
        #expect(outcome.liesTold == 3)
        await session.checkNoWrongImage(outcome)
        #expect(await session.installedSHA() == nil)
        try await session.checkHonestRerunCompletes()
    }

    @Test func oneWrongCRCIsRepairedInTheSameRun() async throws {
        let session = try LyingSession()
        let outcome = try await session.upload(lies: LiePlan([.wrongCRC], limit: 1))
        #expect(outcome.liesTold == 1)
        #expect(outcome.succeeded, "\(String(describing: outcome.failure))")
        await session.checkNoWrongImage(outcome)
        #expect(await session.installedSHA() == session.expectedSHA)
    }

    /// Select Command, Create, Set PRN, Checksum, Execute, Set PRN and Select Data are answered honestly: the lies
    /// start in the data objects.
    static let dataPhase = 7

    @Test func wrongCRCsInTheDataObjectsAreRepairedThenGivenUpOn() async throws {
        let session = try LyingSession()
        let outcome = try await session.upload(lies: LiePlan([.wrongCRC], after: Self.dataPhase))
        // Every data checkpoint lies: the object is created again, the pacing slows down, then the engine gives up.
        expectClearFailure(outcome, [.gaveUp])
        #expect(outcome.liesTold >= 3)
        await session.checkNoWrongImage(outcome)
        #expect(await session.installedSHA() == nil)
        try await session.checkHonestRerunCompletes()
    }

    @Test func oneWrongCRCInADataObjectIsRepaired() async throws {
        let session = try LyingSession()
        let outcome = try await session.upload(lies: LiePlan([.wrongCRC], limit: 1, after: Self.dataPhase))
        #expect(outcome.liesTold == 1)
        #expect(outcome.succeeded, "\(String(describing: outcome.failure))")
        #expect(await session.installedSHA() == session.expectedSHA)
    }

    @Test func aWrongOffsetInADataObjectStopsAsAProtocolViolation() async throws {
        let session = try LyingSession()
        let outcome = try await session.upload(lies: LiePlan([.wrongOffset], limit: 1, after: Self.dataPhase))
        expectClearFailure(outcome, [.protocolViolation])
        await session.checkNoWrongImage(outcome)
        #expect(await session.installedSHA() == nil)
        try await session.checkHonestRerunCompletes()
    }

    @Test func duplicatedResponsesStopAsAProtocolViolation() async throws {
        let session = try LyingSession()
        let outcome = try await session.upload(lies: LiePlan([.duplicatedResponses]))
        // The second Select response arrives while Create is outstanding.
        expectClearFailure(outcome, [.protocolViolation])
        #expect(outcome.failure?.reason.contains("unexpected") == true, "\(String(describing: outcome.failure))")
        await session.checkNoWrongImage(outcome)
        #expect(await session.installedSHA() == nil)
        try await session.checkHonestRerunCompletes()
    }

    @Test func lateOutOfOrderResponsesStopAsAProtocolViolation() async throws {
        let session = try LyingSession()
        let outcome = try await session.upload(lies: LiePlan([.outOfOrderResponses]))
        expectClearFailure(outcome, [.protocolViolation])
        #expect(outcome.failure?.reason.contains("unexpected") == true, "\(String(describing: outcome.failure))")
        await session.checkNoWrongImage(outcome)
        #expect(await session.installedSHA() == nil)
        try await session.checkHonestRerunCompletes()
    }

    // oversize-pdu: OversizePDULieTests.

    @Test func responsesOnTheWrongHandleEndInATimeout() async throws {
        let session = try LyingSession()
        let outcome = try await session.upload(lies: LiePlan([.wrongHandle]), advanceOnSleep: true)
        expectClearFailure(outcome, [.timeout])
        await session.checkNoWrongImage(outcome)
        #expect(await session.installedSHA() == nil)
        try await session.checkHonestRerunCompletes()
    }

    @Test func anMTUBelow23IsRaisedTo23AndTheUploadCompletes() async throws {
        let session = try LyingSession()
        let outcome = try await session.upload(lies: LiePlan([.mtuBelow23]))
        #expect(outcome.liesTold == 1)
        #expect(outcome.mtu == 23)
        #expect(outcome.succeeded, "\(String(describing: outcome.failure))")
        await session.checkNoWrongImage(outcome)
        #expect(await session.installedSHA() == session.expectedSHA)
    }

    @Test func theEngineRefusesAnATTMTUBelow23() {
        var machine = SecureDFUStateMachine(part: SimulatorFixture.part())
        let actions = machine.handle(.started(mtu: 20))
        let failure = actions.compactMap { if case .failed(let error) = $0 { error } else { nil } }.first
        #expect(failure?.code == .protocolViolation)
        #expect(!actions.contains { if case .writeControlPoint = $0 { true } else { false } })
    }
}
