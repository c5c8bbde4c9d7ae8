import BLECore
import DFUSimulator
import GATT
import Synchronization
import VirtualRadio

/// A ``BLEAdapter`` over virtual SMP devices in this process (as ``VirtualDeviceAdapter`` for Secure DFU devices):
/// a scan reports each device's advertisement, a connection is a real SEQPACKET socket pair whose far end the
/// device serves (after its reset and swap, once it is up again). One connection per device at a time.
public final class VirtualSMPDeviceAdapter: BLEAdapter {
    public let name = "in-process-smp"
    public let devices: [VirtualSMPDevice]
    private let serving = Mutex<[Int: Task<Void, Never>]>([:])
    private let connections = Mutex(0)

    public init(devices: [VirtualSMPDevice]) { self.devices = devices }

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
        guard let index = devices.firstIndex(where: { $0.profile.address == peer.address }) else {
            throw AdapterError(.deviceNotFound, "no virtual SMP device at \(peer.address)")
        }
        await serving.withLock { $0[index] }?.value
        let pair: (any ATTBearer, any ATTBearer)
        do {
            pair = try SeqPacketBearer.makePair(linkInfo: LinkInfo(maximumPDUSize: 517))
        } catch {
            throw AdapterError(.system, "socketpair: \(error)")
        }
        connections.withLock { $0 += 1 }
        let device = devices[index]
        let server = pair.1
        serving.withLock { $0[index] = Task { await device.serve(server) } }
        return pair.0
    }

    public func idle() async {
        for task in serving.withLock({ Array($0.values) }) { await task.value }
    }
}
