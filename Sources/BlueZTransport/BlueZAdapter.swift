import BLECore
import Logging
import PlatformIO

/// The BlueZ kernel adapter: ATT over the L2CAP LE fixed channel for connections, a raw HCI socket for scanning.
/// bluetoothd is not needed (but must not hold the link: that is `.busy`).
public struct BlueZAdapter: BLEAdapter {
    /// "hci0", or nil for any adapter (connect lets the kernel route; scan uses the first powered-on adapter).
    public let adapterName: String?
    /// Active scanning (scan requests) gets the scan response data too.
    public var activeScan: Bool
    private let logger: Logger

    public init(name: String? = nil, activeScan: Bool = true, logger: Logger = Logger(label: "bledfu.bluez")) {
        self.adapterName = name
        self.activeScan = activeScan
        self.logger = logger
    }

    public var name: String { adapterName ?? "any adapter" }

    /// Every adapter the kernel knows (HCIGETDEVLIST + HCIGETDEVINFO, no capability needed).
    public static func adapters() throws(AdapterError) -> [BlueZAdapterInfo] {
        try AdapterLookup.list()
    }

    /// The adapter this value names, checked to be present and powered on.
    public func resolve() throws(AdapterError) -> BlueZAdapterInfo {
        try AdapterLookup.resolve(adapterName)
    }

    public func connect(to peer: PeerAddress, options: ConnectOptions) async throws(AdapterError) -> any ATTBearer {
        var source: BlueZAdapterInfo?
        if adapterName != nil { source = try resolve() }
        let connection = try await L2CAPConnector.connect(
            source: source?.address, adapterName: source?.name ?? name, to: peer, options: options, logger: logger)
        return SocketBearer(descriptor: connection.socket, linkInfo: connection.linkInfo, logger: logger)
    }

    public func scan(filter: ScanFilter, duration: Duration) -> AsyncThrowingStream<Advertisement, any Error> {
        let (stream, continuation) = AsyncThrowingStream<Advertisement, any Error>.makeStream()
        let adapterName = adapterName
        let active = activeScan
        let task = Task {
            do throws(AdapterError) {
                let adapter = try AdapterLookup.resolve(adapterName)
                try await HCIScanner(adapter: adapter, active: active).run(filter: filter, duration: duration) {
                    continuation.yield($0)
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
