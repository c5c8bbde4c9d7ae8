import BLECore
import DFUCore
import DFUPackage
import GATT
import Logging

/// Legacy DFU (nRF5 SDK ≤ 11, Adafruit, InfiniTime) as a ``DFUFamily`` (docs/legacy-dfu.md).
///
/// - Detect: the DFU service `00001530-…` and the DFU Version decide (``LegacyDetection``): 0.1 is the application
///   with the legacy buttonless entry; 0.5–0.8 with nothing but a bootloader's services is the bootloader; 0.8
///   among an application's services is InfiniTime's service (ready, application images only).
/// - Plan: a Legacy package (nrfutil 0.5 `dfu_version`, adafruit-nrfutil, or a 2-byte CRC `.dat`); a Secure package
///   is refused with one line. Parts in the hosts' order, SoftDevice and bootloader first.
/// - Jump: `01 04` to the application's Control Point; the bootloader is then at the same address (peer data) or
///   address + 1 (``LegacyBootloaderLocation``).
/// - Upload: ``LegacyDFUDriver`` over ``GATTLegacyTransport``. Legacy DFU cannot resume inside an image: a lost link,
///   a refused packet or a failed validation restarts the part from zero on the next connection (the device is reset
///   first when it still holds the old attempt); the journal payload (``LegacyJournal``) records every restart, the
///   bytes sent again and why, and the pacing the losses taught; ``LegacyRestartPolicy`` bounds it.
/// - After a part the device resets: into its application, or (after a SoftDevice or bootloader) into its
///   bootloader at address + 1 for the next part.
public struct LegacyDFUFamily: DFUFamily {
    public typealias Part = LegacyPart
    public typealias Resume = LegacyJournal

    /// What the jump needs: the DFU Version the application reported (nil: none, an SDK ≤ 6 application).
    public struct Entry: Sendable, Hashable {
        public var version: LegacyDFUVersion?
    }

    public var id: DFUFamilyID { .legacy }
    public var displayName: String { "Legacy DFU" }
    public var advertisedServices: [BluetoothUUID] { [LegacyDFUUUID.service] }

    /// The 00001530-… service, or a Legacy bootloader's name (``LegacyAdvertisement``).
    public func advertises(services: [BluetoothUUID], name: String?) -> Bool {
        LegacyAdvertisement.isLegacy(services: services, name: name)
    }
    public let restartPolicy: LegacyRestartPolicy

    public init(restartPolicy: LegacyRestartPolicy = LegacyRestartPolicy()) { self.restartPolicy = restartPolicy }

    // MARK: Plan

    public func plan(_ package: PackageSource, options: UpdateOptions) throws(DFUError) -> FamilyPlan<LegacyPart> {
        guard package.bytes.starts(with: [0x50, 0x4B, 0x03, 0x04]) else {
            throw DFUError(.incompatiblePackage, "\(package.fileName) is not a zip archive, not a Legacy DFU package", family: id)
        }
        let firmware: FirmwarePackage
        do {
            firmware = try FirmwarePackage(bytes: package.bytes)
        } catch {
            throw DFUError(.invalidPackage, error.message, cause: error, family: id)
        }
        guard firmware.format == .legacy else {
            throw DFUError(
                .incompatiblePackage,
                "\(package.fileName) is a Secure DFU package (protobuf init packets), not a Legacy DFU package; build one with `bledfu package create --dfu-ver 0.5`",
                family: id)
        }
        // The package is ours: now the options must be too (a `--mode` of another family is refused here).
        do {
            _ = try LegacyPacingPolicies.parse(options.pacing)
        } catch {
            throw DFUError(.invalidOption, "--mode \(options.pacing) is not a Legacy DFU mode: \(error)", family: id)
        }
        let report: VerificationReport
        do {
            report = try firmware.verify(pemKeys: options.verificationKeys)
        } catch {
            throw DFUError(.invalidPackage, error.message, cause: error, family: id)
        }
        if let first = report.errors.first { throw DFUError(.invalidPackage, first.message, cause: first, family: id) }
        let all: [LegacyPart]
        do {
            all = try LegacyPart.parts(of: firmware)
        } catch {
            throw DFUError(.invalidPackage, error.reason, cause: error, family: id)
        }
        let parts = all.filter { part in
            switch options.scope {
            case .all: true
            case .system: part.imageType != .application
            case .application: part.imageType == .application
            }
        }
        guard !parts.isEmpty else { throw DFUError(.invalidPackage, "the package has no \(options.scope) part", family: id) }
        // 0xFFFFFFFF: no application version (nrfutil 0.5's default).
        let version = firmware.part(.application)?.legacyInit?.applicationVersion.flatMap { $0 == 0xFFFF_FFFF ? nil : $0 }
        return FamilyPlan(family: id, parts: parts, warnings: firmware.warnings + report.warnings, targetVersion: version)
    }

