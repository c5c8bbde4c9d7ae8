/// The peripheral side of the radio, beside ``BLEAdapter`` (the central side): where a device is served. The
/// virtual radio (`VirtualRadioPeripheral`) and a BlueZ adapter in the peripheral role
/// (`BlueZPeripheralEndpoint`) implement it; the simulator host (`SimulatorHost`) drives it.
///
/// ``advertise(_:)`` makes the device's current advertisement the one on the air (moving it to a new address when
/// the address changed: the buttonless jump); ``accept()`` waits for a central; ``connected()`` says one came (a
/// Nordic peripheral advertises only while it has no connection: `nrf_dfu_ble.c` restarts advertising on
/// `BLE_GAP_EVT_DISCONNECTED`); the accepted connection ends the link when the device is done with it.
public protocol BLEPeripheral: Sendable {
    func advertise(_ advertisement: Advertisement) async throws(AdapterError)
    func accept() async throws(BearerError) -> PeripheralConnection
    func connected() async
    /// Closes everything (idempotent, from any thread, a signal handler's included); a pending `accept` ends with
    /// `.closed`.
    func close()
    /// The last step of a device loop: like `close`, and waits for what closing needs (advertising off).
    func shutdown() async
}

/// A central's connection as a peripheral accepted it.
public struct PeripheralConnection: Sendable {
    /// What the device serves: the link with its security level (link security messages on the virtual radio,
    /// `BT_SECURITY` on a BlueZ socket).
    public let bearer: any ATTBearer
    /// The process at the other end (SO_PEERCRED on the virtual radio's socket; nil on a radio link).
    public let peerProcessID: Int32?
    private let closeNowAction: @Sendable () -> Void
    private let endAction: @Sendable () async -> Void

    /// - Parameters:
    ///   - closeNow: closes the link at once, from any thread (a signal handler stopping the host).
    ///   - end: drops the link once the device has finished with it (BlueZ: also the LE link, as a rebooting
    ///     device does).
    ///   - peerProcessID: the connecting process, when the link is a local socket.
    public init(
        bearer: any ATTBearer, peerProcessID: Int32? = nil, closeNow: @escaping @Sendable () -> Void,
        end: @escaping @Sendable () async -> Void
    ) {
        self.bearer = bearer
        self.peerProcessID = peerProcessID
        self.closeNowAction = closeNow
        self.endAction = end
    }

    public func closeNow() { closeNowAction() }

    public func end() async { await endAction() }
}
