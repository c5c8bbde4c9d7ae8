import BLECore
/// The two DFU characteristics of a connected bootloader, as the engine needs them. The GATT adapter
/// (``GATTDFUTransport``) implements it over a `GATTClient`; tests implement it in memory.
public protocol DFUTransport: Sendable {
    /// Write Request to the Control Point (returns when the device acknowledged the write).
    func writeControlPoint(_ bytes: [UInt8]) async throws(DFUTransportError)
    /// Write Command to the Packet characteristic (returns when the bearer accepted it: back-pressure only).
    func writePacket(_ bytes: [UInt8]) async throws(DFUTransportError)
    /// Write Commands to the Packet characteristic, one per packet, in order and with nothing between them: what
    /// as many `writePacket` calls would send, handed to the link at once (returns when the bearer accepted the
    /// last one). On a failure the packets before the failing one may have been sent.
    func writePackets(_ packets: [ArraySlice<UInt8>]) async throws(DFUTransportError)
    /// Control Point notifications; the stream ends when the link goes down.
    var controlPointNotifications: AsyncStream<[UInt8]> { get }
    /// The ATT_MTU of the link.
    var mtu: Int { get async }
    /// Why the link ended, when it ended because the device broke the bearer's protocol (a PDU longer than
    /// ATT_MTU, an undecodable PDU, a response to nothing); nil while it is up or after an ordinary disconnect.
    var peerFault: DFUTransportError? { get async }
}

extension DFUTransport {
    /// No fault information (in-memory transports).
    public var peerFault: DFUTransportError? { get async { nil } }

    /// One `writePacket` per packet.
    public func writePackets(_ packets: [ArraySlice<UInt8>]) async throws(DFUTransportError) {
        for packet in packets { try await writePacket(Array(packet)) }
    }
}

/// A transport write failed.
public struct DFUTransportError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let disconnected = Code(rawValue: "disconnected")
        public static let rejected = Code(rawValue: "rejected")
        public var description: String { rawValue }
    }

    public var code: Code
    public var reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code): \(reason)" }
}

extension DFUTransportError {
    /// ``CodedError``'s one line: the reason.
    public var message: String { reason }
}
