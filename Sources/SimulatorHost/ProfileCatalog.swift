import BLECore
import DFUPackage
import DFUSimulator
import Foundation

/// Where the simulator finds its device profiles (Firmware/NAME.json) and samples (Firmware/samples), wherever the
/// binary is (issue 19 point 5; docs/simulator.md, "Where profiles are found"):
///
/// 1. `$BLEDFU_FIRMWARE_DIR`;
/// 2. `./Firmware` (the current directory);
/// 3. `<bin>/../share/bledfu/Firmware` (an installed bledfu: `/usr/bin/bledfu` reads `/usr/share/bledfu/Firmware`);
/// 4. a `Firmware/` directory beside the executable or above it (a checkout's `.build/debug/bledfu`);
/// 5. the profiles built into the binary (``builtIn``; bledfu's are generated from Firmware/*.json by
///    tools/generate-embedded): a lone copy of the binary still simulates every bundled device.
public struct ProfileCatalog: Sendable {
    /// The Firmware directory of steps 1-4, or nil.
    public var directory: URL?
    /// Profile JSON texts by lower-case name (step 5).
    public var builtIn: [String: String]

    public init(directory: URL?, builtIn: [String: String]) {
        self.directory = directory
        self.builtIn = builtIn
    }

    /// The first Firmware directory of steps 1-4, or nil.
    public static func firmwareDirectory(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        currentDirectory: String = FileManager.default.currentDirectoryPath, executable: URL = executableURL
    ) -> URL? {
        if let explicit = environment["BLEDFU_FIRMWARE_DIR"], !explicit.isEmpty { return URL(fileURLWithPath: explicit) }
        let local = URL(fileURLWithPath: currentDirectory).appendingPathComponent("Firmware")
        if isDirectory(local) { return local }
        let binDirectory = executable.deletingLastPathComponent()
        let installed = binDirectory.deletingLastPathComponent().appendingPathComponent("share/bledfu/Firmware")
        if isDirectory(installed) { return installed }
        var directory = binDirectory
        while directory.path != "/" && !directory.path.isEmpty {
            let candidate = directory.appendingPathComponent("Firmware")
            if isDirectory(candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }

    /// The running executable, symbolic links resolved.
    public static var executableURL: URL {
        (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])).resolvingSymlinksInPath()
    }

    /// A bundled profile's JSON and where it came from (a file path, or "built-in NAME").
    public func profile(named name: String) throws(SimulatorError) -> (data: Data, origin: String) {
        let key = name.lowercased()
        if let directory {
            let url = directory.appendingPathComponent(key + ".json")
            if let data = FileManager.default.contents(atPath: url.path) { return (data, url.path) }
        }
        if let text = builtIn[key] { return (Data(text.utf8), "built-in \(key)") }
        let known = builtIn.keys.sorted().joined(separator: ", ")
        let searched = directory.map { " (not in \($0.path) nor built in)" } ?? ""
        throw SimulatorError(.unknownProfile, "no device profile '\(name)'\(searched); bundled profiles: \(known)")
    }

    /// Loads the Secure DFU profile a request names (a Legacy or SMP profile is refused).
    public func load(_ request: SimulatedDeviceRequest) throws(SimulatorError) -> DeviceProfile {
        switch try loadAny(request) {
        case .secure(let profile): return profile
        case .legacy:
            throw SimulatorError(
                .wrongFamily, "'\(request.name)' is a Legacy DFU profile; this command takes Secure DFU profiles")
        case .smp:
            throw SimulatorError(.wrongFamily, "'\(request.name)' is an SMP profile; this command takes Secure DFU profiles")
        }
    }

