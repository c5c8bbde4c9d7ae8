import BLECore
import GATT

/// What a device says about itself in the standard services: its Device Name (Generic Access 0x2A00) and the
/// Device Information Service (0x180A: manufacturer, model, serial number, hardware, firmware and software
/// revisions). Every field is nil when the device does not publish it; an application usually publishes some of
/// them, a Nordic bootloader none.
///
/// The strings are free text (Bluetooth SIG DIS 1.1); ``number(_:)`` reads the two forms bledfu compares with a
/// package's versions: a decimal number ("52", "3") and nrfutil's `--application-version-string` form "X.Y.Z"
/// (X × 10000 + Y × 100 + Z).
public struct DeviceInformation: Sendable, Hashable, Codable {
    public var name: String?
    public var manufacturer: String?
    public var model: String?
    public var serialNumber: String?
    public var hardwareRevision: String?
    public var firmwareRevision: String?
    public var softwareRevision: String?

    public init(
        name: String? = nil, manufacturer: String? = nil, model: String? = nil, serialNumber: String? = nil,
        hardwareRevision: String? = nil, firmwareRevision: String? = nil, softwareRevision: String? = nil
    ) {
        self.name = name
        self.manufacturer = manufacturer
        self.model = model
        self.serialNumber = serialNumber
        self.hardwareRevision = hardwareRevision
        self.firmwareRevision = firmwareRevision
        self.softwareRevision = softwareRevision
    }

    public static let deviceInformationService = BluetoothUUID(0x180A)
    public static let genericAccessService = BluetoothUUID(0x1800)

    /// Reads what the device publishes. A characteristic that cannot be read (an ATT error, no answer in time) is
    /// left out, and so is the rest of its service after a timeout; only a lost link throws
    /// ``DFUError/Code/connection``. What a device does not tell is never a reason to stop an update.
    public static func read(_ services: [GATTService], on link: DFULink) async throws(DFUError) -> DeviceInformation {
        var information = DeviceInformation()
        do {
            if let access = services.first(where: { $0.uuid == genericAccessService }) {
                let values = try await readAll(access, on: link)
                information.name = values[BluetoothUUID(0x2A00)]
            }
            if let dis = services.first(where: { $0.uuid == deviceInformationService }) {
                let values = try await readAll(dis, on: link)
                information.manufacturer = values[BluetoothUUID(0x2A29)]
                information.model = values[BluetoothUUID(0x2A24)]
                information.serialNumber = values[BluetoothUUID(0x2A25)]
                information.hardwareRevision = values[BluetoothUUID(0x2A27)]
                information.firmwareRevision = values[BluetoothUUID(0x2A26)]
                information.softwareRevision = values[BluetoothUUID(0x2A28)]
            }
        } catch where [.disconnected, .closed].contains(error.code) {
            throw DFUError(.connection, "the device disconnected while reading its Device Information: \(error)", cause: error)
        } catch {
            // A device that does not answer (or refuses discovery) tells nothing more.
        }
        return information
    }

    /// Every readable characteristic of `service` as text (UTF-8, trailing NULs and spaces trimmed).
    static func readAll(_ service: GATTService, on link: DFULink) async throws(ATTClientError) -> [BluetoothUUID: String] {
        var values: [BluetoothUUID: String] = [:]
        for characteristic in try await link.gatt.discoverCharacteristics(of: service)
        where characteristic.properties.contains(.read) {
            let bytes: [UInt8]
            do {
                bytes = try await link.gatt.read(handle: characteristic.valueHandle)
            } catch where error.code == .remote {
                continue  // Not readable now (authentication, say): the device does not tell it.
            }
            values[characteristic.uuid] = text(bytes)
        }
        return values
    }

    static func text(_ bytes: [UInt8]) -> String {
        var trimmed = bytes
        while let last = trimmed.last, last == 0 || last == 0x20 { trimmed.removeLast() }
        return String(decoding: trimmed, as: UTF8.self)
    }

    /// A revision string as a number: "52" → 52, "2.7.31" → 20731 (nrfutil's version string), "0x34" → 52; nil
    /// for anything else ("rev B", "1.2.3-beta", an empty string).
    public static func number(_ text: String?) -> UInt32? {
        guard let text = text?.trimmingWhitespace, !text.isEmpty else { return nil }
        if text.hasPrefix("0x") || text.hasPrefix("0X") { return UInt32(text.dropFirst(2), radix: 16) }
        if let value = UInt32(text) { return value }
        let fields = text.split(separator: ".", omittingEmptySubsequences: false)
        guard fields.count == 3, let x = UInt32(fields[0]), let y = UInt32(fields[1]), let z = UInt32(fields[2]),
            y < 100, z < 100
        else { return nil }
        let (value, overflow) = x.multipliedReportingOverflow(by: 10000)
        return overflow ? nil : value &+ y * 100 &+ z
    }

    /// "nRF52832 (hardware 52, firmware 1), bledfu virtual device" for people; nil fields left out.
    public var summary: String {
        var parts: [String] = []
        if let model { parts.append(model) }
        var revisions: [String] = []
        if let hardwareRevision { revisions.append("hardware \(hardwareRevision)") }
        if let firmwareRevision { revisions.append("firmware \(firmwareRevision)") }
        if let softwareRevision { revisions.append("software \(softwareRevision)") }
        if !revisions.isEmpty { parts.append("(" + revisions.joined(separator: ", ") + ")") }
        var line = parts.joined(separator: " ")
        if let manufacturer { line += line.isEmpty ? manufacturer : ", \(manufacturer)" }
        return line.isEmpty ? "no Device Information" : line
    }
}

extension String {
    var trimmingWhitespace: String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}
