import BLECore
import CBOR
import DFUCore
import GATT

/// The checks before an upload (smp-mcuboot.md §1.10, §3): the application is its own updater, so it tells what
/// runs (the image list: version, hash, flags per slot) and, with `MCUMGR_GRP_OS_BOOTLOADER_INFO`, whether MCUboot
/// refuses downgrades (`{"query": "mode"}` → `"no-downgrade": true`, sent by an application built with
/// `CONFIG_MCUBOOT_BOOTLOADER_NO_DOWNGRADE`). MCUboot with downgrade prevention erases a lower version at the next
/// boot and runs the old image again; with the device saying so, an image older than the running one is refused
/// before anything is sent. Equal versions are allowed (`check_downgrade_prevention`); the build number is not
/// compared (only with `MCUBOOT_VERSION_CMP_USE_BUILD_NUMBER`).
extension SMPFamily {
    public func assess(
        _ plan: FamilyPlan<SMPPart>?, device: DeviceInformation, mode: DetectedMode, services: [GATTService],
        on link: DFULink, context: UpdateContext
    ) async throws(DFUError) -> PackageAssessment {
        // The client shares the link with the upload's (as the finish's does); closing it would close the link.
        let client = try await Self.client(on: link, context: context)
        let state: SMPImageState
        do {
            state = try SMPImageState(body: try await client.send(.imageState))
        } catch {
            throw Self.map(error)
        }
        var result = PackageAssessment(facts: [Self.summary(state)].filter { !$0.isEmpty })
        result.updaterIsApplication = true
        let noDowngrade = await Self.refusesDowngrades(client)
        switch noDowngrade {
        case true?: result.facts.append("MCUboot refuses downgrades (bootloader info: no-downgrade)")
        case false?, nil: break
        }
        for part in plan?.parts ?? [] {
            Self.assess(part, state: state, noDowngrade: noDowngrade, into: &result)
        }
        return result
    }

    static func assess(_ part: SMPPart, state: SMPImageState, noDowngrade: Bool?, into result: inout PackageAssessment) {
        let name = "image \(part.imageIndex)"
        guard let running = state.active(image: part.imageIndex) else {
            result.notChecked.append("\(name) \(part.version): the device lists no running image \(part.imageIndex)")
            return
        }
        let effect = "\(name) \(running.version) → \(part.version)"
        result.effect = result.effect.map { "\($0); \(effect)" } ?? effect
        guard let new = Self.version(part.version), let old = Self.version(running.version) else {
            result.notChecked.append("\(name): \(part.version) against the running \(running.version): not comparable")
            return
        }
        guard new.lexicographicallyPrecedes(old) else {
            result.checked.append("\(name): \(part.version) is not below the running \(running.version)")
            return
        }
        switch noDowngrade {
        case true?:
            result.refusals.append(
                "\(name) \(part.version) is a downgrade from the running \(running.version), which MCUboot refuses"
                    + " (the device reports no-downgrade): it would erase it at the next boot and run \(running.version) again")
        case false?, nil:
            result.notChecked.append(
                "\(name) \(part.version) is a downgrade from the running \(running.version): the device does not tell"
                    + " whether MCUboot refuses downgrades")
        }
    }

    /// Whether the device says MCUboot refuses downgrades (`"no-downgrade"`), nil when it does not say (no
    /// bootloader info, off by default; or an application built without the option).
    static func refusesDowngrades(_ client: SMPClient) async -> Bool? {
        guard let body = try? await client.send(.bootloaderInfo(query: "mode"), timeout: .seconds(3), retries: 0) else {
            return nil
        }
        // Without the key the application was built without CONFIG_MCUBOOT_BOOTLOADER_NO_DOWNGRADE: unknown.
        return body["no-downgrade"]?.boolValue
    }

    /// "1.2.3" / "1.2.3.4" → [1, 2, 3] (major, minor, revision; the build number is not compared).
    static func version(_ text: String) -> [Int]? {
        let fields = text.split(separator: ".").map { Int($0) }
        guard fields.count >= 3, fields.allSatisfy({ $0 != nil }) else { return nil }
        return fields.prefix(3).compactMap { $0 }
    }

    /// The application is the updater: there is nothing to leave.
    public func leaveUpdater(on link: DFULink, context: UpdateContext) async -> UpdaterExit { .isApplication }
}
