import BLECore

/// Where to find a device next: after a jump into its updater, after a part resets it, or after a lost link.
///
/// The updater scans for an advertisement that matches any of ``addresses`` or ``names`` (and, with
/// ``serviceUUIDs`` given, advertises one of them), connects to the first match, and falls back to connecting to
/// ``addresses`` directly when it cannot scan. Families build it from what their firmware does (for example Secure
/// DFU without bonds: the application's address + 1, or the name the host asked the bootloader to advertise).
public struct DeviceLocation: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Candidate addresses, most likely first.
    public var addresses: [BluetoothAddress]
    /// Advertised names that identify the device (complete or shortened local name, compared whole).
    public var names: [String]
    /// The address type to connect with.
    public var addressType: AddressType
    /// Advertised service UUIDs that identify the device (empty: any).
    public var serviceUUIDs: [BluetoothUUID]
    /// How long the updater may look for the device at most, when that is longer than the update's scan timeout (a
    /// device that resets and swaps images first: SMP's reboot timeout). The updater waits on advertisements for
    /// it, on its clock; nil: the scan timeout.
    public var searchTime: Duration?

    public init(
        addresses: [BluetoothAddress], names: [String] = [], addressType: AddressType = .random,
        serviceUUIDs: [BluetoothUUID] = []
    ) {
        self.addresses = addresses
        self.names = names
        self.addressType = addressType
        self.serviceUUIDs = serviceUUIDs
    }

    /// One peer, by its address.
    public init(_ peer: PeerAddress) {
        self.init(addresses: [peer.address], addressType: peer.type)
    }

    /// Both places, without duplicates (this location's candidates first).
    public func merged(with other: DeviceLocation) -> DeviceLocation {
        var copy = self
        for address in other.addresses where !copy.addresses.contains(address) { copy.addresses.append(address) }
        for name in other.names where !copy.names.contains(name) { copy.names.append(name) }
        for uuid in other.serviceUUIDs where !copy.serviceUUIDs.contains(uuid) { copy.serviceUUIDs.append(uuid) }
        if let time = other.searchTime { copy.searchTime = max(copy.searchTime ?? time, time) }
        return copy
    }

    /// Whether an advertisement is this device's: by name, or by address.
    public func matches(_ advertisement: Advertisement) -> Bool {
        let parsed = advertisement.parsed
        if !serviceUUIDs.isEmpty, !parsed.serviceUUIDs.contains(where: serviceUUIDs.contains),
            !addresses.contains(advertisement.peer.address)
        {
            return false
        }
        if let name = parsed.name, names.contains(name) { return true }
        return addresses.contains(advertisement.peer.address)
    }

    /// "DfuTarg or C0:FF:EE:00:00:02".
    public var description: String {
        (names + addresses.map(\.description)).joined(separator: " or ")
    }
}