    // MARK: Detect and jump

    public func detect(_ services: [GATTService], on link: DFULink, context: UpdateContext) async throws(DFUError)
        -> Detection<Entry>?
    {
        guard let service = services.first(where: { $0.uuid == LegacyDFUUUID.service }) else { return nil }
        // A lost link or an ATT error while reading the DFU Version is that error, never "no DFU Version" (which
        // would make an SDK 11 application look like an SDK <= 6 bootloader); a value that is not 2 bytes is a
        // protocol violation, as GATTLegacyTransport.open says too.
        var version: LegacyDFUVersion?
        let hasPacket: Bool
        var bytes: [UInt8]?
        do {
            let characteristics = try await link.gatt.discoverCharacteristics(of: service)
            hasPacket = characteristics.contains { $0.uuid == LegacyDFUUUID.packet }
            if let characteristic = characteristics.first(where: { $0.uuid == LegacyDFUUUID.version }) {
                bytes = try await link.gatt.read(handle: characteristic.valueHandle)
            }
        } catch {
            throw Self.map(error, doing: "reading the Legacy DFU service and its DFU Version")
        }
        if let bytes {
            do {
                version = try LegacyDFUVersion(decoding: bytes)
            } catch {
                throw DFUError(
                    .protocolViolation, "the DFU Version characteristic holds \(bytes.count) byte(s): \(error.reason)",
                    cause: error, family: id)
            }
        }
        guard let mode = LegacyDetection.mode(services: services.map(\.uuid), version: version, hasPacket: hasPacket) else {
            return nil
        }
        switch mode {
        case .bootloader, .applicationService: return .updater(description: mode.description)
        case .application(let version):
            return .application(Entry(version: version), description: mode.description, bonded: false)
        }
    }

    /// A bootloader left by an earlier run (after any reset it has no peer data): address + 1.
    public func updaterLocation(forApplicationAt peer: PeerAddress, options: UpdateOptions) -> DeviceLocation? {
        DeviceLocation(addresses: [peer.address.nordicBootloaderAddress], addressType: peer.type)
    }

    public func enterUpdater(_ entry: Entry, on link: DFULink, context: UpdateContext) async throws(DFUError) -> DeviceLocation {
        let transport: GATTLegacyTransport
        do {
            transport = try await GATTLegacyTransport.open(client: link.gatt)
        } catch {
            throw Self.map(error)
        }
        let outcome: LegacyButtonless.Outcome
        do {
            outcome = try await LegacyButtonless.enterBootloader(over: transport, address: link.peer.address, version: entry.version)
        } catch {
            throw DFUError(.remoteRefusal, "the application refused Start DFU: \(error.reason)", cause: error, family: id)
        }
        context.logger.debug("legacy buttonless jump", metadata: ["dfu.acknowledged": "\(outcome.acknowledged)"])
        return DeviceLocation(addresses: outcome.location.addresses, addressType: link.peer.type)
    }

    // MARK: Errors

    static func map(_ error: LegacyTransportError) -> DFUError {
        switch error.code {
        case .disconnected: DFUError(.linkLost, error.reason, cause: error, family: .legacy)
        case .notLegacy: DFUError(.noUpdateService, error.reason, cause: error, family: .legacy)
        default: DFUError(.protocolViolation, error.reason, cause: error, family: .legacy)
        }
    }

    static func map(_ error: ATTClientError, doing what: String) -> DFUError {
        switch error.code {
        case .disconnected, .closed: DFUError(.linkLost, "the device disconnected while \(what): \(error)", cause: error, family: .legacy)
        case .timeout: DFUError(.timeout, "no answer while \(what): \(error)", cause: error, family: .legacy)
        default: DFUError(.protocolViolation, "\(what): \(error)", cause: error, family: .legacy)
        }
    }
}

extension LegacyPart: UpdatePart {
    public var byteCount: Int { image.count }
}
