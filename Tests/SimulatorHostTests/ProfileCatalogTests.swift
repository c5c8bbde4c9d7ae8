import BLECore
import DFUSimulator
import Foundation
import Testing

@testable import SimulatorHost

/// What `bledfu simulate --device` names, found and loaded by SimulatorHost's ``ProfileCatalog``: the checkout's
/// Firmware/ profiles, the built-in ones, paths, and the errors of each way it can fail.
@Suite(.timeLimit(.minutes(10))) struct ProfileCatalogTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let firmware = root.appendingPathComponent("Firmware")

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("simhost-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    static func code(_ body: () throws(SimulatorError) -> Void) -> SimulatorError.Code? {
        do throws(SimulatorError) {
            try body()
            return nil
        } catch {
            return error.code
        }
    }

    @Test func requestsParseNameAndCount() throws {
        let plain = try SimulatedDeviceRequest(parsing: "bracelet")
        #expect(plain.name == "bracelet" && plain.count == 1 && !plain.isPath)
        let counted = try SimulatedDeviceRequest(parsing: "sensor:4")
        #expect(counted.name == "sensor" && counted.count == 4)
        let path = try SimulatedDeviceRequest(parsing: "/abs/profile.json:2")
        #expect(path.name == "/abs/profile.json" && path.count == 2 && path.isPath)
        #expect(try SimulatedDeviceRequest(parsing: "./my.json").isPath)
        for bad in [":3", "sensor:0", "sensor:65"] {
            #expect(Self.code { () throws(SimulatorError) in _ = try SimulatedDeviceRequest(parsing: bad) } == .invalidRequest)
        }
    }

    @Test func firmwareDirectoryComesFromTheEnvironmentThenTheCurrentDirectory() throws {
        let explicit = ProfileCatalog.firmwareDirectory(environment: ["BLEDFU_FIRMWARE_DIR": "/some/where"])
        #expect(explicit?.path == "/some/where")
        let found = ProfileCatalog.firmwareDirectory(
            environment: [:], currentDirectory: Self.root.path, executable: URL(fileURLWithPath: "/nonexistent/bin/x"))
        #expect(found?.standardizedFileURL.path == Self.firmware.standardizedFileURL.path)
        let empty = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: empty) }
        let none = ProfileCatalog.firmwareDirectory(
            environment: [:], currentDirectory: empty.path, executable: empty.appendingPathComponent("bin/bledfu"))
        #expect(none == nil)
    }

    @Test func loadsEachFamilyFromTheFirmwareDirectory() throws {
        let catalog = ProfileCatalog(directory: Self.firmware, builtIn: [:])
        guard case .secure(let bracelet) = try catalog.loadAny(SimulatedDeviceRequest(parsing: "bracelet")) else {
            Issue.record("bracelet is a Secure DFU profile")
            return
        }
        #expect(bracelet.name == "Bracelet")
        #expect(try catalog.load(SimulatedDeviceRequest(parsing: "BRACELET")).address == bracelet.address)
        guard case .legacy = try catalog.loadAny(SimulatedDeviceRequest(parsing: "sdk11-nrf52")) else {
            Issue.record("sdk11-nrf52 is a Legacy DFU profile")
            return
        }
        guard case .smp = try catalog.loadAny(SimulatedDeviceRequest(parsing: "smp-sensor")) else {
            Issue.record("smp-sensor is an SMP profile")
            return
        }
        #expect(Self.code { () throws(SimulatorError) in _ = try catalog.load(SimulatedDeviceRequest(parsing: "smp-sensor")) } == .wrongFamily)
        #expect(Self.code { () throws(SimulatorError) in _ = try catalog.load(SimulatedDeviceRequest(parsing: "sdk11-nrf52")) } == .wrongFamily)
    }

    @Test func fallsBackToBuiltInProfilesAndNamesThemWhenNoneMatches() throws {
        let text = try String(contentsOf: Self.firmware.appendingPathComponent("sensor.json"), encoding: .utf8)
        let catalog = ProfileCatalog(directory: nil, builtIn: ["sensor": text])
        let found = try catalog.profile(named: "Sensor")
        #expect(found.origin == "built-in sensor")
        #expect(try catalog.load(SimulatedDeviceRequest(parsing: "sensor")).name == "Sensor")
        do throws(SimulatorError) {
            _ = try catalog.profile(named: "nosuch")
            Issue.record("an unknown profile loaded")
        } catch {
            #expect(error.code == .unknownProfile)
            #expect(error.message == "no device profile 'nosuch'; bundled profiles: sensor")
        }
    }

    @Test func pathsBadJSONAndUnknownFamiliesAreRefused() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let catalog = ProfileCatalog(directory: nil, builtIn: [:])
        let missing = directory.appendingPathComponent("missing.json").path
        #expect(Self.code { () throws(SimulatorError) in _ = try catalog.loadAny(SimulatedDeviceRequest(parsing: missing)) } == .unknownProfile)
        let bad = directory.appendingPathComponent("bad.json")
        try Data("{\"name\": 3}".utf8).write(to: bad)
        #expect(Self.code { () throws(SimulatorError) in _ = try catalog.loadAny(SimulatedDeviceRequest(parsing: bad.path)) } == .invalidProfile)
        let odd = directory.appendingPathComponent("odd.json")
        try Data("{\"family\": \"zigbee\"}".utf8).write(to: odd)
        do throws(SimulatorError) {
            _ = try catalog.loadAny(SimulatedDeviceRequest(parsing: odd.path))
            Issue.record("a profile of an unknown family loaded")
        } catch {
            #expect(error.code == .wrongFamily)
            #expect(error.message.contains("of family 'zigbee', which bledfu simulate does not serve"))
        }
        let copy = directory.appendingPathComponent("mine.json")
        try FileManager.default.copyItem(at: Self.firmware.appendingPathComponent("fast.json"), to: copy)
        guard case .secure = try catalog.loadAny(SimulatedDeviceRequest(parsing: copy.path + ":2")) else {
            Issue.record("fast.json by path is a Secure DFU profile")
            return
        }
    }

    @Test func instancesShiftByteFourAndNumberTheirNames() throws {
        let catalog = ProfileCatalog(directory: Self.firmware, builtIn: [:])
        let base = try catalog.load(SimulatedDeviceRequest(parsing: "sensor"))
        #expect(SimulatorProfileInstances.instance(base, index: 0, of: 1).name == "Sensor")
        let second = SimulatorProfileInstances.instance(base, index: 1, of: 3)
        #expect(second.name == "Sensor-2")
        #expect(second.address.bytes[4] == base.address.bytes[4] &+ 1)
        #expect(second.address.bytes[5] == base.address.bytes[5])
        #expect(SimulatorProfileInstances.addresses(second) == [second.address, second.address.nordicBootloaderAddress])
        let smp = try catalog.loadAny(SimulatedDeviceRequest(parsing: "smp-sensor"))
        let smpInstance = SimulatorProfileInstances.instance(smp, index: 2, of: 3)
        #expect(smpInstance.name == "SMP Sensor-3")
        #expect(SimulatorProfileInstances.addresses(smpInstance) == [smpInstance.address])
        let legacy = try catalog.loadAny(SimulatedDeviceRequest(parsing: "sdk11-nrf52"))
        #expect(SimulatorProfileInstances.instance(legacy, index: 1, of: 2).name == "Nordic_HRM-2")
    }
}
