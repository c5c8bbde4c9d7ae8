import BLECore
import CBlueZShim
import LinuxIO
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One local Bluetooth controller as HCIGETDEVINFO describes it.
public struct BlueZAdapterInfo: Hashable, Sendable, CustomStringConvertible {
    /// The HCI device index (the N of hciN).
    public var id: UInt16
    /// "hci0".
    public var name: String
    /// The identity address; nil while the kernel reports 00:00:00:00:00:00.
    public var address: BluetoothAddress?
    /// HCI_UP: powered on.
    public var isUp: Bool
    /// LMP feature "LE Supported (Controller)" (bit 38: byte 4, 0x40; Core Vol 2 Part C §3.3, BlueZ hci.h `LMP_LE`).
    /// A controller not yet initialised (never powered on) reports no features.
    public var supportsLE: Bool
    /// How the controller is attached: the low nibble of `hci_dev_info.type` (hci.h `HCI_VIRTUAL` 0, `HCI_USB` 1, …).
    public var bus: UInt8

    public init(id: UInt16, name: String, address: BluetoothAddress?, isUp: Bool, supportsLE: Bool = false, bus: UInt8 = 0) {
        self.id = id
        self.name = name
        self.address = address
        self.isUp = isUp
        self.supportsLE = supportsLE
        self.bus = bus
    }

    /// The bus by hci.h's names (HCI_VIRTUAL … HCI_VIRTIO), or its number.
    public var busName: String {
        let names = ["virtual", "USB", "PC card", "UART", "RS232", "PCI", "SDIO", "SPI", "I2C", "SMD", "virtio"]
        return Int(bus) < names.count ? names[Int(bus)] : "bus \(bus)"
    }

    public var description: String { "\(name) \(address?.description ?? "(no address)") \(isUp ? "up" : "down")" }

    /// From `struct hci_dev_info` (92 bytes: dev_id u16 @0, name[8] @2, bdaddr @10, flags u32 @16, type u8 @20,
    /// features[8] @21, …).
    init(_ info: hci_dev_info) {
        let name = withUnsafeBytes(of: info.name) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
        let features = withUnsafeBytes(of: info.features) { Array($0) }
        self.init(
            id: info.dev_id, name: name.isEmpty ? "hci\(info.dev_id)" : name,
            address: BlueZSocketAddress.address(info.bdaddr),
            isUp: info.flags & (UInt32(1) << UInt32(BLEDFU_HCI_UP_BIT)) != 0,
            supportsLE: features.count > 4 && features[4] & 0x40 != 0, bus: info.type & 0x0F)
    }
}

/// Adapter lookup through the HCI ioctls on an unbound raw HCI socket (no capability needed).
enum AdapterLookup {
    /// Every adapter the kernel knows.
    static func list() throws(AdapterError) -> [BlueZAdapterInfo] {
        let fd = try openControlSocket()
        defer { try? fd.close() }
        var request = bledfu_hci_dev_list()
        request.dev_num = UInt16(BLEDFU_HCI_MAX_DEV)
        let listed = withUnsafeMutableBytes(of: &request) { raw in
            valueOrErrno { system_ioctlBuffer(fd.rawValue, BLEDFU_HCIGETDEVLIST, raw) }
        }
        if case .failure(let error) = listed {
            throw BlueZErrors.adapterError(errno: error.rawValue, operation: .adapterLookup)
        }
        let count = min(Int(request.dev_num), Int(BLEDFU_HCI_MAX_DEV))
        let ids: [UInt16] = withUnsafeBytes(of: request.dev_req) { raw in
            raw.bindMemory(to: hci_dev_req.self).prefix(count).map(\.dev_id)
        }
        var adapters: [BlueZAdapterInfo] = []
        for id in ids {
            // An adapter unplugged between the two ioctls is skipped.
            if let info = try? info(fd: fd, id: id) { adapters.append(info) }
        }
        return adapters
    }

    /// The adapter named "hciN" (or the first powered-on one for nil), checked to be present and up.
    static func resolve(_ name: String?) throws(AdapterError) -> BlueZAdapterInfo {
        guard let name else {
            let all = try list()
            if let up = all.first(where: \.isUp) { return up }
            if let down = all.first { throw downError(down) }
            throw AdapterError(.noAdapter, "no Bluetooth adapter found (is the controller plugged in?)")
        }
        guard name.hasPrefix("hci"), let id = UInt16(name.dropFirst(3)) else {
            throw AdapterError(.noAdapter, "\(name) is not an adapter name (expected hci0, hci1, …)")
        }
        let fd = try openControlSocket()
        defer { try? fd.close() }
        let adapter: BlueZAdapterInfo
        do {
            adapter = try info(fd: fd, id: id)
        } catch {
            if error.rawValue == ENODEV { throw AdapterError(.noAdapter, "no Bluetooth adapter \(name)", errno: ENODEV) }
            throw BlueZErrors.adapterError(errno: error.rawValue, operation: .adapterLookup, adapter: name)
        }
        guard adapter.isUp else { throw downError(adapter) }
        return adapter
    }

    /// The adapter's links (HCIGETCONNLIST): handle, peer address, LE or not. Nil when the kernel does not say.
    static func links(adapterID id: UInt16) -> [BlueZLink]? {
        guard let fd = try? openControlSocket() else { return nil }
        defer { try? fd.close() }
        var request = bledfu_hci_conn_list()
        request.dev_id = id
        request.conn_num = UInt16(BLEDFU_CONN_LIST_MAX)
        let listed = withUnsafeMutableBytes(of: &request) { raw in
            valueOrErrno { system_ioctlBuffer(fd.rawValue, BLEDFU_HCIGETCONNLIST, raw) }
        }
        guard case .success = listed else { return nil }
        let count = min(Int(request.conn_num), Int(BLEDFU_CONN_LIST_MAX))
        return withUnsafeBytes(of: request.conn_info) { raw in
            raw.bindMemory(to: hci_conn_info.self).prefix(count).map {
                BlueZLink(handle: $0.handle, address: BlueZSocketAddress.address($0.bdaddr), isLE: $0.type == BLEDFU_LE_LINK)
            }
        }
    }

    static func downError(_ adapter: BlueZAdapterInfo) -> AdapterError {
        AdapterError(
            .adapterDown, "adapter \(adapter.name) is down: power it on with `bluetoothctl power on` or `sudo hciconfig \(adapter.name) up`")
    }

    private static func openControlSocket() throws(AdapterError) -> SocketDescriptor {
        do {
            return try SocketDescriptor.open(domain: BLEDFU_AF_BLUETOOTH, type: CInt(SOCK_RAW.rawValue), protocol: BLEDFU_BTPROTO_HCI)
        } catch {
            throw BlueZErrors.adapterError(errno: error.rawValue, operation: .socket)
        }
    }

    private static func info(fd: SocketDescriptor, id: UInt16) throws(Errno) -> BlueZAdapterInfo {
        var info = hci_dev_info()
        info.dev_id = id
        let result = withUnsafeMutableBytes(of: &info) { raw in
            valueOrErrno { system_ioctlBuffer(fd.rawValue, BLEDFU_HCIGETDEVINFO, raw) }
        }
        _ = try result.get()
        return BlueZAdapterInfo(info)
    }
}

/// One link of an adapter, as HCIGETCONNLIST lists it.
public struct BlueZLink: Sendable, Hashable {
    public var handle: UInt16
    public var address: BluetoothAddress?
    public var isLE: Bool
}
