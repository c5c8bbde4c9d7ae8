import ATT
import BLECore
import Synchronization

/// A lie a virtual device tells on its link (docs/reliability.md, "Lying devices").
///
/// Lies rewrite what the device sends; the device itself stays honest (its flash and settings hold the truth), so
/// a test can tell whether the host believed the lie. Control Point notifications are `60 <request> <result>
/// [payload]`; the checksum lies touch successful Calculate Checksum responses and PRNs:
///
///     60 03 01 | offset (4, LE) | CRC-32 (4, LE)
public enum DeviceLie: String, Codable, Sendable, Hashable, CaseIterable {
    /// Checksum responses and PRNs report an offset one byte past the truth.
    case wrongOffset = "wrong-offset"
    /// Checksum responses and PRNs report a CRC with its lowest bit flipped.
    case wrongCRC = "wrong-crc"
    /// Every Control Point notification is sent twice.
    case duplicatedResponses = "duplicate"
    /// After each Control Point notification, the one before it is sent again: a late answer arriving out of order.
    case outOfOrderResponses = "out-of-order"
    /// Control Point notifications are padded with zeros to an ATT PDU one octet longer than the link's ATT_MTU
    /// (23, or what the Exchange MTU Request and Response passing through the bearer agreed on).
    case oversizePDU = "oversize-pdu"
    /// Control Point notifications are sent on the handle after the Control Point value handle (its CCCD).
    case wrongHandle = "wrong-handle"
    /// The Exchange MTU Response announces a Server Rx MTU of 20, below the minimum ATT_MTU of 23. The device
    /// itself is told that the client's Rx MTU is 23, so it keeps its own PDUs within the ATT_MTU of 23 that both
    /// sides must then use (Core v5.4 Vol 3 Part F §3.4.2.2); add `oversize-pdu` for a device that does not.
    case mtuBelow23 = "mtu-below-23"
}

/// Which lies a device tells, how many times in all (nil: every time it can), and from which Control Point
/// notification on (`after` honest ones first, so that lies can reach the data objects).
public struct LiePlan: Codable, Sendable, Hashable {
    public var lies: [DeviceLie]
    public var limit: Int?
    public var after: Int

    public init(_ lies: [DeviceLie], limit: Int? = nil, after: Int = 0) {
        self.lies = lies
        self.limit = limit
        self.after = after
    }

    /// Parses comma-separated lie names, with optional `times=N` and `after=N`: "wrong-crc,duplicate,times=2".
    public init(parsing text: String) throws(FaultPlanError) {
        self.init([])
        for item in text.split(separator: ",").map({ String($0).trimmingSpaces }) where !item.isEmpty {
            if item.hasPrefix("times=") || item.hasPrefix("after=") {
                guard let count = Int(item.dropFirst(6)), count >= 0 else {
                    throw FaultPlanError("lies: '\(item)' is not a count")
                }
                if item.hasPrefix("times=") { limit = count } else { after = count }
            } else if let lie = DeviceLie(rawValue: item) {
                lies.append(lie)
            } else {
                let known = DeviceLie.allCases.map(\.rawValue).joined(separator: ", ")
                throw FaultPlanError("lies: unknown lie '\(item)' (known: \(known))")
            }
        }
    }
}

/// An ATT bearer on the device side that tells the lies of a `LiePlan` on everything the device sends.
///
/// Wrap the device's end of a link with it and hand it to `VirtualDevice.serve(_:)`. It reads each PDU the device
/// sends, rewrites it as the plan says, and passes what the host sends through unchanged.
public final class LyingBearer: ATTBearer {
    public let base: any ATTBearer
    public let plan: LiePlan
    private let state = Mutex(State())

    private struct State {
        var told: [DeviceLie: Int] = [:]
        var previousNotification: (handle: UInt16, value: [UInt8])?
        var responses = 0
        /// Exchange MTU: the host's Client Rx MTU (from its request) and ATT_MTU as this link agreed on it.
        var clientRxMTU: Int?
        var attMTU = 23
        var announceMTU20 = false
        var total: Int { told.values.reduce(0, +) }
    }

