import BLECore
import LinuxIO
import Synchronization

/// A device on a virtual radio (``BLEPeripheral``): one ``VirtualPeripheralEndpoint`` per address, replaced when the
/// address changes.
public final class VirtualRadioPeripheral: BLEPeripheral {
    public let radioDirectory: String
    private let current = Mutex<VirtualPeripheralEndpoint?>(nil)
    private let closed = Mutex(false)

    public init(radioDirectory: String) {
        self.radioDirectory = radioDirectory
    }

    public func advertise(_ advertisement: Advertisement) async throws(AdapterError) {
        if let endpoint = current.withLock({ $0 }), endpoint.peer.address == advertisement.peer.address {
            try endpoint.updateAdvertisement(advertisement)
            return
        }
        current.withLock { $0 }?.close()
        let endpoint = try VirtualPeripheralEndpoint(radio: radioDirectory, advertisement: advertisement)
        let stillOpen = closed.withLock { closed -> Bool in
            if !closed { current.withLock { $0 = endpoint } }
            return !closed
        }
        if !stillOpen {
            endpoint.close()
            throw AdapterError(.system, "the peripheral is closed")
        }
    }

    /// A virtual device encrypts with its "bond" on request (docs/virtual-radio.md §4.1).
    public func accept() async throws(BearerError) -> PeripheralConnection {
        guard let endpoint = current.withLock({ $0 }) else { throw BearerError(.closed, "endpoint closed") }
        let socket = try await endpoint.acceptSocket()
        let peer = (try? socket.socket?.peerProcessID()).flatMap { $0 > 0 ? $0 : nil }
        return PeripheralConnection(
            bearer: VirtualSecureLink(socket, role: .peripheral(maximum: .medium)), peerProcessID: peer,
            closeNow: { socket.closeNow() }, end: { await socket.close() })
    }

    /// Removes `<ADDR>.adv`; the socket keeps listening (docs/virtual-radio.md §4: a device that does not advertise
    /// while connected removes its advertisement).
    public func connected() async {
        current.withLock { $0 }?.stopAdvertising()
    }

    public func shutdown() async { close() }

    public func close() {
        closed.withLock { $0 = true }
        current.withLock { state in
            state?.close()
            state = nil
        }
    }
}

