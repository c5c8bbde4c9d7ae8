import BLECore
import DFUSimulator
import GATT
import Synchronization
import TestDoubles
import VirtualRadio

/// A ``BLEAdapter`` over virtual devices in this process: a scan reports each device's current advertisement,
/// a connection is a new bearer pair (real `socketpair(AF_UNIX, SOCK_SEQPACKET)` sockets, or in-memory) whose far
/// end the device serves. One connection per device at a time, as a peripheral has: a new connection waits until
/// the device finished serving the previous one (its link was closed by the updater or by the device).
public final class VirtualDeviceAdapter: BLEAdapter {
    public enum Link: Sendable {
        /// `SeqPacketBearer.makePair()`: the kernel carries every PDU.
        case socketPair
        /// `InMemoryBearer.makePair(capacity: 64)`.
        case inMemory
    }

    public let name = "in-process"
    public let devices: [any HostedDevice]
    private let link: Link
    private let serving = Mutex<[Int: Task<Void, Never>]>([:])
    private let connections = Mutex(0)

    public init(devices: [any HostedDevice], link: Link = .socketPair) {
        self.devices = devices
        self.link = link
    }

    /// Connections made so far.
    public var connectionCount: Int { connections.withLock { $0 } }

    public func scan(filter: ScanFilter, duration: Duration) -> AsyncThrowingStream<Advertisement, any Error> {
        let devices = self.devices
        return AsyncThrowingStream { continuation in
            let task = Task {
                for device in devices {
                    let advertisement = await device.currentAdvertisement
                    if filter.matches(advertisement) { continuation.yield(advertisement) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    public func connect(to peer: PeerAddress, options: ConnectOptions) async throws(AdapterError) -> any ATTBearer {
        var index: Int?
        for (position, device) in devices.enumerated() {
            // The previous connection first ends (the device may move to another address when it does).
            let previous = serving.withLock { $0[position] }
            await previous?.value
            if await device.currentAdvertisement.peer.address == peer.address {
                index = position
                break
            }
        }
        guard let index else { throw AdapterError(.deviceNotFound, "no virtual device at \(peer.address)") }
        let device = devices[index]
        let client: any ATTBearer
        let server: any ATTBearer
        switch link {
        case .socketPair:
            do {
                (client, server) = try SeqPacketBearer.makePair()
            } catch {
                throw AdapterError(.system, "socketpair: \(error)")
            }
        case .inMemory:
            let pair = InMemoryBearer.makePair(capacity: 64)
            (client, server) = (pair.0, pair.1)
        }
        connections.withLock { $0 += 1 }
        serving.withLock { $0[index] = Task { await device.serve(server) } }
        return client
    }

    /// Waits until every device finished serving its last connection.
    public func idle() async {
        for task in serving.withLock({ Array($0.values) }) { await task.value }
    }
}
