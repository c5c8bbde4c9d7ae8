import ATT
import BLECore

/// A notification or indication the peer sent (Handle Value Notification 0x1B / Indication 0x1D).
public struct ATTNotification: Hashable, Sendable, CustomStringConvertible {
    public var handle: UInt16
    public var value: [UInt8]
    /// True for an indication (already confirmed by the client), false for a notification.
    public var isIndication: Bool

    public init(handle: UInt16, value: [UInt8], isIndication: Bool) {
        self.handle = handle
        self.value = value
        self.isIndication = isIndication
    }

    public var handleValue: ATTHandleValue { ATTHandleValue(handle: handle, value: value) }

    public var description: String {
        "\(isIndication ? "indication" : "notification") handle 0x\(String(handle, radix: 16)) \(value.hexString)"
    }
}

/// The ATT bearer rules of the client side, as a value type: it takes events (a request from a caller, a PDU from
/// the peer, a timer, a bearer failure) and returns the actions the `ATTClient` actor performs. No I/O, no `await`.
struct ATTClientStateMachine {
    typealias RequestID = UInt64

    enum Action: Equatable {
        /// Send these bytes to the peer (in order with every other `.send`).
        case send([UInt8])
        /// Start the transaction timer for this request.
        case startTimer(RequestID)
        /// The outstanding transaction ended; stop its timer.
        case cancelTimer
        /// Resume the caller of this request.
        case complete(RequestID, Result<ATTPDU, ATTClientError>)
        /// Hand this notification or indication to the stream.
        case deliver(ATTNotification)
        /// Close the bearer and end the notification stream with this reason.
        case close(ATTClientError)
    }

    /// Core v5.4 Vol 3 Part F §3.2.8: the default and minimum ATT_MTU on an LE bearer is 23 octets.
    static let minimumMTU = 23

    /// The Rx MTU this side announces (in its own Exchange MTU Request and in answers to the peer's).
    let rxMTU: UInt16
    private(set) var mtu = ATTClientStateMachine.minimumMTU
    private(set) var closedReason: ATTClientError?
    private var outstanding: (id: RequestID, pdu: ATTPDU)?
    private var queue: [(id: RequestID, pdu: ATTPDU)] = []

    init(rxMTU: UInt16) {
        self.rxMTU = rxMTU
    }

    var hasOutstandingRequest: Bool { outstanding != nil }
    var queuedCount: Int { queue.count }

    /// A caller wants to send a request and await its response.
    mutating func request(_ pdu: ATTPDU, id: RequestID) -> [Action] {
        if let closedReason { return [.complete(id, .failure(closedReason))] }
        guard pdu.opcode.kind == .request else {
            return [.complete(id, .failure(ATTClientError(.invalidArgument, "\(pdu.opcode) is not a request")))]
        }
        // Core v5.4 Vol 3 Part F §3.3.2: a client may have only one request outstanding at a time; the next
        // request waits until the response (or Error Response) to the previous one has arrived.
        guard outstanding == nil else {
            queue.append((id, pdu))
            return []
        }
        outstanding = (id, pdu)
        return [.send(pdu.encoded), .startTimer(id)]
    }

    /// The transaction timer of `id` fired.
    mutating func timerFired(id: RequestID) -> [Action] {
        guard closedReason == nil, let outstanding, outstanding.id == id else { return [] }
        // Core v5.4 Vol 3 Part F §3.3.3: a transaction not completed within 30 s has timed out; no further ATT
        // PDUs may be sent on this bearer, so it must be disconnected and a new one established.
        return close(ATTClientError(.timeout, "no response to \(outstanding.pdu.opcode) within the ATT timeout"))
    }

    /// The bearer failed or the peer disconnected.
    mutating func bearerFailed(_ error: ATTClientError) -> [Action] {
        guard closedReason == nil else { return [] }
        return close(error)
    }

    /// Closes the state machine: every waiter fails with `reason`.
    mutating func close(_ reason: ATTClientError) -> [Action] {
        guard closedReason == nil else { return [] }
        closedReason = reason
        var actions: [Action] = []
        if let outstanding {
            actions.append(.cancelTimer)
            actions.append(.complete(outstanding.id, .failure(reason)))
        }
        for waiting in queue { actions.append(.complete(waiting.id, .failure(reason))) }
        outstanding = nil
        queue = []
        actions.append(.close(reason))
        return actions
    }

