/// A package (or a bare image) as the updater hands it to a family's ``DFUFamily/plan(_:options:)``: its bytes,
/// its file name (families may look at the extension: `.zip`, `.bin`, `.hex`) and its identity for the journal.
public struct PackageSource: Sendable, Hashable {
    /// The file name (no directory), for messages and extension checks.
    public var fileName: String
    public var bytes: [UInt8]
    /// Lowercase hex SHA-256 of ``bytes`` (journals are keyed on it).
    public var sha256: String

    public init(fileName: String, bytes: [UInt8], sha256: String) {
        self.fileName = fileName
        self.bytes = bytes
        self.sha256 = sha256
    }

    /// The file name's extension, lowercased ("zip"), empty when there is none.
    public var fileExtension: String {
        guard let dot = fileName.lastIndex(of: "."), dot != fileName.startIndex else { return "" }
        return String(fileName[fileName.index(after: dot)...]).lowercased()
    }
}

/// Which parts of a package to send.
public enum PartScope: String, Sendable, Hashable, Codable, CaseIterable {
    /// Everything but the application (SoftDevice, bootloader; an SMP network core image).
    case system
    /// The application only.
    case application
    /// Every part, system parts first.
    case all
}

/// What a family's work may depend on besides the package: the user's choices.
public struct UpdateOptions: Sendable, Hashable {
    public var scope: PartScope
    /// PEM public keys the package's signatures must verify with (families that sign packages check them).
    public var verificationKeys: [String]
    /// How data is paced (`--mode`): each family documents what it accepts (Secure DFU: prn:N, checksum:N,
    /// object, burst:N:Tms, adaptive, …) and refuses the rest in ``DFUFamily/plan(_:options:)``.
    public var pacing: String
    /// How long to wait for any answer of the device.
    public var responseTimeout: Duration
    /// The name the updater should advertise after a jump (families whose firmware takes one).
    public var bootloaderName: String?
    /// On cancellation, tell the device to discard the upload (Secure DFU: Abort) instead of keeping it resumable.
    public var abortOnCancel: Bool
    /// How long a device takes to reset before it is looked for.
    public var rebootDelay: Duration
    /// Family-specific settings, `family.key` = value (for example `smp.confirm` = `test`); each family documents
    /// its keys in docs/library.md and ignores the others.
    public var settings: [String: String]

    public init(
        scope: PartScope = .all, verificationKeys: [String] = [], pacing: String = "adaptive",
        responseTimeout: Duration = .seconds(10), bootloaderName: String? = nil, abortOnCancel: Bool = false,
        rebootDelay: Duration = .milliseconds(500), settings: [String: String] = [:]
    ) {
        self.scope = scope
        self.verificationKeys = verificationKeys
        self.pacing = pacing
        self.responseTimeout = responseTimeout
        self.bootloaderName = bootloaderName
        self.abortOnCancel = abortOnCancel
        self.rebootDelay = rebootDelay
        self.settings = settings
    }
}

/// One part of a plan, as the updater sees it (the family's own type carries the rest).
public protocol UpdatePart: Sendable {
    /// For people: "application", "softdevice+bootloader", "image 0".
    var name: String { get }
    /// Image bytes the part uploads (progress is counted in these).
    var byteCount: Int { get }
    /// The version of the application this part installs, as the application then shows it in its Firmware
    /// Revision string (Device Information 0x2A26, a decimal number); nil when the part is no application or the
    /// family cannot tell. After an unacknowledged last step, an application that shows another version is not
    /// the new one (a dual-bank device that lost power boots its old application): the update goes on.
    var applicationVersion: UInt32? { get }
}

extension UpdatePart {
    public var applicationVersion: UInt32? { nil }
}

/// A package turned into parts for one family, in sending order.
public struct FamilyPlan<Part: UpdatePart>: Sendable {
    public var family: DFUFamilyID
    public var parts: [Part]
    /// Non-fatal findings about the package (unknown manifest keys, …); the updater reports them as warnings.
    public var warnings: [String]
    /// The application version the package installs, as a device reports it in its Firmware Revision string
    /// (Secure: the init command's `fw_version`; Legacy: the init packet's application version), for a line's
    /// "skip a device that already runs it" rule; nil when the family has no such number.
    public var targetVersion: UInt32?

    public init(family: DFUFamilyID, parts: [Part], warnings: [String] = [], targetVersion: UInt32? = nil) {
        self.family = family
        self.parts = parts
        self.warnings = warnings
        self.targetVersion = targetVersion
    }

    /// Image bytes over all parts.
    public var totalBytes: Int { parts.reduce(0) { $0 + $1.byteCount } }
}
