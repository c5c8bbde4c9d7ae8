import BLECore
import DFUCore
import DFUPackage
import DFUProtocol
import GATT

/// The checks before the jump, and the way back out of the bootloader.
///
/// The SDK 15 bootloader checks an init command at Execute (`nrf_dfu_ver_validation_check`, secure-dfu-anchors.md
/// 2.3/2.4): `hw_version` must equal its `NRF_DFU_HW_VERSION`, `sd_req` must list the installed SoftDevice's FWID, an
/// application's (or SoftDevice's) `fw_version` must be at least the installed application's, a bootloader's above
/// the installed bootloader's; then the signature. By then the device has jumped: a refusal leaves it in its
/// bootloader. So before the jump the family compares what the application tells in its Device Information: the
/// Hardware Revision with `hw_version`, the Firmware Revision with an application's `fw_version` (both as numbers:
/// "52", nrfutil's "X.Y.Z"); a mismatch refuses the package with the device still in its application. What the
/// application does not tell (the SoftDevice's FWID, the bootloader's version, the signing key) is named as not
/// checked.
extension SecureDFUFamily {
    public func assess(
        _ plan: FamilyPlan<DFUPart>?, device: DeviceInformation, mode: DetectedMode, services: [GATTService],
        on link: DFULink, context: UpdateContext
    ) async throws(DFUError) -> PackageAssessment {
        // The bootloader tells nothing of itself over BLE (its Device Information, if any, is not the application's).
        guard mode != .updater, let plan else { return PackageAssessment() }
        var assessment = PackageAssessment()
        for part in plan.parts {
            guard let packet = try? SecureInitPacket(decoding: part.initPacket) else { continue }
            assessment = assessment.merged(with: Self.assess(part: part.name, packet: packet, device: device))
        }
        return assessment
    }

    /// One part's init command against what the device tells.
    static func assess(part: String, packet: SecureInitPacket, device: DeviceInformation) -> PackageAssessment {
        let command = packet.command
        var result = PackageAssessment()
        if command.isDebug == true {
            result.notChecked.append(
                "\(part): a debug init packet (is_debug): its versions are checked only by a bootloader built without"
                    + " NRF_DFU_DEBUG")
            return result
        }
        if let hw = command.hwVersion {
            switch (device.hardwareRevision, DeviceInformation.number(device.hardwareRevision)) {
            case (_, let told?) where told == hw:
                result.checked.append("\(part): hardware version \(hw) (Hardware Revision \"\(device.hardwareRevision ?? "")\")")
            case (let text?, let told?):
                result.refusals.append(
                    "\(part) is for hardware version \(hw), the device is hardware revision \(told) (\"\(text)\")")
            case (let text?, nil):
                result.notChecked.append("\(part): hardware version \(hw): the Hardware Revision \"\(text)\" is no number")
            case (nil, _):
                result.notChecked.append("\(part): hardware version \(hw): the device tells no Hardware Revision")
            }
        }
        let type = command.type ?? .application
        if let fw = command.fwVersion {
            switch type {
            case .application:
                assessApplicationVersion(fw, part: part, device: device, into: &result)
            case .externalApplication:
                break
            default:
                result.notChecked.append(
                    "\(part): version \(fw): the application does not tell the installed \(type == .softdevice ? "SoftDevice" : "bootloader")'s version")
                result.effect = "\(part) version \(fw)"
            }
        }
        let requirement = command.sdReq
        if type != .externalApplication, !requirement.isEmpty, requirement != [sdReqAppOverwritesSD] {
            let listed = requirement.map { "0x" + String($0, radix: 16, uppercase: true) }.joined(separator: ", ")
            result.notChecked.append("\(part): the SoftDevice (sd_req \(listed)): the application does not tell its FWID")
        }
        if packet.signature != nil {
            result.notChecked.append("\(part): the signing key: the device does not tell which key its bootloader trusts")
        }
        return result
    }

    static func assessApplicationVersion(
        _ fw: UInt32, part: String, device: DeviceInformation, into result: inout PackageAssessment
    ) {
        guard let text = device.firmwareRevision else {
            result.notChecked.append("\(part): version \(fw): the device tells no Firmware Revision")
            result.effect = "\(part) version \(fw)"
            return
        }
        guard let running = DeviceInformation.number(text) else {
            result.notChecked.append("\(part): version \(fw): the Firmware Revision \"\(text)\" is no version number")
            result.effect = "\(part) \(text) → \(fw)"
            return
        }
        result.effect = "\(part) \(running) → \(fw)" + (running == fw ? " (the same version again)" : "")
        if fw >= running {
            result.checked.append("\(part): version \(fw) ≥ the running \(running) (Firmware Revision \"\(text)\")")
        } else {
            result.refusals.append(
                "\(part) version \(fw) is a downgrade from the running \(running) (Firmware Revision \"\(text)\"),"
                    + " which the bootloader refuses (FW version too low)")
        }
    }

    /// `sd_req` 0x00: the application overwrites the SoftDevice (`SD_REQ_APP_OVERWRITES_SD`).
    static var sdReqAppOverwritesSD: UInt32 { 0 }

    /// Abort (`0C`, SDK 15+): `bootloader_reset(true)` at once, no response, and a device whose application is still
    /// valid boots it (`nrf_bootloader.c`). SDK 12-14 bootloaders do not know the opcode: the request handler answers
    /// it like any unknown one (`60 0C 02`, Op code not supported) and the bootloader stays. So after the write the
    /// family waits (at most the response timeout) for either: the link dropping is the reset, an answer to Abort is
    /// the refusal (the device leaves on a power cycle or its own inactivity timeout), silence is taken as the reset.
    public func leaveUpdater(on link: DFULink, context: UpdateContext) async -> UpdaterExit {
        let transport: GATTDFUTransport
        do {
            transport = try await GATTDFUTransport.open(client: link.gatt)
        } catch {
            return .unsupported("the bootloader's Control Point could not be opened: \(error.reason)")
        }
        do {
            try await transport.writeControlPoint(ControlPointRequest.abort.encoded)
        } catch where error.code == .disconnected {
            return .requested  // the bootloader reset at once; the write's response may never come
        } catch {
            return .unsupported("the bootloader refused Abort: \(error.reason)")
        }
        let answers = transport.controlPointNotifications
        let answer = await context.withDeadline(context.options.responseTimeout) { () -> ControlPointResponse? in
            for await bytes in answers {
                if let response = try? ControlPointResponse(decoding: bytes), response.request == .abort { return response }
            }
            return nil  // the link closed: the reset
        }
        if let response = answer ?? nil, response.status != .success {
            return .unsupported(
                "the bootloader answered Abort with \(response.status), as SDK 12-14 do: it leaves on a power cycle or its own "
                    + "inactivity timeout")
        }
        return .requested
    }
}
