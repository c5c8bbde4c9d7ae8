import ArgumentParser
import BLECore
import DFUPackage
import DFUSimulator
import Foundation

/// `--device NAME[:COUNT]`: a profile in Firmware/ (or a path to a profile JSON) and how many instances to run.
struct SimulatedDeviceRequest: Hashable, Sendable {
    var name: String
    var count: Int

    /// Parses "bracelet", "sensor:4", "./my.json", "/abs/profile.json:2".
    init(parsing text: String) throws {
        var name = text
        var count = 1
        if let colon = text.lastIndex(of: ":"), let value = Int(text[text.index(after: colon)...]) {
            name = String(text[..<colon])
            count = value
        }
        guard !name.isEmpty else { throw ValidationError("--device '\(text)': expected NAME[:COUNT]") }
        guard (1...64).contains(count) else { throw ValidationError("--device '\(text)': COUNT must be 1 to 64") }
        self.name = name
        self.count = count
    }

    /// A path (contains '/' or ends in .json) rather than a profile name.
    var isPath: Bool { name.contains("/") || name.hasSuffix(".json") }
}

/// One device instance ready to run: its profile after overrides (of its family) and the faults it injects.
struct SimulatedDeviceSpec: Sendable {
    /// The device's family and profile (the profile file's `family` key: absent for Secure DFU, `smp`).
    enum Model: Sendable {
        case secure(DeviceProfile)
        case smp(SMPDeviceProfile)
    }

    var model: Model
    var faults: FaultPlan

    init(profile: DeviceProfile, faults: FaultPlan) {
        model = .secure(profile)
        self.faults = faults
    }

    init(smp profile: SMPDeviceProfile, faults: FaultPlan) {
        model = .smp(profile)
        self.faults = faults
    }

    var name: String {
        switch model {
        case .secure(let profile): profile.name
        case .smp(let profile): profile.name
        }
    }

    /// The identity (application-mode) address: the key of its status and state files.
    var identity: BluetoothAddress {
        switch model {
        case .secure(let profile): profile.address
        case .smp(let profile): profile.address
        }
    }

    /// The Secure DFU profile (nil for other families).
    var profile: DeviceProfile? {
        if case .secure(let profile) = model { profile } else { nil }
    }
}

