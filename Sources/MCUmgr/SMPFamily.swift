import BLECore
import DFUCore
import GATT
import DFUPackage
import MCUbootImage

/// MCUmgr SMP into MCUboot as a ``DFUFamily`` (docs/smp.md; smp-mcuboot.md).
///
/// - Detect: the SMP service (8D53DC1D-…) on the application: it is its own updater, no jump.
/// - Plan: an MCUboot image (`.bin`, `.hex`) or an NCS `dfu_application.zip`, one part per image number, verified
///   (hash; with `--key`, key hash and signature) before anything connects; a Nordic DFU zip is another family's.
/// - Upload: ``SMPUploader`` over ``GATTSMPTransport``; the device keeps the upload's offset for the same `sha`, so
///   a lost link or a new run resumes where the device stands (the journal only records the offset for progress).
/// - Finish: `smp.confirm` = `test-and-confirm` (default), `confirm-only` or `upload-only` (``SMPActivation``).
public struct SMPFamily: DFUFamily {
    public typealias Part = SMPPart
    public typealias Resume = SMPResume

    /// SMP applications are their own updater: there is no entry to jump through.
    public struct Entry: Sendable, Hashable {}

    public var id: DFUFamilyID { .smp }
    public var displayName: String { "MCUmgr SMP" }
    public var advertisedServices: [BluetoothUUID] { [SMPUUID.service] }
    public var optionSettings: [String: String] { ["confirm": Self.confirmSetting, "upgrade": Self.upgradeSetting] }

    public init() {}

    // MARK: Plan

    public func plan(_ package: PackageSource, options: UpdateOptions) throws(DFUError) -> FamilyPlan<SMPPart> {
        guard MCUbootPackage.looksLikeMCUboot(package.bytes) else {
            throw DFUError(
                .incompatiblePackage,
                "\(package.fileName) is neither an MCUboot image nor an nRF Connect SDK dfu_application.zip, not an SMP package",
                family: id)
        }
        let firmware: MCUbootPackage
        do {
            firmware = try MCUbootPackage(bytes: package.bytes, name: package.fileName)
        } catch {
            throw DFUError(.invalidPackage, error.message, cause: error, family: id)
        }
        var keys: [MCUbootPublicKey] = []
        for pem in options.verificationKeys {
            do {
                keys.append(try MCUbootPublicKey(pem: pem))
            } catch {
                throw DFUError(.invalidPackage, error.message, cause: error, family: id)
            }
        }
        var parts: [SMPPart] = []
        for part in firmware.parts {
            do {
                try Self.verify(part.image, keys: keys)
            } catch {
                throw DFUError(.invalidPackage, "\(part.name): \(error.message)", cause: error, family: id)
            }
            let keep: Bool
            switch options.scope {
            case .all: keep = true
            case .application: keep = part.imageIndex == 0
            case .system: keep = part.imageIndex != 0
            }
            if keep { parts.append(SMPPart(part)) }
        }
        guard !parts.isEmpty else { throw DFUError(.invalidPackage, "the package has no \(options.scope) image", family: id) }
        // The package is ours: the options must be too, before anything connects.
        _ = try Self.confirmMode(options)
        _ = try Self.upgrade(options)
        guard SMPPacing.configuration(options.pacing, parameters: nil, mtu: 247) != nil else {
            throw DFUError(.invalidOption, "--mode \(options.pacing) is not an SMP mode (\(SMPPacing.modes))", family: id)
        }
        // System images (the network core) first, as NCS hosts send them.
        return FamilyPlan(family: id, parts: parts.filter { $0.imageIndex != 0 } + parts.filter { $0.imageIndex == 0 })
    }

    /// The hash always; with keys, a signature one of them verifies.
    static func verify(_ image: MCUbootImage, keys: [MCUbootPublicKey]) throws(PackageError) {
        guard !keys.isEmpty else {
            _ = try image.verify(key: nil)
            return
        }
        var first: PackageError?
        for key in keys {
            do {
                _ = try image.verify(key: key)
                return
            } catch {
                if error.code != .signatureInvalid { throw error }
                first = first ?? error
            }
        }
        throw first ?? PackageError(.signatureInvalid, "no key verifies the image")
    }

    /// The flow after the upload (`smp.confirm`, `bledfu flash --confirm`).
    static func confirmMode(_ options: UpdateOptions) throws(DFUError) -> SMPUpgradeMode {
        let setting = options.settings[SMPFamily.confirmSetting] ?? SMPUpgradeMode.testAndConfirm.rawValue
        guard let mode = SMPUpgradeMode(rawValue: setting) else {
            let known = SMPUpgradeMode.allCases.map(\.rawValue).joined(separator: ", ")
            throw DFUError(.invalidOption, "\(confirmSetting)=\(setting): expected \(known)", family: .smp)
        }
        return mode
    }

    /// The setting that picks the flow after the upload.
    public static let confirmSetting = "smp.confirm"

    /// The setting that sends `upgrade: true` with the first chunk (`bledfu flash --upgrade`, mcumgr's
    /// `image upload -u`): Zephyr's img_mgmt then refuses an image whose version is not newer than the running one
    /// (rc 27 CURRENT_VERSION_IS_NEWER; SMP v1: rc 6), before it erases anything. `true` or `false` (default).
    public static let upgradeSetting = "smp.upgrade"

    /// The `smp.upgrade` setting.
    static func upgrade(_ options: UpdateOptions) throws(DFUError) -> Bool {
        switch options.settings[upgradeSetting] {
        case nil, "false": return false
        case "true": return true
        case let other?: throw DFUError(.invalidOption, "\(upgradeSetting)=\(other): expected true or false", family: .smp)
        }
    }

    // MARK: Detect

    public func detect(_ services: [GATTService], on link: DFULink, context: UpdateContext) async throws(DFUError)
        -> Detection<Entry>?
    {
        guard services.contains(where: { $0.uuid == SMPUUID.service }) else { return nil }
        return .updater(description: "MCUmgr SMP (MCUboot)")
    }

    public func enterUpdater(_ entry: Entry, on link: DFULink, context: UpdateContext) async throws(DFUError) -> DeviceLocation {
        DeviceLocation(link.peer)
    }
}
