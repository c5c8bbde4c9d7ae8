import BLECore
import GATT

/// One DFU protocol family (Secure DFU, Legacy DFU, MCUmgr SMP) as the updater drives it. The updater owns the
/// flow (connect, pick the family, jump, find the updater, every part, reconnect and resume, journal, stop at a
/// safe point); a family owns its protocol: how to recognise a device, how to read a package, how to get into the
/// updater, how to send one part over one link, and what to do after the last one. It makes no syscalls and reads
/// time only from ``UpdateContext/clock``.
///
/// Adding a family touches no updater code: implement this protocol in a module of its own (imports DFUCore) and
/// add it to the default list (BledfuKit's `DefaultFamilies.swift`); docs/architecture.md walks through it.
public protocol DFUFamily: Sendable {
    /// One part of this family's plans.
    associatedtype Part: UpdatePart
    /// What ``detect(_:on:context:)`` learned about an application that the jump needs (a characteristic, say).
    associatedtype Entry: Sendable
    /// The family's resume state, stored in the journal after every safe point.
    associatedtype Resume: Codable & Sendable

    var id: DFUFamilyID { get }
    /// For people: "Secure DFU".
    var displayName: String { get }
    /// The primary services that name this family's devices, in an advertisement or on a connection (Secure DFU:
    /// FE59). `bledfu scan` and a line's discovery ask the families for them; no code above the families lists a
    /// DFU service.
    var advertisedServices: [BluetoothUUID] { get }
    /// Whether an advertisement with these service UUIDs and this name is this family's device. By default: it
    /// lists one of ``advertisedServices`` (Legacy DFU also knows its bootloaders' names: they advertise no service).
    func advertises(services: [BluetoothUUID], name: String?) -> Bool
    /// The family's settings (``UpdateOptions/settings`` keys) that a command-line option sets, by the option's
    /// name without dashes (SMP: `confirm` → `smp.confirm`). The CLI maps its options through this; it names no
    /// family's setting itself. Empty by default.
    var optionSettings: [String: String] { get }

    /// Turns a package into this family's parts, in sending order, keeping only `options.scope`. Throws
    /// ``DFUError/Code/incompatiblePackage`` with one clear line for a package of another family ("app.zip is a
    /// Legacy DFU package (dfu_version 0.5), not a Secure DFU package") and ``DFUError/Code/invalidPackage`` for a
    /// package of this family that is malformed or fails verification.
    func plan(_ package: PackageSource, options: UpdateOptions) throws(DFUError) -> FamilyPlan<Part>

    /// Says whether the connected device is this family's, and in which mode, from its primary services (reading
    /// a characteristic when the services alone cannot tell). Nil: not this family's device.
    func detect(_ services: [GATTService], on link: DFULink, context: UpdateContext) async throws(DFUError)
        -> Detection<Entry>?

    /// Where this family's updater advertises for a device whose application is at `peer`, when it is left there
    /// by an earlier run (Secure DFU without bonds: address + 1). Nil when it is the application itself.
    func updaterLocation(forApplicationAt peer: PeerAddress, options: UpdateOptions) -> DeviceLocation?

    /// Jumps from the application into the updater (buttonless) and says where the updater will be. The updater
    /// closes `link` afterwards (the device usually drops it first).
    func enterUpdater(_ entry: Entry, on link: DFULink, context: UpdateContext) async throws(DFUError) -> DeviceLocation

    /// Sends one part over one link, resuming from ``PartContext/resume`` and from what the device reports;
    /// reports progress and saves the journal at every safe point (``PartContext/checkpoint(_:confirmedBytes:)``);
    /// honours ``UpdateContext/stop`` (ends with ``DFUError/Code/stopped`` at the next safe point). Returns what
    /// happens to the device next. A lost link throws ``DFUError/Code/linkLost`` (the updater reconnects and calls
    /// again with the saved state); a loss while the device may be installing throws ``DFUError/Code/unconfirmed``.
    func upload(_ part: Part, on link: DFULink, context: PartContext<Resume>) async throws(DFUError) -> PartOutcome

