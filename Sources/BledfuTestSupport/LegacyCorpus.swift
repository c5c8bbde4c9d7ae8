import BLECore
import DFUPackage
import DFUSimulator
import Foundation
import LegacyDFU

/// The real public packages in `<repo>/../shared/corpus/nordic-dfu-packages` (or `$BLEDFU_CORPUS`), and the virtual
/// Legacy device each one fits. Used by the engine's corpus test (LegacyDFUTests) and by the updater's
/// (BledfuKitTests). Without the corpus the tests are skipped, visibly; under `CI=true` they run and fail.
public enum LegacyCorpus {
    public struct Missing: CodedError, Sendable {
        public struct Code: RawRepresentable, Hashable, Sendable {
            public var rawValue: String
            public init(rawValue: String) { self.rawValue = rawValue }
            /// The corpus lacks a file or a record lacks a field.
            public static let missing = Code(rawValue: "corpus-missing")
        }

        public var code: Code { .missing }
        public var message: String
        public init(description: String) { message = description }
        public var description: String { message }
    }

    /// The devices' address (as the engine tests' fixture).
    public static let address: BluetoothAddress = {
        guard let address = BluetoothAddress("D4:CA:6E:11:22:01") else { preconditionFailure("a constant address") }
        return address
    }()

    public static let root: URL = {
        if let path = ProcessInfo.processInfo.environment["BLEDFU_CORPUS"], !path.isEmpty {
            return URL(fileURLWithPath: path).standardized
        }
        return URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("../shared/corpus/nordic-dfu-packages").standardized
    }()

    public static var isPresent: Bool {
        FileManager.default.fileExists(atPath: root.appendingPathComponent("expected-decodes.json").path)
    }
    public static var shouldRun: Bool { isPresent || ProcessInfo.processInfo.environment["CI"] == "true" }

    /// The Legacy packages as `expected-decodes.json` lists them (an image whose init packet is "legacy"): the path
    /// relative to the corpus, the zip's bytes, the decoded package.
    public static func legacyPackages() throws -> [(name: String, bytes: [UInt8], package: FirmwarePackage)] {
        let data = try Data(contentsOf: root.appendingPathComponent("expected-decodes.json"))
        let records = try JSONDecoder().decode([Record].self, from: data)
        var out: [(String, [UInt8], FirmwarePackage)] = []
        for record in records {
            guard (record.images ?? []).contains(where: { $0.initPacket?.format == "legacy" }) else { continue }
            guard let path = record.package else { throw Missing(description: "a record without its package") }
            let relative = path.hasPrefix("public/") ? String(path.dropFirst("public/".count)) : path
            let url = root.appendingPathComponent(relative)
            out.append((relative, Array(try Data(contentsOf: url)), try FirmwarePackage(contentsOf: url)))
        }
        return out
    }

    /// One record of `expected-decodes.json`: the fields the tests read (the file has more).
    struct Record: Decodable {
        struct Image: Decodable {
            struct InitPacket: Decodable { var format: String? }
            var initPacket: InitPacket?
            enum CodingKeys: String, CodingKey { case initPacket = "init_packet" }
        }
        var package: String?
        var images: [Image]?
    }

    /// SoftDevices by FWID: where the application starts after them (`SD_SIZE_GET`).
    public static let softdeviceEnd: [UInt16: Int] = [0x64: 0x18000, 0x80: 0x1B000, 0x81: 0x1C000]

    /// The device(s) that fit a package: a device of the package's own kind and time, one for the whole package
    /// when one fits every part, else one per part (IOS-DFU-Library's SDK 6.1 set moves an SDK 8+ bootloader to
    /// SDK 6.1 with its first part, so its application needs the older protocol). Instant flash and timers.
    public static func plan(_ name: String, _ package: FirmwarePackage) throws -> [(LegacyDeviceProfile, [LegacyPart])] {
        let parts = try LegacyPart.parts(of: package)
        let profiles = try zip(parts, package.parts).map { try fit(name, $1) }
        if Set(profiles.map(\.kind)).count == 1, Set(profiles.map(\.chip)).count == 1, var first = profiles.first {
            // The first part decides the installed SoftDevice; a SoftDevice update brings the one the next part needs.
            first.softDeviceFWID = profiles[0].softDeviceFWID
            return [(first, parts)]
        }
        return zip(profiles, parts).map { ($0, [$1]) }
    }

    public static func fit(_ name: String, _ part: PackagePart) throws -> LegacyDeviceProfile {
        guard let legacy = part.legacyInit else { throw Missing(description: "\(name): a part without a Legacy init packet") }
        var profile: LegacyDeviceProfile
        if legacy.layout == .crcOnly {
            profile = .sdk6NRF51(address: address)
        } else if legacy.deviceType == 0x0052 {
            profile = name.contains("52840") ? .adafruitNRF52840(address: address) : .adafruitNRF52832(address: address)
            // Before 352c44c (2018-08-09) every Adafruit bootloader used ADAFRUIT_DEV_REV 0xADAF.
            profile.deviceRevision = legacy.deviceRevision ?? profile.deviceRevision
            profile.dualBank = name.contains("_dual")
        } else if name.contains("s132") {
            profile = .sdk11NRF52(address: address)
        } else {
            profile = .sdk11NRF51(address: address)
            if let fwid = legacy.softdeviceReq.first(where: { $0 != 0xFFFE }), let end = softdeviceEnd[fwid] {
                profile.softDeviceFWID = fwid
                profile.applicationStart = end
                profile.sdkVersion = fwid == 0x64 ? "8.0.0" : profile.sdkVersion
            }
        }
        profile.speedup = .infinity
        return profile
    }

    /// Whether the device holds `part`'s image(s) (SHA-256 per slot; SoftDevice with bootloader split at its size).
    public static func holds(_ state: LegacyDeviceState, _ part: LegacyPart) -> Bool {
        func sha(_ bytes: [UInt8]) -> String { DFUSimulatorDigest.sha256Hex(bytes) }
        if part.imageType.contains(.softdevice) {
            let sd = Int(part.sizes.softdevice)
            guard state.installed.softdevice?.sha256 == sha(Array(part.image.prefix(sd))) else { return false }
            return part.sizes.bootloader == 0 || state.installed.bootloader.sha256 == sha(Array(part.image.dropFirst(sd)))
        }
        if part.imageType.contains(.bootloader) { return state.installed.bootloader.sha256 == sha(part.image) }
        return state.installed.application?.sha256 == sha(part.image)
    }
}
