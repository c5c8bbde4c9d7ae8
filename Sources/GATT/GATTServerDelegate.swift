import ATT
import BLECore

/// What the application answers to a read of a characteristic value or descriptor.
public enum GATTReadResult: Sendable, Hashable {
    /// Serve the value the server holds (the initial value or the last accepted write / `setValue`).
    case storedValue
    /// Serve this value (the server applies the offset of a Read Blob and truncates to the MTU).
    case value([UInt8])
    /// Refuse with this ATT error.
    case error(ATTErrorCode)
}

/// Why a `GATTServer` operation failed (open code space, as `ATTClientError`).
public struct GATTServerError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        public init(_ name: String) { self.name = name }
        /// The link is gone (the peer disconnected or the server closed it).
        public static let disconnected = Code("disconnected")
        /// No Handle Value Confirmation within the ATT timeout; the bearer was closed.
        public static let timeout = Code("timeout")
        /// The handle names no attribute.
        public static let invalidHandle = Code("invalidHandle")
        public var description: String { name }
    }

    public var code: Code
    public var reason: String
    public init(_ code: Code, _ reason: String = "") {
        self.code = code
        self.reason = reason
    }
    public static func == (lhs: GATTServerError, rhs: GATTServerError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
    public var description: String { reason.isEmpty ? "\(code)" : "\(code): \(reason)" }
}

/// The application behind a `GATTServer` (the DFU simulator). Every method has a default, so an application
/// implements only what it needs. The server awaits each call before it handles the next PDU, so a slow method
/// slows the link the way a busy peripheral does.
public protocol GATTServerDelegate: AnyObject, Sendable {
    /// Called for every PDU from the client before the server handles it. Suspending here delays that PDU and
    /// every PDU after it (the server reads no further until this returns), which is how a link timing model applies
    /// back-pressure. Default: returns at once.
    func beforeHandling(_ pdu: ATTPDU, server: GATTServer) async

    /// A read of a characteristic value or a descriptor other than a CCCD (Read, Read Blob, Read By Type).
    /// `attribute.value` is the stored value. Default: `.storedValue`.
    func read(_ attribute: GATTAttribute, offset: Int, server: GATTServer) async -> GATTReadResult

    /// A write to a characteristic value or descriptor other than a CCCD, after the server checked properties and
    /// permissions. Return nil to accept (the server stores `value` and, for a Write Request, sends Write Response),
    /// or an error code to refuse (sent as Error Response for a Write Request; ignored for a Write Command, which has
    /// no response). Default: accept.
    func write(_ attribute: GATTAttribute, value: [UInt8], withResponse: Bool, server: GATTServer) async
        -> ATTErrorCode?

    /// The client wrote the CCCD of the characteristic value at `valueHandle`.
    func clientConfigurationChanged(valueHandle: UInt16, configuration: GATTClientConfiguration, server: GATTServer)
        async

    /// Called once the server has answered `pdu` (sent its Write Response, Error Response, ...; right after handling
    /// for a PDU without a response), before it reads the next PDU. This is where an application does what a
    /// peripheral does after the stack acknowledged a write: the nRF5 SDK answers a Control Point write in its
    /// authorize handler and only then schedules the request, so the notification follows the Write Response
    /// (`nrf_dfu_ble.c on_rw_authorize_req`, `nrf_dfu_req_handler_on_req`). Default: returns at once.
    func afterResponding(to pdu: ATTPDU, server: GATTServer) async

    /// The link ended (peer disconnect, server close or timeout).
    func disconnected(_ reason: GATTServerError, server: GATTServer) async
}

extension GATTServerDelegate {
    public func beforeHandling(_ pdu: ATTPDU, server: GATTServer) async {}
    public func read(_ attribute: GATTAttribute, offset: Int, server: GATTServer) async -> GATTReadResult {
        .storedValue
    }
    public func write(_ attribute: GATTAttribute, value: [UInt8], withResponse: Bool, server: GATTServer) async
        -> ATTErrorCode?
    { nil }
    public func clientConfigurationChanged(
        valueHandle: UInt16, configuration: GATTClientConfiguration, server: GATTServer
    ) async {}
    public func disconnected(_ reason: GATTServerError, server: GATTServer) async {}
    public func afterResponding(to pdu: ATTPDU, server: GATTServer) async {}
}