    public init(wrapping base: any ATTBearer, plan: LiePlan) {
        self.base = base
        self.plan = plan
    }

    public var linkInfo: LinkInfo { base.linkInfo }

    /// How many lies were told so far, in all and per kind.
    public var liesTold: Int { state.withLock { $0.total } }
    public func liesTold(_ lie: DeviceLie) -> Int { state.withLock { $0.told[lie] ?? 0 } }

    public func receive() async throws(BearerError) -> [UInt8] {
        let pdu = try await base.receive()
        guard case .exchangeMTURequest(let clientRxMTU)? = try? ATTPDU(decoding: pdu) else { return pdu }
        state.withLock { $0.clientRxMTU = Int(clientRxMTU) }
        guard tell(.mtuBelow23) else { return pdu }
        state.withLock { $0.announceMTU20 = true }
        return ATTPDU.exchangeMTURequest(clientRxMTU: 23).encoded
    }

    /// ATT_MTU of the link as the PDUs seen so far set it (Core v5.4 Vol 3 Part F §3.4.2.2).
    public var attMTU: Int { state.withLock { $0.attMTU } }
    public func close() async { await base.close() }

    public func send(_ pdu: [UInt8]) async throws(BearerError) {
        for bytes in rewrite(pdu) { try await base.send(bytes) }
    }

    /// The PDUs to send instead of `pdu`.
    func rewrite(_ pdu: [UInt8]) -> [[UInt8]] {
        guard let decoded = try? ATTPDU(decoding: pdu) else { return [pdu] }
        switch decoded {
        case .exchangeMTUResponse(let serverRxMTU):
            let sent: UInt16 = state.withLock { state in
                let sent: UInt16 = state.announceMTU20 ? 20 : serverRxMTU
                state.attMTU = max(23, min(state.clientRxMTU ?? 23, Int(sent)))
                return sent
            }
            return sent == serverRxMTU ? [pdu] : [ATTPDU.exchangeMTUResponse(serverRxMTU: sent).encoded]
        case .handleValueNotification(let handle, let value) where value.first == 0x60:
            return rewriteResponse(handle: handle, value: value)
        default:
            return [pdu]
        }
    }

    private func rewriteResponse(handle: UInt16, value original: [UInt8]) -> [[UInt8]] {
        let previous = state.withLock { state in
            defer { state.previousNotification = (handle, original) }
            state.responses += 1
            return state.previousNotification
        }
        var value = original
        var target = handle
        let isChecksum = value.count >= 11 && value[1] == 0x03 && value[2] == 0x01
        if isChecksum, tell(.wrongOffset) {
            let offset = UInt32(value[3]) | UInt32(value[4]) << 8 | UInt32(value[5]) << 16 | UInt32(value[6]) << 24
            let lie = offset &+ 1
            for index in 0..<4 { value[3 + index] = UInt8(truncatingIfNeeded: lie >> (8 * UInt32(index))) }
        }
        if isChecksum, tell(.wrongCRC) { value[7] ^= 0x01 }
        if tell(.wrongHandle) { target = handle &+ 1 }
        if tell(.oversizePDU) {
            // Opcode and handle take 3 octets: a value of ATT_MTU - 2 octets makes a PDU of ATT_MTU + 1.
            value += [UInt8](repeating: 0, count: max(0, attMTU - 2 - value.count))
        }
        var out = [ATTPDU.handleValueNotification(handle: target, value: value).encoded]
        if tell(.duplicatedResponses) { out.append(out[0]) }
        if let previous, tell(.outOfOrderResponses) {
            out.append(ATTPDU.handleValueNotification(handle: previous.handle, value: previous.value).encoded)
        }
        return out
    }

    /// Whether to tell `lie` now (it is in the plan and the limit is not reached); counts it when so.
    private func tell(_ lie: DeviceLie) -> Bool {
        guard plan.lies.contains(lie) else { return false }
        return state.withLock { state in
            if let limit = plan.limit, state.total >= limit { return false }
            if lie != .mtuBelow23, state.responses <= plan.after { return false }
            state.told[lie, default: 0] += 1
            return true
        }
    }
}