    /// A PDU arrived from the peer.
    mutating func received(_ bytes: [UInt8]) -> [Action] {
        guard closedReason == nil else { return [] }
        // Core v5.4 Vol 3 Part F §3.2.8: ATT_MTU (23 until an exchange; the 3-octet Exchange MTU Response fits) is
        // the maximum size of any packet sent between client and server. A peer that sends more is broken.
        guard bytes.count <= mtu else {
            let what = bytes.first.map { " (\(ATTOpcode(rawValue: $0)))" } ?? ""
            return close(
                ATTClientError(.oversizePDU, "peer sent a \(bytes.count)-byte PDU\(what), longer than ATT_MTU \(mtu)"))
        }
        let pdu: ATTPDU
        do {
            pdu = try ATTPDU(decoding: bytes)
        } catch {
            return close(ATTClientError(.decoding, "cannot decode \(bytes.hexString): \(error)"))
        }
        switch pdu {
        case .handleValueNotification(let handle, let value):
            return [.deliver(ATTNotification(handle: handle, value: value, isIndication: false))]
        case .handleValueIndication(let handle, let value):
            // Core v5.4 Vol 3 Part F §3.4.7.2: the client answers every indication with a Handle Value
            // Confirmation; we send it once the value is in the notification stream.
            return [
                .deliver(ATTNotification(handle: handle, value: value, isIndication: true)),
                .send(ATTPDU.handleValueConfirmation.encoded),
            ]
        case .exchangeMTURequest(let clientRxMTU):
            // Core v5.4 Vol 3 Part F §3.4.2.2: the server side answers with its own Rx MTU, and both sides then use
            // the smaller of the two values, never less than the default 23.
            mtu = Self.effectiveMTU(Int(rxMTU), Int(clientRxMTU))
            return [.send(ATTPDU.exchangeMTUResponse(serverRxMTU: rxMTU).encoded)]
        case .errorResponse(let requestOpcode, let handle, let error):
            return completeOutstanding(with: pdu, error: (requestOpcode, handle, error))
        default:
            break
        }
        switch pdu.opcode.kind {
        case .response:
            return completeOutstanding(with: pdu, error: nil)
        case .request:
            // Core v5.4 Vol 3 Part F §3.4.1.1: a request the server does not support gets an Error Response
            // "Request Not Supported" naming the request opcode, with handle 0x0000.
            return [.send(ATTPDU.errorResponse(requestOpcode: pdu.opcode, handle: 0, error: .requestNotSupported).encoded)]
        case .command, .confirmation, .notification, .indication:
            // Core v5.4 Vol 3 Part F §3.3: commands need no response; an unsupported command is ignored.
            return []
        default:
            // Core v5.4 Vol 3 Part F §3.3.1: bit 6 of the opcode marks a command, which is ignored when unknown;
            // any other unknown opcode is answered as an unsupported request.
            if pdu.opcode.rawValue & 0x40 != 0 { return [] }
            return [.send(ATTPDU.errorResponse(requestOpcode: pdu.opcode, handle: 0, error: .requestNotSupported).encoded)]
        }
    }

    private mutating func completeOutstanding(
        with pdu: ATTPDU, error: (opcode: ATTOpcode, handle: UInt16, code: ATTErrorCode)?
    ) -> [Action] {
        guard let current = outstanding else {
            // Core v5.4 Vol 3 Part F §3.3.2: a response is only ever sent to a request; one that arrives with no
            // request outstanding breaks the protocol, so the bearer is no longer trustworthy.
            return close(ATTClientError(.protocolViolation, "unexpected \(pdu.opcode) with no request outstanding"))
        }
        let result: Result<ATTPDU, ATTClientError>
        if let error {
            guard error.opcode == current.pdu.opcode else {
                return close(
                    ATTClientError(
                        .protocolViolation,
                        "Error Response for \(error.opcode) while \(current.pdu.opcode) is outstanding"))
            }
            result = .failure(.remote(error.code, error.opcode, error.handle))
        } else {
            // Every ATT response opcode is its request opcode plus one (Core v5.4 Vol 3 Part F §3.4.8, table 3.37).
            guard pdu.opcode.rawValue == current.pdu.opcode.rawValue &+ 1 else {
                return close(
                    ATTClientError(
                        .protocolViolation, "unexpected \(pdu.opcode) while \(current.pdu.opcode) is outstanding"))
            }
            if case .exchangeMTURequest(let ours) = current.pdu, case .exchangeMTUResponse(let theirs) = pdu {
                mtu = Self.effectiveMTU(Int(ours), Int(theirs))
            }
            result = .success(pdu)
        }
        var actions: [Action] = [.cancelTimer, .complete(current.id, result)]
        outstanding = nil
        if !queue.isEmpty {
            let next = queue.removeFirst()
            outstanding = next
            actions.append(.send(next.pdu.encoded))
            actions.append(.startTimer(next.id))
        }
        return actions
    }

    /// Core v5.4 Vol 3 Part F §3.4.2.2: ATT_MTU is the minimum of the client and server Rx MTU, at least 23.
    static func effectiveMTU(_ a: Int, _ b: Int) -> Int {
        max(minimumMTU, min(a, b))
    }
}
