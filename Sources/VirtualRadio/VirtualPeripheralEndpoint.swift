import BLECore
import Logging
import LinuxIO
import Synchronization
import SystemPackage

/// The peripheral side of the virtual radio: one advertising device's listening socket and advertisement file
/// (docs/virtual-radio.md). Knows nothing about what the device does with its connections.
///
///     let endpoint = try VirtualPeripheralEndpoint(radio: "/tmp/radio", advertisement: ad)
///     let bearer = try await endpoint.accept()   // a central connected
///     ...
///     endpoint.close()                           // removes <ADDR>.sock and <ADDR>.adv
public final class VirtualPeripheralEndpoint: Sendable {
    /// Pending connections the kernel queues before `accept()` (more connect attempts wait: "busy").
    public static let backlog: CInt = 4

    public let directory: String
    public let peer: PeerAddress
    public let socketPath: String
    public let advertisementPath: String
    /// The listening socket; `close()` closes it once no `accept()` uses its number any more.
    private let listening: SharedDescriptor
    /// Set by the first `close()`.
    private let closing = Mutex(false)
    private let logger: Logger

    /// Creates `<ADDR>.sock` (listening) and, when `advertising`, writes `<ADDR>.adv`. The directory is created if
    /// missing. A stale socket file (no listener) is replaced; a live one gives `.busy`.
    public init(
        radio directory: String, advertisement: Advertisement, advertising: Bool = true,
        logger: Logger = Logger(label: "bledfu.virtual-device")
    ) throws(AdapterError) {
        self.directory = directory
        self.peer = advertisement.peer
        self.socketPath = directory + "/" + AdvertisementFile.socketName(advertisement.peer.address)
        self.advertisementPath = directory + "/" + AdvertisementFile.advertisementName(advertisement.peer.address)
        self.logger = logger
        let fd: SocketDescriptor
        do {
            try FileIO.makeDirectory(directory)
            if ScanFolder.probe(socketPath) {
                throw AdapterError(.busy, "\(socketPath): another device is listening")
            }
            try? FileIO.unlink(socketPath)  // stale or absent: either way the path must be free for bind
            fd = try SocketDescriptor.unixSeqPacket()
            do throws(Errno) {
                try fd.bind(unixPath: socketPath)
                try fd.listen(backlog: VirtualPeripheralEndpoint.backlog)
            } catch {
                try? fd.close()  // bind/listen failed; report that error
                throw error
            }
        } catch let error as AdapterError {
            throw error
        } catch {
            throw AdapterError(.system, "\(socketPath): \(error)", errno: (error as? Errno)?.rawValue)
        }
        self.listening = SharedDescriptor(fd)
        if advertising {
            do throws(AdapterError) {
                try updateAdvertisement(advertisement)
            } catch {
                close()
                throw error
            }
        }
    }

    /// Waits for the next connection. Throws `.closed` once the endpoint is closed.
    public func accept() async throws(BearerError) -> any ATTBearer {
        try await acceptSocket()
    }

    /// Like ``accept()``, typed.
    public func acceptSocket() async throws(BearerError) -> SocketBearer {
        guard let fd = listening.lease() else { throw BearerError(.closed, "endpoint closed") }
        defer { listening.release() }
        while true {
            if listening.isClosed { throw BearerError(.closed, "endpoint closed") }
            let result: IOResult<(SocketDescriptor, String?)>
            do throws(Errno) {
                result = try fd.acceptNamed()
            } catch {
                if listening.isClosed { throw BearerError(.closed, "endpoint closed") }
                throw BearerError(.system, "accept: \(error)", errno: error.rawValue)
            }
            switch result {
            case .processed(let (connection, name)):
                let central = name.flatMap(VirtualRadio.centralAdapter(fromSocketName:))
                logger.debug("central connected", metadata: ["device": "\(peer.address)", "central": "\(central ?? "?")"])
                var link = LinkInfo(peer: nil, connectionHandle: nil, maximumPDUSize: VirtualRadio.maximumPDUSize)
                link.centralAdapter = central
                return SocketBearer(descriptor: connection, linkInfo: link, logger: logger)
            case .wouldBlock:
                do throws(Errno) {
                    try await fd.waitReadable()
                } catch {
                    throw BearerError(.closed, "endpoint closed")
                }
            }
        }
    }

    /// Writes the advertisement file atomically (temporary file + rename). The address stays this endpoint's.
    /// `intervalMilliseconds`: the advertising interval a connecting central waits for (docs/virtual-radio.md §4.2).
    public func updateAdvertisement(_ advertisement: Advertisement, intervalMilliseconds: Double? = nil)
        throws(AdapterError)
    {
        var advertisement = advertisement
        advertisement.peer = peer
        let temporary = directory + "/." + AdvertisementFile.advertisementName(peer.address) + ".tmp"
        let text = AdvertisementFile.encode(advertisement, intervalMilliseconds: intervalMilliseconds)
        do throws(Errno) {
            try FileIO.writeAtomically(advertisementPath, Array(text.utf8), temporaryPath: temporary)
        } catch {
            throw AdapterError(.system, "\(advertisementPath): \(error)", errno: error.rawValue)
        }
    }

    /// Removes the advertisement file (the socket keeps accepting: a device may accept without advertising).
    public func stopAdvertising() {
        try? FileIO.unlink(advertisementPath)  // absent already is the goal
    }

    /// Stops advertising, closes the listening socket and removes its file (idempotent). Pending `accept()` calls
    /// end with `.closed`; open connections are not affected.
    public func close() {
        guard !closing.withLock({ closing in defer { closing = true }; return closing }) else { return }
        stopAdvertising()
        try? FileIO.unlink(socketPath)  // remove first so no new central connects to a dying socket
        // shutdown(2) of a listening socket may report ENOTCONN; the retired number ends a pending accept either way.
        listening.close()
    }

    deinit { close() }
}

/// The name the design documents use for the device-side endpoint.
public typealias VirtualRadioListener = VirtualPeripheralEndpoint
