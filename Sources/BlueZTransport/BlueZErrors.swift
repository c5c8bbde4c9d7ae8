import BLECore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Which step of an adapter operation failed: it picks the wording of the one-line message.
public enum BlueZOperation: String, Sendable, CaseIterable {
    case socket
    case bind
    case connect
    case socketOption = "setsockopt"
    case scan
    case adapterLookup = "adapter lookup"
}

/// The errno → `AdapterError` table for the BlueZ transport (docs: linux-ble.md §1.7). One clear line each.
public enum BlueZErrors {
    /// The message every operation gives when scanning lacks CAP_NET_RAW.
    public static let scanPermissionMessage =
        "scanning needs CAP_NET_RAW: run as root or grant it with: sudo setcap cap_net_raw,cap_net_admin+eip $(command -v bledfu)"

    /// What every operation says when socket(AF_BLUETOOTH) gives EAFNOSUPPORT.
    public static let noBluetoothMessage = "this kernel has no Bluetooth support (socket: Address family not supported)"

    /// Maps a failed call's errno to the adapter error a user reads.
    /// - Parameters:
    ///   - errno: the errno of the failed call (or SO_ERROR of a failed non-blocking connect).
    ///   - operation: which step failed.
    ///   - adapter: the adapter name for messages ("hci0", or "any adapter").
    ///   - peer: the peer, when connecting.
    public static func adapterError(
        errno code: Int32, operation: BlueZOperation, adapter: String = "any adapter", peer: PeerAddress? = nil
    ) -> AdapterError {
        let target = peer.map { " to \($0)" } ?? ""
        switch code {
        case EAFNOSUPPORT:
            return AdapterError(.noBluetoothInKernel, noBluetoothMessage, errno: code)
        case ENODEV:
            return AdapterError(.noAdapter, "no Bluetooth adapter \(adapter) (\(systemMessage(code)))", errno: code)
        case EHOSTUNREACH, EHOSTDOWN, ENETDOWN:
            return AdapterError(
                .adapterDown,
                "no powered-on Bluetooth adapter (\(adapter)) can reach the peer: power it on with `bluetoothctl power on` (\(systemMessage(code)))",
                errno: code)
        case EACCES, EPERM:
            if operation == .scan {
                return AdapterError(.permissionDenied, scanPermissionMessage, errno: code)
            }
            if operation == .connect {
                return AdapterError(
                    .permissionDenied, "connecting\(target) was refused: pairing or authentication failed (\(systemMessage(code)))",
                    errno: code)
            }
            return AdapterError(.permissionDenied, "\(operation.rawValue) on \(adapter) is not permitted (\(systemMessage(code)))", errno: code)
        case EBUSY:
            return AdapterError(
                .busy, "another program (usually bluetoothd) already holds the ATT channel of this link", errno: code)
        case ETIMEDOUT:
            return AdapterError(
                .connectionTimeout, "connecting\(target) timed out: is the device advertising and in range?", errno: code)
        case ENOSYS:
            // bt_to_errno() default branch, e.g. HCI 0x3E "Connection Failed to be Established".
            return AdapterError(
                .connectionTimeout, "the link\(target) failed to be established (radio interference or the device stopped advertising)",
                errno: code)
        case ECONNREFUSED:
            return AdapterError(.connectionRefused, "the device refused the connection\(target)", errno: code)
        case ECONNRESET, ECONNABORTED, ENOTCONN, EPIPE:
            return AdapterError(.disconnected, "the link\(target) was closed during setup (\(systemMessage(code)))", errno: code)
        case EINVAL where operation == .bind || operation == .connect:
            return AdapterError(.badAddress, "the kernel rejected the address\(target) (\(systemMessage(code)))", errno: code)
        default:
            return AdapterError(.system, "\(operation.rawValue) on \(adapter) failed: \(systemMessage(code))", errno: code)
        }
    }

    /// strerror text for an errno ("Address family not supported by protocol").
    public static func systemMessage(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "errno \(code)" }
        return String(cString: text)
    }
}