/// Profile lookup and command-line overrides for `bledfu simulate`.
enum SimulatorProfiles {
    /// Where the bundled profiles live: `$BLEDFU_FIRMWARE_DIR`, `<cwd>/Firmware`, or a `Firmware/` directory in
    /// the executable's directory or one of its parents (the repository when run from `.build*/debug`).
    static func firmwareDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        let files = FileManager.default
        func isDirectory(_ url: URL) -> Bool {
            var directory: ObjCBool = false
            return files.fileExists(atPath: url.path, isDirectory: &directory) && directory.boolValue
        }
        if let explicit = environment["BLEDFU_FIRMWARE_DIR"], !explicit.isEmpty {
            return URL(fileURLWithPath: explicit)
        }
        let local = URL(fileURLWithPath: files.currentDirectoryPath).appendingPathComponent("Firmware")
        if isDirectory(local) { return local }
        let executable = (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0]))
            .resolvingSymlinksInPath()
        var directory = executable.deletingLastPathComponent()
        while directory.path != "/" && !directory.path.isEmpty {
            let candidate = directory.appendingPathComponent("Firmware")
            if isDirectory(candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }

    /// Loads the profile a request names, of the family its `family` key says.
    static func loadModel(_ request: SimulatedDeviceRequest) throws -> SimulatedDeviceSpec.Model {
        let (url, data) = try read(request)
        let family = (try? JSONDecoder().decode(FamilyKey.self, from: data))?.family ?? "secure"
        do {
            switch family {
            case "secure": return .secure(try JSONDecoder().decode(DeviceProfile.self, from: data))
            case "smp": return .smp(try JSONDecoder().decode(SMPDeviceProfile.self, from: data))
            default:
                throw CLIError(
                    "device profile \(url.path) is a \(family) device, which bledfu simulate does not serve (secure, smp)",
                    exitCode: BledfuExit.usage)
            }
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("bad device profile \(url.path): \(error)", exitCode: BledfuExit.usage)
        }
    }

    private struct FamilyKey: Decodable { var family: String? }

    /// Loads the (Secure DFU) profile a request names.
    static func load(_ request: SimulatedDeviceRequest) throws -> DeviceProfile {
        let (url, data) = try read(request)
        do {
            return try JSONDecoder().decode(DeviceProfile.self, from: data)
        } catch {
            throw CLIError("bad device profile \(url.path): \(error)", exitCode: BledfuExit.usage)
        }
    }

    private static func read(_ request: SimulatedDeviceRequest) throws -> (URL, Data) {
        let url: URL
        if request.isPath {
            url = URL(fileURLWithPath: request.name)
        } else {
            guard let directory = firmwareDirectory() else {
                throw CLIError(
                    "no Firmware/ directory found for profile '\(request.name)' (set BLEDFU_FIRMWARE_DIR)",
                    exitCode: BledfuExit.usage)
            }
            url = directory.appendingPathComponent(request.name.lowercased() + ".json")
        }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw CLIError("no device profile '\(request.name)' (\(url.path) unreadable)", exitCode: BledfuExit.usage)
        }
        return (url, data)
    }

    /// Instance `index` (0-based) of `count`: byte 4 of the address (the second least significant) is increased by
    /// the index, so that the bootloader's address + 1 (byte 5) never collides with a sibling; names get "-1", "-2"….
    static func instance(_ profile: DeviceProfile, index: Int, of count: Int) -> DeviceProfile {
        guard count > 1 else { return profile }
        var copy = profile
        var bytes = profile.address.bytes
        bytes[4] = bytes[4] &+ UInt8(truncatingIfNeeded: index)
        copy.address = BluetoothAddress(bytes: bytes) ?? profile.address
        copy.name = "\(profile.name)-\(index + 1)"
        return copy
    }

    /// Instance `index` of an SMP profile, as ``instance(_:index:of:)``.
    static func instance(_ profile: SMPDeviceProfile, index: Int, of count: Int) -> SMPDeviceProfile {
        guard count > 1 else { return profile }
        var copy = profile
        var bytes = profile.address.bytes
        bytes[4] = bytes[4] &+ UInt8(truncatingIfNeeded: index)
        copy.address = BluetoothAddress(bytes: bytes) ?? profile.address
        copy.name = "\(profile.name)-\(index + 1)"
        return copy
    }

    /// Every address a device may advertise at (application and bootloader mode).
    static func addresses(_ profile: DeviceProfile) -> Set<BluetoothAddress> {
        [profile.address, profile.address.nordicBootloaderAddress]
    }

    /// Restores the installed images from the state directory's copy of the status file (older state directories;
    /// the flash and settings snapshot, `*.state.json`, is loaded when the device is made and takes precedence).
    static func restore(_ profile: inout DeviceProfile, from stateDirectory: String?) {
        guard let stateDirectory else { return }
        let path = stateDirectory + "/" + SimulatorFiles.stateName(profile.address)
        guard let data = FileManager.default.contents(atPath: path),
            let state = try? JSONDecoder().decode(DeviceState.self, from: data)
        else { return }
        profile.installed = state.installed
    }
}

/// File names of the simulator.
enum SimulatorFiles {
    /// "C6-05-04-03-02-01.json": a device's status or state file, by identity address.
    static func stateName(_ address: BluetoothAddress) -> String {
        address.description.replacingOccurrences(of: ":", with: "-") + ".json"
    }

    /// "C6-05-04-03-02-01.state.json": a device's flash and bootloader settings (`--state-dir`).
    static func persistentStateName(_ address: BluetoothAddress) -> String {
        address.description.replacingOccurrences(of: ":", with: "-") + ".state.json"
    }

    /// The flash and settings `--state-dir` kept for the device with this identity (nil when absent or unreadable).
    static func loadPersistentState(_ identity: BluetoothAddress, from stateDirectory: String)
        -> DevicePersistentState?
    {
        loadPersistentState(DevicePersistentState.self, identity, from: stateDirectory)
    }

    /// A device's persistent state of its family's type (SMP: the MCUboot slots).
    static func loadPersistentState<State: Decodable>(
        _ type: State.Type, _ identity: BluetoothAddress, from stateDirectory: String
    ) -> State? {
        let path = stateDirectory + "/" + persistentStateName(identity)
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(State.self, from: data)
    }
}

/// The overrides the command line applies to every profile.
struct ProfileOverrides: Sendable {
    var hwVersion: UInt32?
    var softDeviceFWID: UInt16?
    var applicationVersion: UInt32?
    var requireSignature: Bool?
    /// PEM texts; nil keeps the profile's keys.
    var publicKeys: [String]?
    var saveProgress: Bool?
    var speedup: Double?

