import BLECore
import LinuxIO

/// An adapter's radio switch as the kernel's rfkill class shows it (`/sys/class/rfkill/rfkillN/`: `name` "hci0",
/// `type` "bluetooth", `soft` and `hard` "0" or "1"; Documentation/ABI/stable/sysfs-class-rfkill). A soft block is
/// `rfkill unblock bluetooth`'s to lift; a hard block is a switch or a firmware setting. Either keeps the adapter
/// from being powered on: HCIDEVUP fails with ERFKILL (net/bluetooth/hci_core.c:hci_dev_do_open).
public struct RfkillState: Sendable, Hashable, CustomStringConvertible {
    /// "rfkill0".
    public var index: String
    public var softBlocked: Bool
    public var hardBlocked: Bool

    public init(index: String, softBlocked: Bool, hardBlocked: Bool) {
        self.index = index
        self.softBlocked = softBlocked
        self.hardBlocked = hardBlocked
    }

    public var description: String {
        switch (softBlocked, hardBlocked) {
        case (false, false): "unblocked"
        case (true, false): "soft-blocked (rfkill unblock bluetooth)"
        case (false, true): "hard-blocked (a switch or the firmware)"
        case (true, true): "hard- and soft-blocked"
        }
    }

    /// The kernel's rfkill class, where `bledfu adapters` reads it.
    public static let sysfsRoot = "/sys/class/rfkill"

    /// The switch of the adapter named `adapter` ("hci0") under `root`; nil when it has none (a virtual adapter, a
    /// kernel without rfkill) or the files do not read.
    public static func of(adapter: String, root: String = sysfsRoot) -> RfkillState? {
        guard let entries = try? FileIO.listDirectory(root) else { return nil }
        for entry in entries.sorted() where entry.hasPrefix("rfkill") {
            let base = root + "/" + entry
            guard field(base + "/name") == adapter, field(base + "/type") == "bluetooth",
                let soft = field(base + "/soft"), let hard = field(base + "/hard")
            else { continue }
            return RfkillState(index: entry, softBlocked: soft != "0", hardBlocked: hard != "0")
        }
        return nil
    }

    private static func field(_ path: String) -> String? {
        guard let bytes = try? FileIO.read(path) else { return nil }
        // sysfs ends each value with a newline.
        return String(decoding: bytes.prefix { $0 != UInt8(ascii: "\n") && $0 != 0 }, as: UTF8.self)
    }
}

/// What `bledfu adapters` says of one kernel adapter: the answer to "why doesn't it see my adapter".
public struct BlueZAdapterStatus: Sendable, Hashable {
    public var info: BlueZAdapterInfo
    /// Its rfkill switch; nil when it has none.
    public var rfkill: RfkillState?
    /// The LE links it holds now (HCIGETCONNLIST); nil when the kernel does not say (the adapter is down).
    public var openLinks: Int?

    public init(info: BlueZAdapterInfo, rfkill: RfkillState?, openLinks: Int?) {
        self.info = info
        self.rfkill = rfkill
        self.openLinks = openLinks
    }
}

extension BlueZAdapter {
    /// Every adapter the kernel knows, powered or not, with its rfkill switch and its open LE links. How many links
    /// a controller allows is not something the kernel or HCI reports: the LE link layer sets no maximum and each
    /// controller caps it by its memory (many-links.md §1.1; S140: 20, Zephyr `hci_usb`: `BT_MAX_CONN`).
    public static func statuses(rfkillRoot: String = RfkillState.sysfsRoot) throws(AdapterError) -> [BlueZAdapterStatus] {
        let adapters = try AdapterLookup.list()
        // The ioctls first, then the sysfs files.
        let links = adapters.map { AdapterLookup.links(adapterID: $0.id)?.filter(\.isLE).count }
        return zip(adapters, links).map { info, open in
            BlueZAdapterStatus(info: info, rfkill: RfkillState.of(adapter: info.name, root: rfkillRoot), openLinks: open)
        }
    }
}
