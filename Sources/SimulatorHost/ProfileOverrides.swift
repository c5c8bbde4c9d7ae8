import DFUPackage
import DFUSimulator
import Foundation

/// The overrides the command line applies to every profile (`--hw-version`, `--sd-fwid`, `--app-version`,
/// `--require-signature`, `--public-key`, `--save-progress`, `--speedup`); nil keeps the profile's value.
public struct ProfileOverrides: Sendable {
    public var hwVersion: UInt32?
    public var softDeviceFWID: UInt16?
    public var applicationVersion: UInt32?
    public var requireSignature: Bool?
    /// PEM texts; nil keeps the profile's keys.
    public var publicKeys: [String]?
    public var saveProgress: Bool?
    public var speedup: Double?

    public init(
        hwVersion: UInt32? = nil, softDeviceFWID: UInt16? = nil, applicationVersion: UInt32? = nil,
        requireSignature: Bool? = nil, publicKeys: [String]? = nil, saveProgress: Bool? = nil, speedup: Double? = nil
    ) {
        self.hwVersion = hwVersion
        self.softDeviceFWID = softDeviceFWID
        self.applicationVersion = applicationVersion
        self.requireSignature = requireSignature
        self.publicKeys = publicKeys
        self.saveProgress = saveProgress
        self.speedup = speedup
    }

    /// What applies to a Legacy device: the SoftDevice FWID, the application version, the speedup. An SMP device
    /// takes `--speedup` and `--public-key` (MCUboot's keys) and refuses the Secure DFU options.
    public func apply(to profile: inout SimulatedProfile) throws(SimulatorError) {
        switch profile {
        case .smp(var smp):
            try apply(to: &smp)
            profile = .smp(smp)
        case .secure(var secure):
            apply(to: &secure)
            profile = .secure(secure)
        case .legacy(var legacy):
            if let softDeviceFWID { legacy.softDeviceFWID = softDeviceFWID }
            if let applicationVersion {
                var image = legacy.installed.application ?? InstalledImage(version: applicationVersion)
                image.version = applicationVersion
                legacy.installed.application = image
            }
            if let speedup { legacy.speedup = speedup }
            profile = .legacy(legacy)
        }
    }

    /// Every override applies to a Secure DFU device.
    public func apply(to profile: inout DeviceProfile) {
        if let hwVersion { profile.hwVersion = hwVersion }
        if let softDeviceFWID { profile.softDeviceFWID = softDeviceFWID }
        if let applicationVersion {
            var image = profile.installed.application ?? InstalledImage(version: applicationVersion)
            image.version = applicationVersion
            profile.installed.application = image
        }
        if let requireSignature { profile.requireSignedApp = requireSignature }
        if let publicKeys { profile.publicKeys = publicKeys }
        if let saveProgress { profile.saveProgress = saveProgress }
        if let speedup { profile.speedup = speedup }
    }

    /// An SMP device takes `--speedup` and `--public-key` (MCUboot's keys); the Secure DFU options do not apply.
    public func apply(to profile: inout SMPDeviceProfile) throws(SimulatorError) {
        let secureOnly: [(String, Bool)] = [
            ("--hw-version", hwVersion != nil), ("--sd-fwid", softDeviceFWID != nil),
            ("--app-version", applicationVersion != nil), ("--require-signature", requireSignature != nil),
            ("--save-progress", saveProgress != nil),
        ]
        if let option = secureOnly.first(where: \.1)?.0 {
            throw SimulatorError(.invalidOverride, "\(option) is a Secure DFU option; \(profile.name) is an SMP device")
        }
        if let publicKeys { profile.mcuboot.publicKeys = publicKeys }
        if let speedup { profile.speedup = speedup }
    }

    /// Reads and checks `--public-key` files (PEM public keys, or private keys whose public half is used); nil for
    /// none.
    public static func readKeys(_ paths: [String]) throws(SimulatorError) -> [String]? {
        guard !paths.isEmpty else { return nil }
        var keys: [String] = []
        for path in paths {
            do throws(PackageError) {
                let pem = try PackageKeys.readPEM(URL(fileURLWithPath: path))
                _ = try PackageKeys.publicKey(pem: pem, name: path)
                keys.append(pem)
            } catch {
                throw SimulatorError(.invalidKey, "--public-key \(path): \(error.message)", cause: error)
            }
        }
        return keys
    }
}