    /// Loads the profile a request names, of the family its JSON's `family` key says (absent: Secure DFU).
    public func loadAny(_ request: SimulatedDeviceRequest) throws(SimulatorError) -> SimulatedProfile {
        let data: Data
        let origin: String
        if request.isPath {
            origin = request.name
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: request.name))
            } catch {
                throw SimulatorError(
                    .unknownProfile, "no device profile: \(FileProblem.describe("read", request.name, error))", cause: error)
            }
        } else {
            let found = try profile(named: request.name)
            data = found.data
            origin = found.origin
        }
        struct Family: Decodable { var family: String? }
        let family = (try? JSONDecoder().decode(Family.self, from: data))?.family ?? "secure"
        do {
            switch family {
            case "secure": return .secure(try JSONDecoder().decode(DeviceProfile.self, from: data))
            case "legacy": return .legacy(try JSONDecoder().decode(LegacyDeviceProfile.self, from: data))
            case "smp": return .smp(try JSONDecoder().decode(SMPDeviceProfile.self, from: data))
            default:
                throw SimulatorError(
                    .wrongFamily,
                    "device profile \(origin) is of family '\(family)', which bledfu simulate does not serve"
                        + " (secure, legacy, smp)")
            }
        } catch let error as SimulatorError {
            throw error
        } catch {
            throw SimulatorError(.invalidProfile, "bad device profile \(origin): \(error)", cause: error)
        }
    }

    private static func isDirectory(_ url: URL) -> Bool {
        var directory: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &directory) && directory.boolValue
    }
}

/// Instances of one profile (`--device sensor:4`) and the addresses they advertise at.
public enum SimulatorProfileInstances {
    /// Instance `index` (0-based) of `count`: byte 4 of the address (the second least significant) is increased by
    /// the index, so that the bootloader's address + 1 (byte 5) never collides with a sibling; names get "-1", "-2"….
    public static func instance(_ profile: DeviceProfile, index: Int, of count: Int) -> DeviceProfile {
        guard count > 1 else { return profile }
        var copy = profile
        copy.address = instanceAddress(profile.address, index: index)
        copy.name = "\(profile.name)-\(index + 1)"
        return copy
    }

    /// Instance `index` of `count` of a profile of any family (as for Secure DFU).
    public static func instance(_ profile: SimulatedProfile, index: Int, of count: Int) -> SimulatedProfile {
        switch profile {
        case .secure(let secure): return .secure(instance(secure, index: index, of: count))
        case .legacy(var legacy):
            guard count > 1 else { return profile }
            legacy.address = instanceAddress(legacy.address, index: index)
            legacy.name = "\(legacy.name)-\(index + 1)"
            return .legacy(legacy)
        case .smp(var smp):
            guard count > 1 else { return profile }
            smp.address = instanceAddress(smp.address, index: index)
            smp.name = "\(smp.name)-\(index + 1)"
            return .smp(smp)
        }
    }

    /// `address` with byte 4 increased by `index` (wrapping).
    public static func instanceAddress(_ address: BluetoothAddress, index: Int) -> BluetoothAddress {
        var bytes = address.bytes
        bytes[4] = bytes[4] &+ UInt8(truncatingIfNeeded: index)
        return BluetoothAddress(bytes: bytes) ?? address
    }

    /// Every address a device may advertise at (application and bootloader mode).
    public static func addresses(_ profile: DeviceProfile) -> Set<BluetoothAddress> {
        [profile.address, profile.address.nordicBootloaderAddress]
    }

    /// Every address a device may advertise at; an SMP device keeps its address across resets (MCUboot swaps
    /// images in place).
    public static func addresses(_ profile: SimulatedProfile) -> Set<BluetoothAddress> {
        Set(advertisedAddresses(profile))
    }

    /// The addresses of ``addresses(_:)`` in a fixed order: the identity (application) address, then the bootloader's.
    public static func advertisedAddresses(_ profile: SimulatedProfile) -> [BluetoothAddress] {
        if case .smp = profile { return [profile.address] }
        return [profile.address, profile.address.nordicBootloaderAddress]
    }

    /// Restores the installed images from the state directory's copy of the status file (older state directories;
    /// the flash and settings snapshot, `*.state.json`, is loaded when the device is made and takes precedence).
    public static func restore(_ profile: inout DeviceProfile, from stateDirectory: String?) {
        guard let stateDirectory else { return }
        let path = stateDirectory + "/" + SimulatorFiles.stateName(profile.address)
        guard let data = FileManager.default.contents(atPath: path),
            let state = try? JSONDecoder().decode(DeviceState.self, from: data)
        else { return }
        profile.installed = state.installed
    }
}
