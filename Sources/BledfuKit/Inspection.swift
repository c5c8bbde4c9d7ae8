import BLECore
import DFUCore

/// What a look at a device found (``Updater/inspect(_:)``): the family and mode the families' `detect` recognise,
/// what it tells in its Device Information, and what its family makes of it and, given a package, of an update with
/// that package (``PackageAssessment``: the versions it tells, the package's requirements checked, refused or not
/// checkable, what the update would do). `bledfu device info` prints it; `bledfu batch` probes with it.
public struct DeviceInspection: Sendable, Hashable, Codable {
    /// Where the device answered (the application's address, or its updater's).
    public var address: String
    /// The family that recognised it, nil when none did.
    public var family: DFUFamilyID?
    public var familyName: String?
    public var mode: DetectedMode?
    /// Why the family cannot update it (an application without a way into its updater), or why no family took it.
    public var note: String?
    public var information: DeviceInformation
    public var assessment: PackageAssessment
    /// The package assessed, when one was given.
    public var package: String?

    public init(
        address: String, family: DFUFamilyID? = nil, familyName: String? = nil, mode: DetectedMode? = nil,
        note: String? = nil, information: DeviceInformation = DeviceInformation(),
        assessment: PackageAssessment = PackageAssessment(), package: String? = nil
    ) {
        self.address = address
        self.family = family
        self.familyName = familyName
        self.mode = mode
        self.note = note
        self.information = information
        self.assessment = assessment
        self.package = package
    }

    /// Whether the device runs its application (also when its updater is the application itself, or when no family
    /// knows it); false when it waits in its bootloader.
    public var runsApplication: Bool { mode != .updater || assessment.updaterIsApplication }

    /// The application's version as the line records it: the Firmware Revision as a number ("3", "2.7.31").
    public var applicationVersion: UInt32? {
        runsApplication ? DeviceInformation.number(information.firmwareRevision) : nil
    }
}

/// Which device to look at, and how.
public struct InspectionRequest: Sendable {
    public var target: UpdateTarget
    /// With a package, the inspection says what an update with it would do.
    public var package: PackageSource?
    /// Only this family (nil: every family the updater knows).
    public var family: DFUFamilyID?
    public var options: UpdateOptions
    /// How long to look for the device when it is not at its address at once (by name, rebooting, or in its
    /// updater at another address).
    public var scanTimeout: Duration
    public var connectTimeout: Duration
    public var securityLevel: UInt8?
    /// Look only at the device's own address, waiting up to ``scanTimeout`` for it to advertise (after an update
    /// the device reboots into its application); otherwise a device not there is looked for where its updater
    /// would be too.
    public var applicationOnly: Bool

    public init(
        target: UpdateTarget, package: PackageSource? = nil, family: DFUFamilyID? = nil,
        options: UpdateOptions = UpdateOptions(), scanTimeout: Duration = .seconds(10),
        connectTimeout: Duration = .seconds(10), securityLevel: UInt8? = nil, applicationOnly: Bool = false
    ) {
        self.target = target
        self.package = package
        self.family = family
        self.options = options
        self.scanTimeout = scanTimeout
        self.connectTimeout = connectTimeout
        self.securityLevel = securityLevel
        self.applicationOnly = applicationOnly
    }

    /// The same as an update request (the flow that connects is the update's).
    var updateRequest: UpdateRequest {
        UpdateRequest(
            package: package ?? PackageSource(fileName: "", bytes: [], sha256: ""), target: target, family: family,
            options: options, reconnect: ReconnectPolicy(attempts: 0), scanTimeout: scanTimeout,
            connectTimeout: connectTimeout, securityLevel: securityLevel)
    }
}

/// How ``Updater/leaveUpdater(_:)`` ended.
public struct UpdaterExitReport: Sendable, Hashable {
    /// The device as found before (in its updater, or already in its application).
    public var before: DeviceInspection
    /// Whether the device now runs its application.
    public var backInApplication: Bool
    /// One line for people: "the device is back in its application (C6:05:04:03:02:01)".
    public var message: String
}

extension Updater {
    /// Connects to the device, recognises its family and mode, reads what it tells, and (with a package) assesses
    /// an update with it. Sends nothing that changes the device. Waits are on the updater's clock.
    public func inspect(_ request: InspectionRequest) async throws(DFUError) -> DeviceInspection {
        let flow = UpdateFlow(updater: self, request: request.updateRequest, events: Self.discardedEvents())
        let (inspection, link, _) = try await flow.inspect(request)
        await link.close()
        return inspection
    }

    /// Brings a device left in its updater back to its application (`bledfu device reset`): Secure DFU Abort,
    /// Legacy DFU Reset; then looks where the device went. A device already in its application is left alone.
    /// Throws ``DFUError/Code/remoteRefusal`` when the device stays in its updater (no valid application, or no
    /// way out), ``DFUError/Code/notFound`` when it does not show up again.
    public func leaveUpdater(_ request: InspectionRequest) async throws(DFUError) -> UpdaterExitReport {
        let flow = UpdateFlow(updater: self, request: request.updateRequest, events: Self.discardedEvents())
        return try await flow.leaveUpdater(request)
    }

    static func discardedEvents() -> AsyncStream<UpdateEvent>.Continuation {
        AsyncStream.makeStream(of: UpdateEvent.self, bufferingPolicy: .bufferingNewest(0)).continuation
    }
}
