import BLECore
import DFUCore
import DFUPackage
import GATT

/// The checks before the jump, and the way back out of the bootloader (legacy-dfu.md §5.4, §7.4).
///
/// A Legacy bootloader checks the init packet at Initialize DFU Parameters: the device type and revision against
/// its UICR (Adafruit: device type 0x0052 only), the SoftDevice list against the installed FWID, a signature on the
/// signing template; it never checks `app_version`. An SDK 11 application tells none of these (its Device
/// Information has a manufacturer, a model and a firmware revision at most), so before the jump the family names
/// them as not checked; an application whose manufacturer is Adafruit runs over Adafruit's bootloader, whose device
/// type rule is fixed (0x0052), so that one is checked. After a refusal, Reset (`06`) makes the bootloader leave: with the old application
/// still valid (dual bank, or nothing erased yet) the device boots it (`main.c`).
extension LegacyDFUFamily {
    public func assess(
        _ plan: FamilyPlan<LegacyPart>?, device: DeviceInformation, mode: DetectedMode, services: [GATTService],
        on link: DFULink, context: UpdateContext
    ) async throws(DFUError) -> PackageAssessment {
        var result = PackageAssessment()
        // InfiniTime's DFU service runs inside the application, next to its own services.
        result.updaterIsApplication =
            mode == .updater && !services.allSatisfy { LegacyDetection.bootloaderServices.contains($0.uuid) }
        guard mode != .updater, let plan else { return result }
        for part in plan.parts {
            guard let packet = try? LegacyInitPacket(decoding: part.initPacket) else { continue }
            if Self.isAdafruit(device), let type = packet.deviceType {
                // Adafruit_nRF52_Bootloader `dfu_init.c`: device type 0x0052 or NRF_ERROR_FORBIDDEN (`10 02 06`); a
                // single-bank Adafruit device has erased its application at Start by then.
                if type == 0x0052 {
                    result.checked.append("\(part.name): device type 0x0052 (an Adafruit bootloader takes no other)")
                } else {
                    result.refusals.append(
                        "\(part.name) is for device type 0x\(hex4(type)); the device's Adafruit bootloader (manufacturer"
                            + " \"\(device.manufacturer ?? "")\") takes device type 0x0052 only")
                }
            } else if let type = packet.deviceType, type != 0xFFFF {
                let revision = packet.deviceRevision.map { "0x" + hex4($0) } ?? "any"
                result.notChecked.append(
                    "\(part.name): device type 0x\(hex4(type)), revision \(revision): the application does not tell them")
            }
            let required = packet.softdeviceReq.filter { $0 != 0xFFFE }
            if !required.isEmpty {
                let listed = required.map { "0x" + hex4($0) }.joined(separator: ", ")
                result.notChecked.append("\(part.name): the SoftDevice (\(listed)): the application does not tell its FWID")
            }
            if packet.signature != nil {
                result.notChecked.append("\(part.name): the signing key: the device does not tell which key its bootloader trusts")
            }
            if let version = packet.applicationVersion, part.imageType == .application {
                let running = device.firmwareRevision.map { "\($0) → " } ?? ""
                result.effect = "\(part.name) \(running)\(version)"
            }
        }
        return result
    }

    /// The application says it is Adafruit's (Bluefruit's Device Information: manufacturer "Adafruit Industries"):
    /// its bootloader is Adafruit_nRF52_Bootloader.
    static func isAdafruit(_ device: DeviceInformation) -> Bool {
        device.manufacturer?.lowercased().hasPrefix("adafruit") == true
    }

    /// Reset (`06`): "disconnect, DFU_RESET → leave bootloader" (legacy-dfu.md §3, §7.4).
    public func leaveUpdater(on link: DFULink, context: UpdateContext) async -> UpdaterExit {
        let transport: GATTLegacyTransport
        do {
            transport = try await GATTLegacyTransport.open(client: link.gatt)
        } catch {
            return .unsupported("the bootloader's Control Point could not be opened: \(error.reason)")
        }
        guard transport.packet != nil else {
            return .unsupported("the device is not in its Legacy DFU bootloader")
        }
        if case .applicationService? = LegacyDetection.mode(
            services: transport.services.map(\.uuid), version: transport.version, hasPacket: true)
        {
            return .isApplication  // InfiniTime: the service is the application's; it answers no Reset.
        }
        do {
            try await transport.writeControlPoint(LegacyRequest.reset.encoded)
        } catch where error.code == .disconnected {
            // The bootloader resets at once; the write's response may never come.
        } catch {
            return .unsupported("the bootloader refused Reset: \(error.reason)")
        }
        return .requested
    }
}
