import BLECore
import LinuxIO

/// A device on a BlueZ adapter (`--adapter hciN`): the ATT fixed channel listens on the adapter and the controller
/// advertises over HCI; a random device address is set with LE Set Random Address, so the jump to the bootloader at
/// address + 1 happens on the same adapter. Needs CAP_NET_RAW (root).
public final class BlueZPeripheralEndpoint: BLEPeripheral {
    public let peripheral: BlueZPeripheral

    public init(adapterName: String) throws(AdapterError) {
        let adapter = try BlueZAdapter(name: adapterName).resolve()
        peripheral = try BlueZPeripheral(adapter: adapter)
    }

    public func advertise(_ advertisement: Advertisement) async throws(AdapterError) {
        try await peripheral.advertise(advertisement)
    }

    /// The link with `BT_SECURITY`; ending it closes the socket and then drops the LE link, as a rebooting device
    /// does (the kernel would otherwise keep it for seconds, and the central would wait for the disconnect). The
    /// peripheral first waits until the socket's last PDUs (the response to the final Execute) went to the
    /// controller: a Nordic bootloader resets only then. The device reads through a ``ReadAheadBearer``: the kernel
    /// drops ATT PDUs its socket buffer cannot hold, which a real peripheral's link layer never does.
    public func accept() async throws(BearerError) -> PeripheralConnection {
        let socket = try await peripheral.accept(drainingBeforeDisconnect: true)
        let peripheral = self.peripheral
        return PeripheralConnection(
            bearer: ReadAheadBearer(BlueZSecureLink(socket)), closeNow: { socket.closeNow() },
            end: {
                let handle = socket.linkInfo.connectionHandle
                await socket.close()
                guard let handle else { return }
                await peripheral.disconnect(handle: handle)
            })
    }

    /// The controller ended legacy connectable advertising when the connection was made (Core v5.4 Vol 6 Part B
    /// §4.4.2.4); `advertise` turns it on again after the link.
    public func connected() async {}

    /// From a signal handler: the listener closes at once (ending `accept`); advertising is turned off by
    /// ``shutdown()`` when the device loop ends.
    public func close() {
        peripheral.closeListener()
    }

    public func shutdown() async {
        await peripheral.close()
    }
}