    /// After the last part: whatever makes the update take effect and checks it (SMP: test or confirm, reset,
    /// reconnect, read the image state; a device that reverted throws ``DFUError/Code/reverted``). `link` is the
    /// last part's link when it stayed up (nil after a reset); `location` is where the device will be.
    func finish(_ plan: FamilyPlan<Part>, on link: DFULink?, location: DeviceLocation, context: UpdateContext)
        async throws(DFUError) -> FinishOutcome

    /// What the connected device tells in `mode` (its primary `services` and ``DeviceInformation``, already read, and whatever the family
    /// can ask it) and, with a plan, whether it would take the package: called before the jump (and before an
    /// updater that is the application itself takes anything). A family checks what its bootloader would check
    /// (Secure DFU: `hw_version`, `fw_version`, `sd_req` by the SDK's rules) against what the device tells, and
    /// names what it cannot check. Default: nothing known, nothing checked.
    func assess(
        _ plan: FamilyPlan<Part>?, device: DeviceInformation, mode: DetectedMode, services: [GATTService],
        on link: DFULink, context: UpdateContext
    ) async throws(DFUError) -> PackageAssessment

    /// After the updater refused a part (or when a device was left in its updater): asks it to reset into the
    /// application, where it allows that (Secure DFU: Abort `0C`, SDK 15+; Legacy DFU: Reset `06`). The updater
    /// then looks where the device went. Default: ``UpdaterExit/unsupported(_:)``.
    func leaveUpdater(on link: DFULink, context: UpdateContext) async -> UpdaterExit
}

extension DFUFamily {
    public var optionSettings: [String: String] { [:] }

    public func advertises(services: [BluetoothUUID], name: String?) -> Bool {
        advertisedServices.contains(where: services.contains)
    }

    public func updaterLocation(forApplicationAt peer: PeerAddress, options: UpdateOptions) -> DeviceLocation? { nil }

    public func finish(_ plan: FamilyPlan<Part>, on link: DFULink?, location: DeviceLocation, context: UpdateContext)
        async throws(DFUError) -> FinishOutcome
    {
        FinishOutcome()
    }

    public func assess(
        _ plan: FamilyPlan<Part>?, device: DeviceInformation, mode: DetectedMode, services: [GATTService],
        on link: DFULink, context: UpdateContext
    ) async throws(DFUError) -> PackageAssessment {
        PackageAssessment()
    }

    public func leaveUpdater(on link: DFULink, context: UpdateContext) async -> UpdaterExit {
        .unsupported("\(displayName) has no request that makes its updater reset into the application")
    }
}

/// What ``DFUFamily/detect(_:on:context:)`` found.
public enum Detection<Entry: Sendable>: Sendable {
    /// Ready to take the image on this link (a bootloader; an SMP application with the SMP service).
    case updater(description: String)
    /// The application, with a way into the updater (buttonless): jump first.
    case application(Entry, description: String, bonded: Bool)
    /// The application, without a way into the updater: nothing this family can do.
    case applicationWithoutEntry(reason: String)

    /// The mode for events.
    public var mode: DetectedMode {
        switch self {
        case .updater: .updater
        case .application: .application
        case .applicationWithoutEntry: .applicationWithoutEntry
        }
    }
}

/// What happens to the device after a part.
public struct PartOutcome: Sendable, Hashable {
    public enum After: Sendable, Hashable {
        /// The device resets (into its updater for the next part, or into the application); it will be at this
        /// location. The updater reconnects and detects the mode again.
        case resets(DeviceLocation)
        /// The link stays up: the next part (or ``DFUFamily/finish(_:on:location:context:)``) goes over it.
        case staysConnected
    }

    public var after: After
    /// One line for people about how the part got there, when there is something to say ("restarted once, 8192
    /// bytes sent again (link lost ×1)"): the updater puts it into the result's summary.
    public var summary: String?

    public init(after: After, summary: String? = nil) {
        self.after = after
        self.summary = summary
    }

    public static func resets(_ location: DeviceLocation, summary: String? = nil) -> PartOutcome {
        PartOutcome(after: .resets(location), summary: summary)
    }
    public static let staysConnected = PartOutcome(after: .staysConnected)
}

/// What ``DFUFamily/finish(_:on:location:context:)`` found.
public struct FinishOutcome: Sendable, Hashable {
    /// One line for people ("slot 0: 1.2.3, active, confirmed"), nil when there is nothing to say.
    public var summary: String?

    public init(summary: String? = nil) { self.summary = summary }
}
