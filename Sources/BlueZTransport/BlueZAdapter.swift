import BLECore
import Logging
import LinuxIO

/// The BlueZ kernel adapter: ATT over the L2CAP LE fixed channel for connections, a raw HCI socket for scanning.
/// bluetoothd is not needed (but must not hold the link: that is `.busy`).
public struct BlueZAdapter: BLEAdapter {
    /// "hci0", or nil for any adapter (connect lets the kernel route; scan uses the first powered-on adapter).
    public let adapterName: String?
    /// Active scanning (scan requests) gets the scan response data too.
    public var activeScan: Bool
    /// Asked of every new connection (short interval, 2M PHY, long packets); nil leaves the link as the kernel made it.
    public var linkTuning: LinkTuningRequest?
    /// Receives what each tuned link got (docs/vm-test.md); `shouldWarn` is set once per process when it lacks
    /// CAP_NET_RAW.
    public var linkReport: (@Sendable (LinkTuningReport) -> Void)?
    private let logger: Logger

    public init(
        name: String? = nil, activeScan: Bool = true, linkTuning: LinkTuningRequest? = LinkTuningRequest(),
        linkReport: (@Sendable (LinkTuningReport) -> Void)? = nil, logger: Logger = Logger(label: "bledfu.bluez")
    ) {
        self.adapterName = name
        self.activeScan = activeScan
        self.linkTuning = linkTuning
        self.linkReport = linkReport
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
        await ScanActivity.shared.waitIdle()
        // Other bledfu processes on this adapter: no raw scan of theirs runs while the kernel creates our link.
        let lock = source.map { HCIAdapterLock(adapter: $0.name) }
        let logger = self.logger
        let connect = { () async throws(AdapterError) -> L2CAPConnector.Connection in
            try await L2CAPConnector.connect(
                source: source?.address, adapterName: source?.name ?? self.name, to: peer, options: options, logger: logger)
        }
        let connection =
            if let lock {
                try await lock.withLock(.shared, timeout: options.timeout) { (_: Bool) async throws(AdapterError) in try await connect() }
            } else {
                try await connect()
            }
        if let request = linkTuning, let handle = connection.linkInfo.connectionHandle,
            let adapter = source ?? (try? AdapterLookup.list().filter(\.isUp)).flatMap({ $0.count == 1 ? $0[0] : nil })
        {
            var report = await LinkTuner.tune(
                adapter: adapter, handle: handle, socket: connection.socket, request: request, logger: logger)
            report.shouldWarn = !report.privileged && LinkTuningWarnings.process.claim()
            linkReport?(report)
        }
        // Its security can be raised after the connect (BT_SECURITY), where a device refuses a write for it.
        return BlueZSecureLink(
            SocketBearer(descriptor: connection.socket, linkInfo: connection.linkInfo, logger: logger))
    }

    public func scan(filter: ScanFilter, duration: Duration) -> AsyncThrowingStream<Advertisement, any Error> {
        let (stream, continuation) = AsyncThrowingStream<Advertisement, any Error>.makeStream()
        let adapterName = adapterName
        let active = activeScan
        ScanActivity.shared.begin()
        let task = Task {
            defer { ScanActivity.shared.end() }
            do throws(AdapterError) {
                let adapter = try AdapterLookup.resolve(adapterName)
                // Alone on the adapter among bledfu processes: another's connect would stop this raw scan.
                try await HCIAdapterLock(adapter: adapter.name).withLock(.exclusive, timeout: HCIAdapterLock.scanWait) {
                    (_: Bool) async throws(AdapterError) in
                    try await HCIScanner(adapter: adapter, active: active).run(filter: filter, duration: duration) {
                        continuation.yield($0)
                    }
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
