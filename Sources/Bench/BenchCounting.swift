import BLECore
import SecureDFU
import Synchronization

/// A ``DFUTransport`` that counts what goes through it: Packet bytes and Calculate Checksum requests. Checkpoint
/// answers are counted by a ``CheckpointCountingBearer`` on the same ``Box``, inside the ATT client's read loop,
/// so that the count costs the notifications no extra task on their way to the engine.
final class CountingTransport: DFUTransport {
    struct Counts: Sendable {
        var packetBytes = 0
        var checksumRequests = 0
        var checkpointReports = 0
    }

    final class Box: Sendable {
        let counts = Mutex(Counts())
    }

    let base: any DFUTransport
    let box: Box

    init(_ base: any DFUTransport, box: Box = Box()) {
        self.base = base
        self.box = box
    }

    var counts: Counts { box.counts.withLock { $0 } }

    var controlPointNotifications: AsyncStream<[UInt8]> { base.controlPointNotifications }

    func writeControlPoint(_ bytes: [UInt8]) async throws(DFUTransportError) {
        if bytes.first == 0x03 { box.counts.withLock { $0.checksumRequests += 1 } }
        try await base.writeControlPoint(bytes)
    }

    func writePacket(_ bytes: [UInt8]) async throws(DFUTransportError) {
        box.counts.withLock { $0.packetBytes += bytes.count }
        try await base.writePacket(bytes)
    }

    func writePackets(_ packets: [ArraySlice<UInt8>]) async throws(DFUTransportError) {
        let bytes = packets.reduce(0) { $0 + $1.count }
        box.counts.withLock { $0.packetBytes += bytes }
        try await base.writePackets(packets)
    }

    var mtu: Int { get async { await base.mtu } }
    var peerFault: DFUTransportError? { get async { await base.peerFault } }
}

/// The host's end of the link, counting the checkpoint answers the device notifies: Handle Value Notifications
/// (0x1B) whose value starts `60 03 01` (a PRN or a Calculate Checksum response). The Secure DFU service notifies
/// on its Control Point only.
final class CheckpointCountingBearer: ATTBearer {
    let base: any ATTBearer
    let box: CountingTransport.Box

    init(_ base: any ATTBearer, box: CountingTransport.Box) {
        self.base = base
        self.box = box
    }

    var linkInfo: LinkInfo { base.linkInfo }

    func send(_ pdu: [UInt8]) async throws(BearerError) { try await base.send(pdu) }
    func send(burst pdus: [[UInt8]]) async throws(BearerError) { try await base.send(burst: pdus) }
    func send(burst payloads: [ArraySlice<UInt8>], prefix: [UInt8]) async throws(BearerError) {
        try await base.send(burst: payloads, prefix: prefix)
    }
    func close() async { await base.close() }
    func securityLevel() async -> LinkSecurityLevel { await base.securityLevel() }
    func raiseSecurity(to level: LinkSecurityLevel) async throws(BearerError) -> LinkSecurityLevel {
        try await base.raiseSecurity(to: level)
    }

    func receive() async throws(BearerError) -> [UInt8] {
        let pdu = try await base.receive()
        count([pdu])
        return pdu
    }

    func receive(upTo maximumCount: Int) async throws(BearerError) -> [[UInt8]] {
        let pdus = try await base.receive(upTo: maximumCount)
        count(pdus)
        return pdus
    }

    private func count(_ pdus: [[UInt8]]) {
        let reports = pdus.count { $0.count > 6 && $0[0] == 0x1B && $0[3] == 0x60 && $0[4] == 0x03 && $0[5] == 0x01 }
        if reports > 0 { box.counts.withLock { $0.checkpointReports += reports } }
    }
}
