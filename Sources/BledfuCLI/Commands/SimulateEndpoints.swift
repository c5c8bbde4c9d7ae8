import BLECore
import BlueZTransport
import Foundation
import PlatformIO
import Synchronization
import VirtualRadio

/// Where `bledfu simulate` serves a device: a virtual radio directory, or a real BlueZ adapter in the peripheral
/// role. `advertise` makes the device's current advertisement the one on the air (moving it to a new address when
/// the address changed: the buttonless jump); `accept` waits for a central; `linkEnded` drops the link once the
/// device has finished with it.
protocol SimulatorEndpoint: Sendable {
    func advertise(_ advertisement: Advertisement) async throws(CLIError)
    func accept() async throws(BearerError) -> SocketBearer
    /// A central connected: the device stops advertising until the link ends (a Nordic peripheral advertises only
    /// while it has no connection: `nrf_dfu_ble.c` restarts advertising on `BLE_GAP_EVT_DISCONNECTED`).
    func connected() async
    /// The connection as the device serves it: with the link's security level (link security messages on the
    /// virtual radio, `BT_SECURITY` on a BlueZ socket).
    func link(_ bearer: SocketBearer) -> any ATTBearer
    func linkEnded(_ bearer: SocketBearer) async
    /// Closes everything (idempotent, from any thread); a pending `accept` ends with `.closed`.
    func close()
    /// The last step of a device loop: like `close`, and waits for what closing needs (advertising off).
    func shutdown() async
}

/// A device on a virtual radio: one `VirtualPeripheralEndpoint` per address, replaced when the address changes.
final class VirtualSimulatorEndpoint: SimulatorEndpoint {
    let radioDirectory: String
    private let current = Mutex<VirtualPeripheralEndpoint?>(nil)
    private let closed = Mutex(false)

    init(radioDirectory: String) {
        self.radioDirectory = radioDirectory
    }

    func advertise(_ advertisement: Advertisement) async throws(CLIError) {
        if let endpoint = current.withLock({ $0 }), endpoint.peer.address == advertisement.peer.address {
            do throws(AdapterError) {
                try endpoint.updateAdvertisement(advertisement)
            } catch {
                throw CLIError(error)
            }
            return
        }
        current.withLock { $0 }?.close()
        let endpoint: VirtualPeripheralEndpoint
        do {
            endpoint = try VirtualPeripheralEndpoint(radio: radioDirectory, advertisement: advertisement)
        } catch {
            throw CLIError(error)
        }
        let stillOpen = closed.withLock { closed -> Bool in
            if !closed { current.withLock { $0 = endpoint } }
            return !closed
        }
        if !stillOpen {
            endpoint.close()
            throw CLIError("stopping", exitCode: BledfuExit.success)
        }
    }

    func accept() async throws(BearerError) -> SocketBearer {
        guard let endpoint = current.withLock({ $0 }) else { throw BearerError(.closed, "endpoint closed") }
        return try await endpoint.acceptSocket()
    }

    /// Removes `<ADDR>.adv`; the socket keeps listening (docs/virtual-radio.md §4: a device that does not advertise
    /// while connected removes its advertisement).
    func connected() async {
        current.withLock { $0 }?.stopAdvertising()
    }

    /// A virtual device encrypts with its "bond" on request (docs/virtual-radio.md §4.1).
    func link(_ bearer: SocketBearer) -> any ATTBearer {
        VirtualSecureLink(bearer, role: .peripheral(maximum: .medium))
    }

    func linkEnded(_ bearer: SocketBearer) async {
        await bearer.close()
    }

    func shutdown() async { close() }

    func close() {
        closed.withLock { $0 = true }
        current.withLock { state in
            state?.close()
            state = nil
        }
    }
}

/// A device on a BlueZ adapter (`--adapter hciN`): the ATT fixed channel listens on the adapter and the controller
/// advertises over HCI; a random device address is set with LE Set Random Address, so the jump to the bootloader at
/// address + 1 happens on the same adapter. Needs CAP_NET_RAW (root).
final class BlueZSimulatorEndpoint: SimulatorEndpoint {
    let peripheral: BlueZPeripheral

    init(adapterName: String) throws(CLIError) {
        do throws(AdapterError) {
            let adapter = try BlueZAdapter(name: adapterName).resolve()
            peripheral = try BlueZPeripheral(adapter: adapter)
        } catch {
            throw CLIError(error)
        }
    }

    func advertise(_ advertisement: Advertisement) async throws(CLIError) {
        do throws(AdapterError) {
            try await peripheral.advertise(advertisement)
        } catch {
            throw CLIError(error)
        }
    }

    func accept() async throws(BearerError) -> SocketBearer {
        try await peripheral.accept(drainingBeforeDisconnect: true)
    }

    /// The controller ended legacy connectable advertising when the connection was made (Core v5.4 Vol 6 Part B
    /// §4.4.2.4); `advertise` turns it on again after the link.
    func connected() async {}

    func link(_ bearer: SocketBearer) -> any ATTBearer { BlueZSecureLink(bearer) }

    /// Closes the socket and then drops the LE link, as a rebooting device does (the kernel would otherwise keep it
    /// for seconds, and the central would wait for the disconnect). The peripheral first waits until the socket's
    /// last PDUs (the response to the final Execute) went to the controller: a Nordic bootloader resets only then.
    func linkEnded(_ bearer: SocketBearer) async {
        let handle = bearer.linkInfo.connectionHandle
        await bearer.close()
        guard let handle else { return }
        await peripheral.disconnect(handle: handle)
    }

    /// From a signal handler: the listener closes at once (ending `accept`); advertising is turned off by
    /// ``shutdown()`` when the device loop ends.
    func close() {
        peripheral.closeListener()
    }

    func shutdown() async {
        await peripheral.close()
    }
}
