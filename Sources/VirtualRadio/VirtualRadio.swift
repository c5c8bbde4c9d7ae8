import BLECore
import Foundation
import Logging
import LinuxIO
import SystemPackage

/// The central side of the virtual radio (docs/virtual-radio.md): scanning reads the advertisement files of a
/// directory, connecting connects to a device's SEQPACKET socket.
public struct VirtualRadio: BLEAdapter {
    /// How often a scan re-reads the directory.
    public static let scanInterval: Duration = .milliseconds(100)
    /// The largest ATT PDU a virtual link carries (ATT_MTU is at most 517, Core Vol 3 Part F 3.2.9).
    public static let maximumPDUSize = 517

    public let directory: String
    /// This central's adapter on the radio (`virtual:DIR@NAME`; `default` for `virtual:DIR`): its links share one
    /// controller (docs/virtual-radio.md §4.2).
    public let adapterName: String
    private let logger: Logger

    public init(
        directory: String, adapterName: String = VirtualController.defaultName,
        logger: Logger = Logger(label: "bledfu.virtual-radio")
    ) {
        self.directory = directory
        self.adapterName = adapterName
        self.logger = logger
    }

    /// `virtual:DIR` or `virtual:DIR@NAME`: the radio directory and the adapter name (letters, digits, `.`, `_`,
    /// `-`); nil when NAME is not one.
    public static func parse(_ text: String) -> (directory: String, adapter: String)? {
        guard let at = text.lastIndex(of: "@") else { return (text, VirtualController.defaultName) }
        let adapter = String(text[text.index(after: at)...])
        let allowed = adapter.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }
        guard !adapter.isEmpty, adapter.count <= 32, allowed else { return nil }
        return (String(text[..<at]), adapter)
    }

    public var name: String {
        "virtual:\(directory)" + (adapterName == VirtualController.defaultName ? "" : "@\(adapterName)")
    }

    /// The abstract socket name a central binds before it connects: `vr-central:<ADAPTER>:<unique>`.
    static func socketName(adapter: String, unique: UInt64) -> String {
        "vr-central:\(adapter):\(ProcessInfo.processInfo.processIdentifier):\(unique)"
    }

    /// The central's adapter from a connected socket's peer name (nil for an unnamed or foreign one).
    public static func centralAdapter(fromSocketName name: String) -> String? {
        let fields = name.split(separator: ":", omittingEmptySubsequences: false)
        guard fields.count >= 2, fields[0] == "vr-central", !fields[1].isEmpty else { return nil }
        return String(fields[1])
    }

    func path(_ fileName: String) -> String { directory + "/" + fileName }

    // MARK: Scanning

    public func scan(filter: ScanFilter, duration: Duration) -> AsyncThrowingStream<Advertisement, any Error> {
        let (stream, continuation) = AsyncThrowingStream<Advertisement, any Error>.makeStream()
        let task = Task { [self] in
            let clock = ContinuousClock()
            let deadline = clock.now.advanced(by: duration)
            var folder = ScanFolder()
            do {
                while true {
                    for advertisement in try snapshot(folder: &folder) where filter.matches(advertisement) {
                        if folder.isNew(advertisement) { continuation.yield(advertisement) }
                    }
                    let now = clock.now
                    if now >= deadline { break }
                    try await Task.sleep(until: min(deadline, now.advanced(by: VirtualRadio.scanInterval)), clock: clock)
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// A radio directory that does not exist is no adapter (exit 11 at once), not a device that never appears: a
    /// kernel answers ENODEV for an hciN it does not have without waiting for the connection timeout.
    func checkRadioExists() throws(AdapterError) {
        do throws(Errno) {
            _ = try FileIO.listDirectory(directory)
        } catch {
            let reason = error == .noSuchFileOrDirectory || error == .notDirectory
                ? "no such directory (start `bledfu simulate --adapter virtual:\(directory)` first)" : "\(error)"
            throw AdapterError(.noAdapter, "no virtual radio at \(directory): \(reason)", errno: error.rawValue)
        }
    }

    /// The advertisements currently in the directory whose sockets have a listener.
    func snapshot(folder: inout ScanFolder) throws(AdapterError) -> [Advertisement] {
        let names: [String]
        do throws(Errno) {
            names = try FileIO.listDirectory(directory)
        } catch {
            throw AdapterError(.noAdapter, "virtual radio \(directory): \(error)", errno: error.rawValue)
        }
        let listening = ListeningSockets.read()
        var found: [Advertisement] = []
        for name in names.sorted() {
            guard let address = AdvertisementFile.address(fromFileName: name, suffix: ".adv") else { continue }
            // The file may vanish between listing and reading (the device stopped advertising).
            guard let bytes = try? FileIO.read(path(name)) else { continue }
            let advertisement: Advertisement
            do {
                advertisement = try AdvertisementFile.parse(String(decoding: bytes, as: UTF8.self))
            } catch {
                logger.debug("ignoring malformed advertisement", metadata: ["file": "\(name)", "reason": "\(error)"])
                continue
            }
            guard advertisement.peer.address == address else { continue }
            // Directed advertising is addressed to one central: the other adapters' controllers do not report it.
            if let target = advertisement.directedTo, target != adapterName { continue }
            let socketPath = path(AdvertisementFile.socketName(address))
            if !folder.isAlive(socketPath: socketPath, advertisement: advertisement, listening: listening) {
                logger.debug("skipping stale device", metadata: ["address": "\(address)"])
                continue
            }
            found.append(advertisement)
        }
        return found
    }

    // MARK: Connecting

    /// Connects through this central's adapter (docs/virtual-radio.md §4.2): its controller reserves the link
    /// (refusing one beyond its limit, one creation at a time), the connection waits for the device's next
    /// advertising event, and the socket carries the adapter's name to the device.
    public func connect(to peer: PeerAddress, options: ConnectOptions) async throws(AdapterError) -> any ATTBearer {
        try checkRadioExists()
        let socketPath = path(AdvertisementFile.socketName(peer.address))
        let advertisementText = (try? FileIO.read(path(AdvertisementFile.advertisementName(peer.address))))
            .map { String(decoding: $0, as: UTF8.self) }
        if let advertisementText, let advertisement = try? AdvertisementFile.parse(advertisementText),
            advertisement.peer.type != peer.type
        {
            throw AdapterError(.badAddress, "\(peer.address) advertises as \(advertisement.peer.type), not \(peer.type)")
        }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: options.timeout)
        let controller = VirtualController(radio: directory, name: adapterName)
        // Every virtual adapter has a controller (its profile, or the default one; docs/virtual-radio.md §4.2).
        let profile = controller.profile()
        let token = try await controller.reserve(peer: peer, profile: profile, until: deadline)
        let fd: SocketDescriptor
        do throws(AdapterError) {
            if profile.waitsForUnseenDevices { try await waitUntilSeen(peer, socketPath: socketPath, until: deadline) }
            fd = try openCentralSocket(token: token)
            do throws(AdapterError) {
                try await connect(fd, to: socketPath, peer: peer, timeout: clock.now.duration(to: deadline))
                if let bytes = options.sendBufferBytes {
                    do throws(Errno) {
                        try fd.setSendBufferSize(bytes)
                    } catch {
                        throw AdapterError(.system, "SO_SNDBUF: \(error)", errno: error.rawValue)
                    }
                }
            } catch {
                try? fd.close()  // the connect already failed; that error is the one to report
                throw error
            }
            // The kernel creates the connection on the device's next advertising event; on average half an
            // interval away (the device's `interval_ms`, already divided by its speedup).
            if let interval = advertisementText.flatMap(AdvertisementFile.interval(in:)) {
                try? await Task.sleep(for: .microseconds(Int64(interval * 500)))
            }
        } catch {
            await controller.release(token)
            throw error
        }
        await controller.established(token)
        logger.debug("connected", metadata: ["peer": "\(peer)", "adapter": "\(adapterName)"])
        let link = LinkInfo(peer: peer, connectionHandle: nil, maximumPDUSize: VirtualRadio.maximumPDUSize)
        // The link starts unencrypted; the central may raise it (docs/virtual-radio.md §4.1).
        let bearer = VirtualSecureLink(
            SocketBearer(descriptor: fd, linkInfo: link, logger: logger),
            role: .central(timeout: VirtualSecureLink.defaultTimeout))
        return ControllerLinkBearer(bearer) { await controller.release(token) }
    }

    /// A non-blocking SEQPACKET socket bound to this central's name.
    private func openCentralSocket(token: UInt64) throws(AdapterError) -> SocketDescriptor {
        let fd: SocketDescriptor
        do throws(Errno) {
            fd = try SocketDescriptor.unixSeqPacket()
        } catch {
            throw AdapterError(.system, "socket: \(error)", errno: error.rawValue)
        }
        do throws(Errno) {
            try fd.bind(abstractName: VirtualRadio.socketName(adapter: adapterName, unique: token))
        } catch {
            try? fd.close()  // reporting the bind error
            throw AdapterError(.system, "bind: \(error)", errno: error.rawValue)
        }
        return fd
    }

    /// Waits, as the kernel's passive scan does, until the device listens (its socket has a listener) or the
    /// deadline passes: then it was never seen (Linux: ECONNREFUSED after SO_SNDTIMEO, many-links.md §2.3).
    private func waitUntilSeen(_ peer: PeerAddress, socketPath: String, until deadline: ContinuousClock.Instant)
        async throws(AdapterError)
    {
        var folder = ScanFolder()
        let placeholder = Advertisement(peer: peer, rssi: nil, data: [])
        while !folder.isAlive(socketPath: socketPath, advertisement: placeholder, listening: ListeningSockets.read()) {
            guard ContinuousClock.now < deadline else {
                throw AdapterError(
                    .deviceNotFound,
                    "\(peer.address) was not seen advertising before the connection timed out (a kernel reports "
                        + "ECONNREFUSED then)", errno: ECONNREFUSED)
            }
            try? await Task.sleep(for: VirtualRadio.scanInterval)
        }
    }

    private func connect(_ fd: SocketDescriptor, to socketPath: String, peer: PeerAddress, timeout: Duration)
        async throws(AdapterError)
    {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            let result: IOResult<Void>
            do throws(Errno) {
                result = try fd.connect(unixPath: socketPath)
            } catch {
                throw VirtualRadio.connectError(error, peer: peer)
            }
            if case .processed = result { return }
            // The device's accept backlog is full: like a peripheral busy with another central. Retry until the
            // deadline (AF_UNIX gives no writability event for this case).
            guard clock.now < deadline else {
                throw AdapterError(.connectionTimeout, "\(peer.address): no answer within \(timeout)")
            }
            do {
                try await Task.sleep(for: .milliseconds(10), clock: clock)
            } catch {
                throw AdapterError(.connectionTimeout, "\(peer.address): cancelled")
            }
        }
    }

    static func connectError(_ error: Errno, peer: PeerAddress) -> AdapterError {
        switch error {
        case .noSuchFileOrDirectory, .notDirectory:
            return AdapterError(.deviceNotFound, "\(peer.address): no such virtual device", errno: error.rawValue)
        case .connectionRefused:
            return AdapterError(.connectionRefused, "\(peer.address): device not listening", errno: error.rawValue)
        case .permissionDenied:
            return AdapterError(.permissionDenied, "\(peer.address): \(error)", errno: error.rawValue)
        case .timedOut:
            return AdapterError(.connectionTimeout, "\(peer.address): \(error)", errno: error.rawValue)
        default:
            return AdapterError(.system, "\(peer.address): connect: \(error)", errno: error.rawValue)
        }
    }
}

/// Duplicate folding and stale-socket memory for one scan.
struct ScanFolder {
    /// RSSI changes smaller than this are not reported again.
    static let rssiBucket = 5
    private var reported: [BluetoothAddress: Advertisement] = [:]
    private var probed: [String: (advertisement: Advertisement, alive: Bool)] = [:]

    /// True when the device was not reported yet, or its data or RSSI bucket changed.
    mutating func isNew(_ advertisement: Advertisement) -> Bool {
        let previous = reported[advertisement.peer.address]
        reported[advertisement.peer.address] = advertisement
        guard let previous else { return true }
        return previous.data != advertisement.data || previous.peer != advertisement.peer
            || previous.connectable != advertisement.connectable
            || bucket(previous.rssi) != bucket(advertisement.rssi)
    }

    private func bucket(_ rssi: Int8?) -> Int? {
        rssi.map { Int($0 < 0 ? Int($0) - ScanFolder.rssiBucket + 1 : Int($0)) / ScanFolder.rssiBucket }
    }

    /// Whether a device's socket has a listener: from /proc/net/unix when readable, else by a probe connection
    /// (once per advertisement content).
    mutating func isAlive(socketPath: String, advertisement: Advertisement, listening: ListeningSockets?) -> Bool {
        if let listening { return listening.contains(socketPath) }
        if let cached = probed[socketPath], cached.advertisement == advertisement { return cached.alive }
        let alive = ScanFolder.probe(socketPath)
        probed[socketPath] = (advertisement, alive)
        return alive
    }

    /// Connects and closes at once: ECONNREFUSED or ENOENT mean stale; success or a full backlog mean alive.
    static func probe(_ socketPath: String) -> Bool {
        guard let fd = try? SocketDescriptor.unixSeqPacket() else {
            return true  // cannot tell: report the device rather than hide it
        }
        defer { try? fd.close() }  // a probe socket; nothing to report
        do throws(Errno) {
            _ = try fd.connect(unixPath: socketPath)
            return true
        } catch {
            return false
        }
    }
}

/// The listening AF_UNIX sockets of this network namespace (Linux /proc/net/unix), by bound path.
struct ListeningSockets {
    /// __SO_ACCEPTCON in the Flags column.
    static let acceptingFlag: UInt32 = 0x0001_0000
    var paths: Set<String>

    static func read() -> ListeningSockets? {
        guard let bytes = try? FileIO.read("/proc/net/unix") else { return nil }
        return ListeningSockets(parsing: String(decoding: bytes, as: UTF8.self))
    }

    /// Columns: Num RefCount Protocol Flags Type St Inode Path.
    init(parsing text: String) {
        var paths = Set<String>()
        for line in text.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ", maxSplits: 7, omittingEmptySubsequences: true)
            guard fields.count == 8, let flags = UInt32(fields[3], radix: 16),
                flags & ListeningSockets.acceptingFlag != 0
            else { continue }
            paths.insert(String(fields[7]))
        }
        self.paths = paths
    }

    func contains(_ socketPath: String) -> Bool {
        let absolute = ListeningSockets.absolute(socketPath)
        if paths.contains(absolute) || paths.contains(socketPath) { return true }
        // A device that bound a relative path shows that path; match on the file name then.
        let fileName = "/" + (socketPath.split(separator: "/").last.map(String.init) ?? socketPath)
        return paths.contains { !$0.hasPrefix("/") && ("/" + $0).hasSuffix(fileName) }
    }

    static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return URL(fileURLWithPath: path).standardized.path }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(path).standardized.path
    }
}
