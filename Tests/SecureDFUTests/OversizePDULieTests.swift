import ATT
import DFUProtocol
import DFUSimulator
import GATT
import TestDoubles
import Testing

@testable import SecureDFU

/// The `oversize-pdu` lie through the whole stack (`LyingSession`: ATTClient, GATTClient, GATTDFUTransport,
/// SecureDFUDriver, a `VirtualDevice` behind a `LyingBearer`): the device pads its Control Point notifications to
/// one octet more than ATT_MTU. Core v5.4 Vol 3 Part F §3.2.8 makes ATT_MTU the maximum size of any ATT PDU, so
/// the ATT client closes the link (`oversizePDU`) and the engine stops with a protocol error naming both lengths
/// (`bledfu flash` exits 46 and keeps its journal). The policy is to stop, not reconnect: a broken device would
/// break the next link the same way.
@Suite(.timeLimit(.minutes(5))) struct OversizePDULieTests {
    /// The session's MTU exchange (Client Rx MTU 247, the simulator allows more) sets ATT_MTU 247.
    static let oversizeReason = "peer sent a 248-byte PDU (Handle Value Notification (0x1B)), longer than ATT_MTU 247"

    @Test func anOversizeResponseStopsWithAProtocolErrorNamingTheLengths() async throws {
        let session = try LyingSession()
        let outcome = try await session.upload(lies: LiePlan([.oversizePDU]))
        #expect(outcome.mtu == 247)
        #expect(outcome.liesTold == 1, "the first oversize PDU closes the link")
        let failure = try #require(outcome.failure, "the engine did not stop")
        #expect(failure.code == .protocolViolation)
        #expect(failure.description == "protocol-violation: \(Self.oversizeReason); the link was closed")
        #expect(!failure.description.contains("\n"))
        await session.checkNoWrongImage(outcome)
        #expect(await session.installedSHA() == nil)
        try await session.checkHonestRerunCompletes()
    }

    /// The lie comes in a data object, after objects were executed: the run stops with the same error, the journal
    /// keeps the executed objects (the state `bledfu resume` continues from), and an honest rerun resumes and
    /// installs the right image.
    @Test func anOversizeResponseInTheDataObjectsLeavesAResumableJournal() async throws {
        let session = try LyingSession()
        let outcome = try await session.upload(lies: LiePlan([.oversizePDU], limit: 1, after: 14))
        #expect(outcome.liesTold == 1)
        let failure = try #require(outcome.failure, "the engine did not stop")
        #expect(failure.code == .protocolViolation)
        #expect(failure.reason.hasPrefix(Self.oversizeReason), "\(failure)")
        let journal = try await session.store.load(
            deviceAddress: session.journal.deviceAddress, packageSHA256: session.journal.packageSHA256)
        #expect((journal?.executedOffset ?? 0) > 0, "no executed object kept: \(String(describing: journal))")
        await session.checkNoWrongImage(outcome)
        try await session.checkHonestRerunCompletes()
    }

    /// With ATT_MTU 23 (the Exchange MTU Response lies that the server takes 20) the padding stops at 24 octets,
    /// and that single octet is enough.
    @Test func oneOctetOverTheDefaultMTUIsDetected() async throws {
        let session = try LyingSession()
        let outcome = try await session.upload(lies: LiePlan([.mtuBelow23, .oversizePDU]))
        #expect(outcome.mtu == 23)
        let failure = try #require(outcome.failure, "the engine did not stop")
        #expect(failure.code == .protocolViolation)
        #expect(failure.reason.contains("24-byte PDU") && failure.reason.contains("ATT_MTU 23"), "\(failure)")
        await session.checkNoWrongImage(outcome)
        try await session.checkHonestRerunCompletes()
    }

    /// The transport reports the fault only when the device broke ATT: an ordinary disconnect stays resumable.
    @Test func anOrdinaryDisconnectIsNoPeerFault() async throws {
        let (clientEnd, peerEnd) = InMemoryBearer.makePair()
        let att = ATTClient(bearer: clientEnd)
        let transport = GATTDFUTransport(
            client: GATTClient(att: att),
            controlPoint: GATTCharacteristic(
                uuid: SecureDFUUUID.controlPoint, declarationHandle: 0x0A, valueHandle: 0x0B, properties: [.write, .notify],
                endHandle: 0x0C),
            packet: GATTCharacteristic(
                uuid: SecureDFUUUID.packet, declarationHandle: 0x0D, valueHandle: 0x0E,
                properties: [.writeWithoutResponse], endHandle: 0x0E))
        await peerEnd.close()
        #expect(await att.disconnected().code == .disconnected)
        #expect(await transport.peerFault == nil)

        let (brokenEnd, liarEnd) = InMemoryBearer.makePair()
        let broken = ATTClient(bearer: brokenEnd)
        let brokenTransport = GATTDFUTransport(
            client: GATTClient(att: broken), controlPoint: transport.controlPoint, packet: transport.packet)
        try await liarEnd.send([0x1B, 0x0B, 0x00] + [UInt8](repeating: 0x60, count: 21))  // 24 octets at ATT_MTU 23
        #expect(await broken.disconnected().code == .oversizePDU)
        #expect(await brokenTransport.peerFault?.reason.contains("24-byte PDU") == true)
    }
}