    /// An SMP device takes `--speedup` and `--public-key` (MCUboot's keys); the Secure DFU options do not apply.
    func apply(to profile: inout SMPDeviceProfile) throws {
        let secureOnly: [(String, Bool)] = [
            ("--hw-version", hwVersion != nil), ("--sd-fwid", softDeviceFWID != nil),
            ("--app-version", applicationVersion != nil), ("--require-signature", requireSignature != nil),
            ("--save-progress", saveProgress != nil),
        ]
        if let option = secureOnly.first(where: \.1)?.0 {
            throw CLIError("\(option) is a Secure DFU option; \(profile.name) is an SMP device", exitCode: BledfuExit.usage)
        }
        if let publicKeys { profile.mcuboot.publicKeys = publicKeys }
        if let speedup { profile.speedup = speedup }
    }

    func apply(to profile: inout DeviceProfile) {
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

    /// Reads and checks `--public-key` files (PEM public keys, or private keys whose public half is used).
    static func readKeys(_ paths: [String]) throws -> [String]? {
        guard !paths.isEmpty else { return nil }
        return try paths.map { path in
            do throws(PackageError) {
                let pem = try PackageKeys.readPEM(URL(fileURLWithPath: path))
                _ = try PackageKeys.publicKey(pem: pem, name: path)
                return pem
            } catch {
                throw CLIError("--public-key \(path): \(error.message)", exitCode: BledfuExit.usage)
            }
        }
    }
}

/// `--describe`: a device's profile and its link ceilings.
enum SimulatorDescription {
    static func emit(_ spec: SimulatedDeviceSpec, json: Bool) {
        let profile: DeviceProfile
        switch spec.model {
        case .secure(let secure): profile = secure
        case .smp(let smp):
            SMPSimulatorDescription.emit(smp, json: json)
            return
        }
        let ceiling = LinkModel(profile: profile).ceiling()
        if json {
            let event = DescribeEvent(
                name: profile.name, address: profile.address.description,
                ceiling: .init(
                    writeWithoutResponse: Int(ceiling.writeWithoutResponse.rounded()),
                    writeWithResponse: Int(ceiling.writeWithResponse.rounded()),
                    airWriteWithoutResponse: Int(ceiling.airWriteWithoutResponse.rounded()),
                    airWriteWithResponse: Int(ceiling.airWriteWithResponse.rounded()),
                    flash: Int(ceiling.flash.rounded())),
                profile: profile)
            Console.jsonLine(event)
            return
        }
        let link = profile.link
        let app = profile.installed.application.map { "app v\($0.version)" } ?? "no app"
        let fwid = String(profile.softDeviceFWID, radix: 16, uppercase: true)
        print(
            "\(profile.name) \(profile.address) \(profile.addressType) \(profile.chip) SDK \(profile.sdkVersion)"
                + " hw_version \(profile.hwVersion) sd_fwid 0x\(fwid) buttonless \(profile.buttonless.rawValue)"
                + " \(app) bootloader v\(profile.installed.bootloader.version)")
        print(
            "  signatures: \(profile.publicKeys.isEmpty ? "none checked" : "\(profile.publicKeys.count) key(s)")"
                + "\(profile.requireSignedApp ? ", required for apps" : ", optional for apps")"
                + ", save_progress \(profile.saveProgress), speedup \(profile.speedup)")
        print(
            "  link: \(link.phy) LL \(link.llDataLength) MTU \(link.maxMTU) CI \(link.connectionIntervalMs) ms"
                + " \(link.packetsPerEvent)/event, \(link.receiveBuffers) receive buffers"
                + "\(link.encrypted ? ", encrypted" : ""); flash page \(profile.flash.pageSize)"
                + " erase \(profile.flash.pageEraseMicros) us, bank \(profile.flash.bankSize)")
        print(
            "  ceiling: write without response \(Int(ceiling.writeWithoutResponse.rounded())) B/s"
                + " (air \(Int(ceiling.airWriteWithoutResponse.rounded())), flash \(Int(ceiling.flash.rounded())))"
                + ", write with response \(Int(ceiling.writeWithResponse.rounded())) B/s")
    }
}

/// The NDJSON line `--describe --json` prints per device.
struct DescribeEvent: Encodable {
    struct Ceiling: Encodable {
        var writeWithoutResponse: Int
        var writeWithResponse: Int
        var airWriteWithoutResponse: Int
        var airWriteWithResponse: Int
        var flash: Int

        enum CodingKeys: String, CodingKey {
            case flash
            case writeWithoutResponse = "write_without_response"
            case writeWithResponse = "write_with_response"
            case airWriteWithoutResponse = "air_write_without_response"
            case airWriteWithResponse = "air_write_with_response"
        }
    }

    var event = "device"
    var name: String
    var address: String
    /// Bytes per second.
    var ceiling: Ceiling
    var profile: DeviceProfile
}

extension Console {
    /// One Encodable value as one NDJSON line (sorted keys).
    static func jsonLine(_ value: some Encodable) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(value) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
}
