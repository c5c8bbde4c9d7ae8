import BLECore
import CBlueZShim
import Logging
import LinuxIO
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Opens the L2CAP LE ATT fixed channel (CID 4) to a peer (linux-ble.md §1.2):
///
///     socket(AF_BLUETOOTH, SOCK_SEQPACKET|NONBLOCK|CLOEXEC, BTPROTO_L2CAP)
///     bind(sockaddr_l2 { adapter address or BDADDR_ANY, psm 0, cid 4, LE public })
///     [setsockopt(SOL_BLUETOOTH, BT_SECURITY, { level, 0 })]
///     [setsockopt(SOL_SOCKET, SO_SNDBUF, sendBufferBytes)]
///     connect(sockaddr_l2 { peer, psm 0, cid 4, LE public|random })  → EINPROGRESS
///     wait writable (Reactor, with the options' timeout) → getsockopt(SO_ERROR)
///     getsockopt(SOL_L2CAP, L2CAP_CONNINFO) → connection handle
///
/// Every failure closes the socket and maps errno to one `AdapterError`.
public enum L2CAPConnector {
    /// A connected, non-blocking socket and what the kernel told about the link.
    public struct Connection: Sendable {
        public var socket: SocketDescriptor
        public var linkInfo: LinkInfo
    }

    /// - Parameters:
    ///   - source: the adapter's identity address to bind to, nil for BDADDR_ANY.
    ///   - adapterName: for messages.
    public static func connect(
        source: BluetoothAddress?, adapterName: String, to peer: PeerAddress, options: ConnectOptions,
        logger: Logger = Logger(label: "bledfu.bluez")
    ) async throws(AdapterError) -> Connection {
        func failure(_ error: Errno, _ operation: BlueZOperation) -> AdapterError {
            BlueZErrors.adapterError(errno: error.rawValue, operation: operation, adapter: adapterName, peer: peer)
        }
        let fd: SocketDescriptor
        do {
            fd = try SocketDescriptor.open(
                domain: BLEDFU_AF_BLUETOOTH, type: SocketDescriptor.seqPacket, protocol: BLEDFU_BTPROTO_L2CAP)
        } catch {
            throw failure(error, .socket)
        }
        var keep = false
        defer { if !keep { try? fd.close() } }

        var local = BlueZSocketAddress.l2capATT(source, type: BLEDFU_BDADDR_LE_PUBLIC)
        do {
            try withUnsafeBytes(of: &local) { (raw) throws(Errno) in try fd.bind(address: raw) }
        } catch {
            throw failure(error, .bind)
        }
        if let level = options.securityLevel {
            var security = bt_security(level: level, key_size: 0)
            let result = valueOrErrno {
                system_setsockopt(
                    fd.rawValue, BLEDFU_SOL_BLUETOOTH, BLEDFU_BT_SECURITY, &security,
                    socklen_t(MemoryLayout<bt_security>.size))
            }
            if case .failure(let error) = result { throw failure(error, .socketOption) }
        }
        if let bytes = options.sendBufferBytes {
            do { try fd.setSendBufferSize(bytes) } catch { throw failure(error, .socketOption) }
        }

        var remote = BlueZSocketAddress.l2capATT(peer.address, type: BlueZSocketAddress.addressType(peer.type))
        logger.debug("connecting", metadata: ["peer": "\(peer)", "adapter": "\(adapterName)"])
        var phase = BlueZConnectFailure.Phase.immediate
        var waitEnded = false
        do throws(Errno) {
            let started = try withUnsafeBytes(of: &remote) { (raw) throws(Errno) in try fd.connect(address: raw) }
            if case .wouldBlock = started {
                phase = .afterWait
                try await fd.waitWritable(timeout: options.timeout)
                waitEnded = true
                if let pending = try fd.pendingError() { throw pending }
            }
        } catch {
            if phase == .afterWait, !waitEnded {
                // Our own deadline (before the kernel's: 40 s scan phase, 4 or 20 s create phase), or a cancel.
                if error == .timedOut {
                    throw AdapterError(
                        .connectionTimeout,
                        "connecting to \(peer) timed out after \(options.timeout): is the device advertising and in range?",
                        errno: error.rawValue)
                }
                throw AdapterError(.system, "connecting to \(peer) was cancelled", errno: error.rawValue)
            }
            // What the adapter holds now tells the errno's causes apart (many-links.md §2.2, §2.4).
            let links = adapterID(adapterName).flatMap { AdapterLookup.links(adapterID: $0) }
            let failed = BlueZConnectFailure(
                errno: error.rawValue, phase: phase,
                linkToPeerExists: links.map { $0.contains { $0.isLE && $0.address == peer.address } },
                adapterLELinks: links.map { $0.filter(\.isLE).count })
            throw failed.error(adapter: adapterName, peer: peer)
        }

        var info = l2cap_conninfo()
        var length = socklen_t(MemoryLayout<l2cap_conninfo>.size)
        let handle: UInt16?
        switch valueOrErrno({ system_getsockopt(fd.rawValue, BLEDFU_SOL_L2CAP, BLEDFU_L2CAP_CONNINFO, &info, &length) }) {
        case .success: handle = bledfu_btohs(info.hci_handle)
        case .failure(let error):
            // The link works without the handle (it is only needed for HCI link tuning).
            logger.debug("L2CAP_CONNINFO failed", metadata: ["errno": "\(error)"])
            handle = nil
        }
        keep = true
        logger.debug("connected", metadata: ["peer": "\(peer)", "handle": "\(handle.map(String.init) ?? "?")"])
        return Connection(socket: fd, linkInfo: LinkInfo(peer: peer, connectionHandle: handle))
    }

    /// 0 for "hci0"; nil for "any" and other names.
    static func adapterID(_ name: String) -> UInt16? {
        guard name.hasPrefix("hci") else { return nil }
        return UInt16(name.dropFirst(3))
    }
}
