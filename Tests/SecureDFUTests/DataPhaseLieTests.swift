import DFUSimulator
import Testing

@testable import SecureDFU

/// Lies that start in the data objects (after the init packet was executed), where a stale or repeated checksum
/// answer could pass for a fresh one. Through the whole stack (`LyingSession`); every test checks that no wrong
/// image is installed, that no success is reported without the right image, and that an honest rerun completes.
@Suite(.timeLimit(.minutes(5))) struct DataPhaseLieTests {
    /// Honest answers before the lies: Select Command, Create, Set PRN, Checksum, Execute, Set PRN, Select Data.
    static let dataPhase = LyingDeviceTests.dataPhase

    func expectOutcome(
        _ session: LyingSession, _ lies: LiePlan, _ expected: Set<DFUEngineError.Code>
    ) async throws -> LyingSession.Outcome {
        let outcome = try await session.upload(lies: lies)
        #expect(outcome.liesTold > 0)
        let failure = try #require(outcome.failure, "the engine did not stop")
        #expect(expected.contains(failure.code), "unexpected \(failure)")
        #expect(!failure.reason.isEmpty && !failure.reason.contains("\n"))
        await session.checkNoWrongImage(outcome)
        #expect(await session.installedSHA() == nil)
        try await session.checkHonestRerunCompletes()
        return outcome
    }

    @Test func duplicatedResponsesInTheDataObjectsStopAsAProtocolViolation() async throws {
        let outcome = try await expectOutcome(
            try LyingSession(), LiePlan([.duplicatedResponses], after: Self.dataPhase), [.protocolViolation])
        #expect(outcome.failure?.reason.contains("unexpected") == true, "\(String(describing: outcome.failure))")
    }

    @Test func oneDuplicatedResponseInTheDataObjectsStops() async throws {
        let outcome = try await expectOutcome(
            try LyingSession(), LiePlan([.duplicatedResponses], limit: 1, after: Self.dataPhase), [.protocolViolation])
        #expect(outcome.liesTold == 1)
    }

    @Test func lateResponsesInTheDataObjectsStopAsAProtocolViolation() async throws {
        let outcome = try await expectOutcome(
            try LyingSession(), LiePlan([.outOfOrderResponses], after: Self.dataPhase), [.protocolViolation])
        #expect(outcome.failure?.reason.contains("unexpected") == true, "\(String(describing: outcome.failure))")
    }
}
