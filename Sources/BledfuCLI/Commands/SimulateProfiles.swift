import ArgumentParser
import Batch
import BLECore
import DFUPackage
import DFUSimulator
import Foundation
import SimulatorHost

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

/// Profile lookup and command-line overrides for `bledfu simulate`.
enum SimulatorProfiles {
    /// Where the bundled profiles and samples live (``FirmwareLocator``).
    static func firmwareDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        FirmwareLocator.directory(environment: environment)
    }

    /// Loads the Secure DFU profile a request names (a Legacy or SMP profile is refused).
    static func load(_ request: SimulatedDeviceRequest) throws -> DeviceProfile {
        switch try loadAny(request) {
        case .secure(let profile): return profile
        case .legacy:
            throw CLIError("'\(request.name)' is a Legacy DFU profile; this command takes Secure DFU profiles", exitCode: BledfuExit.usage)
        case .smp:
            throw CLIError("'\(request.name)' is an SMP profile; this command takes Secure DFU profiles", exitCode: BledfuExit.usage)
        }
    }

    /// Loads the profile a request names, of the family its JSON's `family` key says (absent: Secure DFU).
    static func loadAny(_ request: SimulatedDeviceRequest) throws -> SimulatedProfile {
        let data: Data
        let origin: String
        if request.isPath {
            origin = request.name
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: request.name))
            } catch {
                throw CLIError("no device profile: \(FileProblem.describe("read", request.name, error))", exitCode: BledfuExit.usage)
            }
        } else {
            let found = try FirmwareLocator.profile(named: request.name)
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
                throw CLIError(
                    "device profile \(origin) is of family '\(family)', which bledfu simulate does not serve"
                        + " (secure, legacy, smp)", exitCode: BledfuExit.usage)
            }
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("bad device profile \(origin): \(error)", exitCode: BledfuExit.usage)
        }
    }

    /// Instance `index` (0-based) of `count`: byte 4 of the address (the second least significant) is increased by
    /// the index, so that the bootloader's address + 1 (byte 5) never collides with a sibling; names get "-1", "-2"….
    static func instance(_ profile: DeviceProfile, index: Int, of count: Int) -> DeviceProfile {
        guard count > 1 else { return profile }
        var copy = profile
        copy.address = instanceAddress(profile.address, index: index)
        copy.name = "\(profile.name)-\(index + 1)"
        return copy
    }

    static func instance(_ profile: SimulatedProfile, index: Int, of count: Int) -> SimulatedProfile {
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

    static func instanceAddress(_ address: BluetoothAddress, index: Int) -> BluetoothAddress {
        var bytes = address.bytes
        bytes[4] = bytes[4] &+ UInt8(truncatingIfNeeded: index)
        return BluetoothAddress(bytes: bytes) ?? address
    }

    /// Every address a device may advertise at (application and bootloader mode).
    static func addresses(_ profile: DeviceProfile) -> Set<BluetoothAddress> {
        [profile.address, profile.address.nordicBootloaderAddress]
    }

    /// An SMP device keeps its address across resets (MCUboot swaps images in place).
    static func addresses(_ profile: SimulatedProfile) -> Set<BluetoothAddress> {
        if case .smp = profile { return [profile.address] }
        return [profile.address, profile.address.nordicBootloaderAddress]
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

    /// What applies to a Legacy device: the SoftDevice FWID, the application version, the speedup. An SMP device
    /// takes `--speedup` and `--public-key` (MCUboot's keys) and refuses the Secure DFU options.
    func apply(to profile: inout SimulatedProfile) throws {
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
        switch spec.device {
        case .secure(let profile): emit(profile, json: json)
        case .legacy(let profile): emitLegacy(profile, json: json)
        case .smp(let profile): SMPSimulatorDescription.emit(profile, json: json)
        }
    }

    /// A Legacy profile: kind, chip, banks, buffers, the link and flash ceilings.
    static func emitLegacy(_ profile: LegacyDeviceProfile, json: Bool) {
        let ceiling = LinkModel(link: profile.link, flash: profile.flash).ceiling(mtu: 23)
        if json {
            Console.jsonLine(LegacyDescribeEvent(name: profile.name, address: profile.address.description, profile: profile))
            return
        }
        let app = profile.installed.application.map { "app v\($0.version)" } ?? "no app"
        print(
            "\(profile.name) \(profile.address) \(profile.addressType) \(profile.chip) Legacy DFU \(profile.kind.rawValue)"
                + " \(profile.sdkVersion) sd_fwid 0x\(String(profile.softDeviceFWID, radix: 16, uppercase: true))"
                + " \(profile.dualBank ? "dual" : "single") bank, \(app), bootloader \(profile.bootloaderName)")
        print(
            "  link: \(profile.link.phy) LL \(profile.link.llDataLength) MTU \(profile.link.maxMTU) CI \(profile.link.connectionIntervalMs) ms;"
                + " \(profile.receiveBuffers) RX buffers, flash queue \(profile.flash.queueDepth), timer \(profile.inactivityTimeoutSeconds) s")
        print(
            "  ceiling (20-byte packets): air \(Int(ceiling.airWriteWithoutResponse.rounded())) B/s, flash \(Int(ceiling.flash.rounded())) B/s")
    }

    static func emit(_ profile: DeviceProfile, json: Bool) {
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

/// The NDJSON line `--describe --json` prints per Legacy device.
struct LegacyDescribeEvent: Encodable {
    var event = "device"
    var name: String
    var address: String
    var profile: LegacyDeviceProfile
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
