import BLECore
import Synchronization

/// The virtual radio's link security message (docs/virtual-radio.md §4.1): `FF 53 <level>`.
///
/// Byte 0 is 0xFF, an ATT opcode with the Command flag set and no assigned method, so a device that does not know
/// the message ignores it as an unsupported command (Core v5.4 Vol 3 Part F §3.3); byte 1 is 0x53 ("S"); byte 2 is a
/// `LinkSecurityLevel` (1 low ... 4 fips). The central sends the level it wants; a device that knows the message
/// answers with the same three bytes carrying the level now in force (the wanted one, or lower when it refuses).
public enum VirtualLinkSecurityMessage {
    public static let opcode: UInt8 = 0xFF
    public static let kind: UInt8 = 0x53

    public static func encode(_ level: LinkSecurityLevel) -> [UInt8] { [opcode, kind, level.rawValue] }

    /// The level a message carries, or nil when `bytes` is no link security message (an ATT PDU).
    public static func decode(_ bytes: [UInt8]) -> LinkSecurityLevel? {
        guard bytes.count == 3, bytes[0] == opcode, bytes[1] == kind, (1...4).contains(bytes[2]) else { return nil }
        return LinkSecurityLevel(rawValue: bytes[2])
    }

    /// Starts with the message's two bytes (a malformed one is dropped, not handed to ATT).
    @Sendable static func isControl(_ bytes: [UInt8]) -> Bool { bytes.count >= 2 && bytes[0] == opcode && bytes[1] == kind }
}

/// One end of a virtual radio link with a security level: wraps the connection's bearer, takes the link security
/// messages out of the PDU stream and keeps the level. The central raises the level (`raiseSecurity`); the device
/// grants up to `maximum` (a stored bond: encryption without user interaction) and answers. Answers are taken out
/// of the stream by `receive`, so a raise needs a reader running on the link (an `ATTClient` always has one).
public final class VirtualSecureLink: ATTBearer {
    public enum Role: Sendable {
        /// Sends requests; waits `timeout` for the answer (a device that does not know the message never answers).
        case central(timeout: Duration)
        /// Answers requests, granting at most `maximum`.
        case peripheral(maximum: LinkSecurityLevel)
    }

    /// How long a central waits for the device's answer.
    public static let defaultTimeout: Duration = .seconds(10)

    public let base: any ATTBearer
    public let role: Role
    private let sleep: @Sendable (Duration) async -> Void
    private struct State {
        var level = LinkSecurityLevel.low
        var waiter: (id: UInt64, continuation: CheckedContinuation<LinkSecurityLevel?, Never>)?
        var nextID: UInt64 = 0
    }
    private let state = Mutex(State())

    public init(_ base: any ATTBearer, role: Role, clock: some Clock<Duration> = ContinuousClock()) {
        self.base = base
        self.role = role
        self.sleep = { duration in try? await clock.sleep(for: duration) }
    }

    public var linkInfo: LinkInfo { base.linkInfo }
    public func send(_ pdu: [UInt8]) async throws(BearerError) { try await base.send(pdu) }
    public func send(burst pdus: [[UInt8]]) async throws(BearerError) { try await base.send(burst: pdus) }
    public func send(burst payloads: [ArraySlice<UInt8>], prefix: [UInt8]) async throws(BearerError) {
        try await base.send(burst: payloads, prefix: prefix)
    }
    public func close() async {
        answer(nil)
        await base.close()
    }

    public func receive() async throws(BearerError) -> [UInt8] {
        while true {
            let pdu = try await base.receive()
            guard VirtualLinkSecurityMessage.isControl(pdu) else { return pdu }
            try await consume(pdu)
        }
    }

    public func receive(upTo maximumCount: Int) async throws(BearerError) -> [[UInt8]] {
        while true {
            let batch = try await base.receive(upTo: maximumCount)
            // The common case, no security message in the batch, passes it through untouched.
            guard batch.contains(where: VirtualLinkSecurityMessage.isControl) else { return batch }
            var kept: [[UInt8]] = []
            for pdu in batch {
                if VirtualLinkSecurityMessage.isControl(pdu) { try await consume(pdu) } else { kept.append(pdu) }
            }
            if !kept.isEmpty { return kept }
        }
    }

    public func securityLevel() async -> LinkSecurityLevel { state.withLock { $0.level } }

    public func raiseSecurity(to level: LinkSecurityLevel) async throws(BearerError) -> LinkSecurityLevel {
        guard case .central(let timeout) = role else {
            throw BearerError(.unsupported, "a virtual device does not raise the link's security; the central does")
        }
        let current = state.withLock { $0.level }
        if current >= level { return current }
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        let sleep = self.sleep
        let base = self.base
        // The waiter is in place before the request leaves and before the timer starts: nothing can overtake it.
        let reply: LinkSecurityLevel? = await withCheckedContinuation { continuation in
            let previous = state.withLock { state in
                defer { state.waiter = (id, continuation) }
                return state.waiter?.continuation
            }
            previous?.resume(returning: nil)
            Task {
                do throws(BearerError) {
                    try await base.send(VirtualLinkSecurityMessage.encode(level))
                } catch {
                    self.answer(nil, id: id)
                    return
                }
                await sleep(timeout)
                self.answer(nil, id: id)
            }
        }
        guard let reached = reply else {
            throw BearerError(
                .timeout, "the device did not answer the link security request within \(timeout) "
                    + "(it does not support link security on the virtual radio)")
        }
        return reached
    }

    /// Handles a link security message (a malformed one is dropped).
    private func consume(_ pdu: [UInt8]) async throws(BearerError) {
        guard let level = VirtualLinkSecurityMessage.decode(pdu) else { return }
        switch role {
        case .central:
            state.withLock { $0.level = level }
            answer(level)
        case .peripheral(let maximum):
            let granted = state.withLock { state -> LinkSecurityLevel in
                state.level = max(state.level, min(level, maximum))
                return state.level
            }
            try await base.send(VirtualLinkSecurityMessage.encode(granted))
        }
    }

    private func answer(_ level: LinkSecurityLevel?, id: UInt64? = nil) {
        let waiter = state.withLock { state -> CheckedContinuation<LinkSecurityLevel?, Never>? in
            guard let waiter = state.waiter, id == nil || waiter.id == id else { return nil }
            state.waiter = nil
            return waiter.continuation
        }
        waiter?.resume(returning: level)
    }
}
