import BLECore
import DFUSimulator
import Foundation
import Testing
import VirtualRadio

@testable import SimulatorHost

/// SimulatorHost's part of `bledfu simulate` below its command line: overrides, the device specs and their address
/// check, fault plans, the host's preparation on a virtual radio, `--describe`'s figures and the status files read
/// back, each on real files in a temporary directory.
@Suite(.timeLimit(.minutes(10))) struct SimulatorSetupTests {
    static let catalog = ProfileCatalog(directory: ProfileCatalogTests.firmware, builtIn: [:])

    static func requests(_ texts: String...) throws -> [SimulatedDeviceRequest] {
        try texts.map { try SimulatedDeviceRequest(parsing: $0) }
    }

    static func specs(_ texts: String..., overrides: ProfileOverrides = ProfileOverrides(), stateDirectory: String? = nil)
        throws(SimulatorError) -> [SimulatedDeviceSpec]
    {
        let requests = try texts.map { (text) throws(SimulatorError) in try SimulatedDeviceRequest(parsing: text) }
        return try SimulatorSetup.specs(
            requests, catalog: catalog, overrides: overrides, faults: .none, stateDirectory: stateDirectory)
    }

    @Test func overridesApplyPerFamilyAndSMPRefusesSecureOptions() throws {
        var overrides = ProfileOverrides(hwVersion: 7, softDeviceFWID: 0x101, applicationVersion: 9, speedup: 4)
        let specs = try Self.specs("bracelet", "sdk11-nrf52", overrides: overrides)
        guard case .secure(let secure) = specs[0].device, case .legacy(let legacy) = specs[1].device else {
            Issue.record("families: \(specs.map(\.name))")
            return
        }
        #expect(secure.hwVersion == 7 && secure.softDeviceFWID == 0x101 && secure.speedup == 4)
        #expect(secure.installed.application?.version == 9)
        #expect(legacy.softDeviceFWID == 0x101 && legacy.installed.application?.version == 9 && legacy.speedup == 4)
        do throws(SimulatorError) {
            _ = try Self.specs("smp-sensor", overrides: overrides)
            Issue.record("--hw-version applied to an SMP device")
        } catch {
            #expect(error.code == .invalidOverride)
            #expect(error.message == "--hw-version is a Secure DFU option; SMP Sensor is an SMP device")
        }
        overrides = ProfileOverrides(speedup: 8)
        guard case .smp(let smp) = try Self.specs("smp-sensor", overrides: overrides)[0].device else {
            Issue.record("smp-sensor is an SMP profile")
            return
        }
        #expect(smp.speedup == 8)
    }

    @Test func keysAreReadAndCheckedAndABadOneIsNamed() throws {
        #expect(try ProfileOverrides.readKeys([]) == nil)
        let key = ProfileCatalogTests.firmware.appendingPathComponent("keys/test-signing-key-DO-NOT-USE.pub.pem").path
        let keys = try ProfileOverrides.readKeys([key])
        #expect(keys?.count == 1 && keys?.first?.contains("PUBLIC KEY") == true)
        let profile = ProfileCatalogTests.firmware.appendingPathComponent("bracelet.json").path
        do throws(SimulatorError) {
            _ = try ProfileOverrides.readKeys([profile])
            Issue.record("a profile JSON read as a key")
        } catch {
            #expect(error.code == .invalidKey)
            #expect(error.message.hasPrefix("--public-key \(profile): "))
        }
    }

    @Test func instancesGetTheirOwnAddressesAndACollisionIsRefused() throws {
        let specs = try Self.specs("sensor:3", "bracelet")
        #expect(specs.map(\.name) == ["Sensor-1", "Sensor-2", "Sensor-3", "Bracelet"])
        #expect(Set(specs.map(\.identity)).count == 4)
        do throws(SimulatorError) {
            _ = try Self.specs("bracelet", "bracelet")
            Issue.record("two devices at one address")
        } catch {
            #expect(error.code == .addressCollision)
            let bracelet = try Self.catalog.load(SimulatedDeviceRequest(parsing: "bracelet"))
            #expect(error.message == "\(bracelet.name) and \(bracelet.name) would both use address \(bracelet.address)")
        }
    }

    @Test func theStateDirectoryRestoresInstalledImages() async throws {
        let directory = try ProfileCatalogTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var profile = try Self.catalog.load(SimulatedDeviceRequest(parsing: "bracelet"))
        profile.installed.application = InstalledImage(version: 42)
        let state = await VirtualDevice(profile: profile, clock: ContinuousClock()).state()
        try JSONEncoder().encode(state).write(to: directory.appendingPathComponent(SimulatorFiles.stateName(profile.address)))
        guard case .secure(let restored) = try Self.specs("bracelet", stateDirectory: directory.path)[0].device else {
            Issue.record("bracelet is a Secure DFU profile")
            return
        }
        #expect(restored.installed.application?.version == 42)
        guard case .secure(let fresh) = try Self.specs("bracelet")[0].device else { return }
        #expect(fresh.installed.application?.version != 42)
    }

    @Test func faultPlansParseFromItemsOrAFile() throws {
        let plan = try SimulatorSetup.faultPlan(file: nil, items: ["disconnect-after-bytes=8192,seed=3"])
        #expect(plan.seed == 3 && plan != .none)
        #expect(try SimulatorSetup.faultPlan(file: nil, items: []) == .none)
        #expect(ProfileCatalogTests.code { () throws(SimulatorError) in _ = try SimulatorSetup.faultPlan(file: nil, items: ["bogus=1"]) } == .invalidFaultPlan)
        let directory = try ProfileCatalogTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("plan.json")
        try JSONEncoder().encode(plan).write(to: file)
        #expect(try SimulatorSetup.faultPlan(file: file.path, items: []) == plan)
        try Data("[]".utf8).write(to: file)
        #expect(ProfileCatalogTests.code { () throws(SimulatorError) in _ = try SimulatorSetup.faultPlan(file: file.path, items: []) } == .invalidFaultPlan)
    }

    @Test func preparingAVirtualRadioWritesTheControllers() throws {
        let radio = try ProfileCatalogTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: radio) }
        let s140 = try ControllerProfile(parsing: "s140")
        let prepared = try SimulatorSetup.prepare(
            .virtual(radioDirectory: radio.path), controllers: [(adapter: "default", profile: s140)], events: Silent(),
            statusDirectory: nil, stateDirectory: nil)
        #expect(prepared.host.place == "virtual:" + radio.path)
        #expect(prepared.statusDirectory == radio.path + "/status")
        #expect(prepared.sharedAir != nil)
        #expect(VirtualController(radio: radio.path, name: "default").profile() == s140)
        // A radio directory that does not exist yet, nor its parent, is made (`bledfu simulate --adapter
        // virtual:/new/dir --controller ...` once failed with "cannot write its profile: No such file or directory").
        let fresh = radio.appendingPathComponent("new/radio").path
        _ = try SimulatorSetup.prepare(
            .virtual(radioDirectory: fresh), controllers: [(adapter: "line", profile: s140)], events: Silent(),
            statusDirectory: nil, stateDirectory: nil)
        #expect(VirtualController(radio: fresh, name: "line").profile() == s140)
        let unwritable = radio.appendingPathComponent("file")
        try Data().write(to: unwritable)
        #expect(ProfileCatalogTests.code { () throws(SimulatorError) in
            _ = try SimulatorSetup.prepare(
                .virtual(radioDirectory: unwritable.path), controllers: [(adapter: "default", profile: s140)],
                events: Silent(), statusDirectory: nil, stateDirectory: nil)
        } == .controllerUnwritable)
        let bluez = try SimulatorSetup.prepare(
            .bluez(adapter: "hci9"), controllers: [], events: Silent(), statusDirectory: nil, stateDirectory: "/state")
        #expect(bluez.host.place == "hci9" && bluez.statusDirectory == "/state/status" && bluez.sharedAir == nil)
    }

    @Test func describeGroupsInstancesPerControllerAndComputesCeilings() throws {
        let specs = try Self.specs("sensor:2", "smp-sensor", "sdk11-nrf52")
        let controllers = SimulatorDescription.controllers(
            [(adapter: "default", profile: try ControllerProfile(parsing: "s140"))], specs: specs)
        #expect(controllers.map(\.adapter) == ["default", "*"])
        #expect(controllers[0].estimates.map(\.device) == ["Sensor", "SMP Sensor", "Nordic_HRM"])
        #expect(controllers[1].profile == .generic)
        #expect(controllers[0].event.shared.count == 3)
        guard case .secure(let event) = SimulatorDescription.device(specs[0]) else {
            Issue.record("sensor-1 is a Secure DFU device")
            return
        }
        #expect(event.name == "Sensor-1" && event.ceiling.writeWithoutResponse > 0)
        #expect(event.ceiling.writeWithoutResponse <= event.ceiling.airWriteWithoutResponse)
        guard case .smp(let smp, let bound) = SimulatorDescription.device(specs[2]) else {
            Issue.record("smp-sensor is an SMP device")
            return
        }
        #expect(smp.family == "smp" && smp.ceiling.smpBound == Int(bound.bytesPerSecond.rounded()))
        guard case .legacy(_, let ceiling) = SimulatorDescription.device(specs[3]) else {
            Issue.record("sdk11-nrf52 is a Legacy device")
            return
        }
        #expect(ceiling.airWriteWithoutResponse > 0)
    }

    @Test func statusFilesAreReadBackByFamilyAndFiltered() async throws {
        let directory = try ProfileCatalogTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(ProfileCatalogTests.code { () throws(SimulatorError) in
            _ = try SimulatorStatus.read(directory: directory.appendingPathComponent("none").path, device: nil)
        } == .noStatus)
        let specs = try Self.specs("bracelet", "sdk11-nrf52")
        guard case .secure(let secure) = specs[0].device, case .legacy(let legacy) = specs[1].device else { return }
        let encoder = JSONEncoder()
        try encoder.encode(await VirtualDevice(profile: secure, clock: ContinuousClock()).state())
            .write(to: directory.appendingPathComponent(SimulatorFiles.stateName(secure.address)))
        try encoder.encode(await VirtualLegacyDevice(profile: legacy, clock: ContinuousClock()).state())
            .write(to: directory.appendingPathComponent(SimulatorFiles.stateName(legacy.address)))
        try Data("{}".utf8).write(to: directory.appendingPathComponent("junk.json"))
        try Data("{}".utf8).write(to: directory.appendingPathComponent(".hidden.json"))
        let all = try SimulatorStatus.read(directory: directory.path, device: nil)
        #expect(all.count == 3)
        #expect(all.filter(\.isDevice).count == 2)
        #expect(all.contains { if case .unreadable(let path, _) = $0 { path.hasSuffix("/junk.json") } else { false } })
        let one = try SimulatorStatus.read(directory: directory.path, device: legacy.address)
        #expect(one.filter(\.isDevice).count == 1)
        guard case .legacy(let identity, _) = one.first(where: \.isDevice) else {
            Issue.record("the legacy device's status")
            return
        }
        #expect(identity == legacy.address)
        let error = SimulatorStatus.noDevice("AA:BB", in: "/dir")
        #expect(error.code == .noStatus && error.message == "no device status for AA:BB in /dir")
    }
}

/// Host events nobody reads.
struct Silent: HostEvents {
    func emit(_ event: String, device: HostedDeviceEntry?, address: BluetoothAddress, name: String?, peer: PeerProcess?) {}
    func fault(_ record: FaultRecord, device: String, address: String) {}
    func failure(_ message: String) {}
}
