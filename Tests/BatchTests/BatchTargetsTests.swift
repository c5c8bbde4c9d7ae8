import BLECore
import Batch
import Foundation
import Testing
import VirtualRadio

/// What a run updates (`DeviceDiscovery.targets`) and the links `connections: auto` gets from a virtual adapter's
/// controller (`BatchPlan.Adapter.controllerLinks`): the library side of `bledfu batch`.
@Suite(.timeLimit(.minutes(3))) struct BatchTargetsTests {
    static let rules = """
        discover:
          duration: 3600
          expect: 3
          rules: [{class: bracelet, name_prefix: Bracelet}]
        """

    /// The plan's devices first, then the discovered ones; a device both listed and heard keeps its listed class.
    @Test func listedDevicesComeFirstAndWinOverDiscoveredOnes() async throws {
        let plan = try PlanParser.parse("""
            adapters: [{name: hci0}]
            classes: {bracelet: {package: app.zip}, sensor: {package: s.zip}}
            devices: [{address: "C6:05:04:03:04:01", class: sensor}]
            \(Self.rules)
            """)
        let adapter = ScriptedAdapter(advertisements: [
            DiscoveryTests.advertisement("C6:05:04:03:02:01", name: "Bracelet-1"),
            DiscoveryTests.advertisement("C6:05:04:03:04:01", name: "Bracelet-3"),
            DiscoveryTests.advertisement("D2:C3:B4:A5:96:87", name: "Sensor-1"),
            DiscoveryTests.advertisement("C6:05:04:03:05:01", name: "Bracelet-5"),
        ])
        let targets = try await DeviceDiscovery.targets(plan, known: [], adapters: [adapter])
        #expect(targets.map(\.address.description) == ["C6:05:04:03:04:01", "C6:05:04:03:02:01", "C6:05:04:03:05:01"])
        #expect(targets.map(\.className) == ["sensor", "bracelet", "bracelet"])
    }

    /// No discovery rule: the listed devices and no scan (the adapter's scan would fail the run).
    @Test func withoutRulesNothingIsScanned() async throws {
        let plan = try PlanParser.parse("""
            adapters: [{name: hci0}]
            classes: {bracelet: {package: app.zip}}
            devices: [{address: "C6:05:04:03:02:01", class: bracelet}]
            """)
        let targets = try await DeviceDiscovery.targets(plan, known: [], adapters: [FailingScanAdapter()])
        #expect(targets.map(\.address.description) == ["C6:05:04:03:02:01"])
        // With a rule the scan's failure reaches the caller.
        let scanning = try PlanParser.parse("""
            adapters: [{name: hci0}]
            classes: {bracelet: {package: app.zip}}
            \(Self.rules)
            """)
        await #expect(throws: AdapterError.self) { try await DeviceDiscovery.targets(scanning, known: [], adapters: [FailingScanAdapter()]) }
    }

    /// A virtual adapter's controller profile says how many links it carries; a real adapter's does not.
    @Test func aVirtualAdaptersControllerSaysItsLinks() throws {
        let radio = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-targets-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: radio, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: radio) }
        let controller = VirtualController(radio: radio.path, name: VirtualController.defaultName)
        #expect(BatchPlan.Adapter(name: "virtual:\(radio.path)", connections: 1).controllerLinks == ControllerProfile.generic.maximumLinks)
        var profile = ControllerProfile.generic
        profile.maximumLinks = 9
        try controller.write(profile)
        #expect(BatchPlan.Adapter(name: "virtual:\(radio.path)", connections: 1).controllerLinks == 9)
        #expect(BatchPlan.Adapter(name: "virtual:\(radio.path)@other", connections: 1).controllerLinks == ControllerProfile.generic.maximumLinks)
        #expect(BatchPlan.Adapter(name: "hci0", connections: 1).controllerLinks == nil)
        #expect(BatchPlan.Adapter(name: "any", connections: 1).controllerLinks == nil)
    }
}

/// An adapter whose scan fails at once.
struct FailingScanAdapter: BLEAdapter {
    var name = "failing"

    func scan(filter: ScanFilter, duration: Duration) -> AsyncThrowingStream<Advertisement, any Error> {
        AsyncThrowingStream { $0.finish(throwing: AdapterError(.noAdapter, "no such adapter")) }
    }

    func connect(to peer: PeerAddress, options: ConnectOptions) async throws(AdapterError) -> any ATTBearer {
        throw AdapterError(.noAdapter, "no such adapter")
    }
}
