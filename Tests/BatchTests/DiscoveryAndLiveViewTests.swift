import BLECore
import DFUProtocol
import Foundation
import Testing

@testable import Batch

@Suite(.timeLimit(.minutes(5))) struct DiscoveryTests {
    static func advertisement(_ address: String, name: String?, services: [BluetoothUUID] = [SecureDFUUUID.service], rssi: Int8? = -50)
        -> Advertisement
    {
        Advertisement(
            peer: PeerAddress(BluetoothAddress(address) ?? BluetoothAddress(bytes: [0, 0, 0, 0, 0, 0])!, type: .random), rssi: rssi,
            data: AdvertisingData.build(name: name, services: services))
    }

    @Test func rulesMatchNameServiceRSSIAndButtonless() {
        let rule = DiscoveryRule(className: "bracelet", namePrefix: "Bracelet", serviceUUID: BluetoothUUID(0xFE59), minimumRSSI: -70, buttonlessInAppMode: true,
            dfuServices: [BluetoothUUID(0xFE59)])
        #expect(rule.matches(Self.advertisement("C6:05:04:03:02:01", name: "Bracelet-1")))
        #expect(!rule.matches(Self.advertisement("C6:05:04:03:02:01", name: "Sensor-1")))
        #expect(!rule.matches(Self.advertisement("C6:05:04:03:02:01", name: "Bracelet-1", services: [])))
        #expect(!rule.matches(Self.advertisement("C6:05:04:03:02:01", name: "Bracelet-1", rssi: -80)))
        #expect(!rule.matches(Self.advertisement("C6:05:04:03:02:01", name: "Bracelet-1", rssi: nil)))
        // A bootloader (the SDK name or a line-given name) is not a device in application mode.
        let anyName = DiscoveryRule(className: "x", buttonlessInAppMode: true, dfuServices: [BluetoothUUID(0xFE59)])
        // The services come from the families: a rule that was given none matches no advertisement as buttonless.
        #expect(!DiscoveryRule(className: "x", buttonlessInAppMode: true).matches(Self.advertisement("C6:05:04:03:02:02", name: "Dfuzzy")))
        #expect(!anyName.matches(Self.advertisement("C6:05:04:03:02:02", name: "DfuTarg")))
        #expect(!anyName.matches(Self.advertisement("C6:05:04:03:02:02", name: "Dfu030201")))
        #expect(anyName.matches(Self.advertisement("C6:05:04:03:02:02", name: "Dfuzzy")))
        #expect(DiscoveryRule(className: "x").matches(Self.advertisement("C6:05:04:03:02:02", name: "DfuTarg")))
    }

    @Test func theMatcherKeepsEachDeviceOnceAndTheFirstRuleWins() {
        var matcher = DiscoveryMatcher(rules: [
            DiscoveryRule(className: "bracelet", namePrefix: "Bracelet"), DiscoveryRule(className: "any"),
        ])
        #expect(matcher.offer(Self.advertisement("C6:05:04:03:02:01", name: "Bracelet-1"))?.className == "bracelet")
        #expect(matcher.offer(Self.advertisement("C6:05:04:03:02:01", name: "Bracelet-1")) == nil)
        // Its bootloader at address + 1 is the same device.
        #expect(matcher.offer(Self.advertisement("C6:05:04:03:02:02", name: "DfuTarg")) == nil)
        #expect(matcher.offer(Self.advertisement("D2:C3:B4:A5:96:87", name: "Sensor-1"))?.className == "any")
        #expect(matcher.targets.map(\.name) == ["Bracelet-1", "Sensor-1"])
    }

    @Test func generatedBootloaderNames() {
        #expect(BootloaderNames.name(for: BluetoothAddress("C6:05:04:03:02:01")!) == "Dfu030201")
        #expect(BootloaderNames.isGenerated("Dfu030201"))
        #expect(!BootloaderNames.isGenerated("DfuTarg"))
        let a = BluetoothAddress("C6:05:04:03:02:01")!
        let b = BluetoothAddress("D6:05:04:03:02:01")!
        let c = BluetoothAddress("D6:15:04:03:02:01")!
        let names = BootloaderNames.unique(for: [a, b, c])
        #expect(names[a] == "Dfu030201")
        #expect(names[b] == "Dfu04030201")
        #expect(names[c] == "Dfu04030201-2")
    }
}

@Suite(.timeLimit(.minutes(5))) struct LiveViewTests {
    @Test func linesPerActiveDeviceAndTotals() throws {
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        var view = LiveView(startedAt: start)
        let targets = Fixture.targets(4)
        for target in targets { view.apply(.enrolled(target, status: .pending)) }
        view.apply(.enrolled(BatchTarget(peer: PeerAddress(Fixture.address(9), type: .random), className: "bracelet"), status: .done))
        let a = targets[0].address.description
        let b = targets[1].address.description
        view.apply(.started(address: a, name: "Bracelet-1", adapter: "hci0", attempt: 1))
        view.apply(.started(address: b, name: "Bracelet-2", adapter: "hci1", attempt: 2))
        view.apply(.progress(address: a, DeviceProgress(stage: "uploading", bytes: 500, total: 1000)))
        view.apply(.finished(address: b, status: .failed, error: "link lost", retrying: false))

        let frame = view.frame(at: start.addingTimeInterval(60))
        #expect(frame.count == 2)
        #expect(frame[0].contains("Bracelet-1") && frame[0].contains("50%") && frame[0].contains("hci0"))
        let totals = view.totals(at: start.addingTimeInterval(60))
        #expect(totals.done == 1 && totals.failed == 1 && totals.remaining == 3 && totals.active == 1)
        // One device finished in this run in one minute: 60 per hour (the one done before this run does not count).
        #expect(totals.ratePerHour == 60)
        #expect(frame[1] == totals.text)
        #expect(totals.text.contains("rate 60/h"))

        let lines = view.ndjson(for: .finished(address: b, status: .failed, error: "link lost", retrying: false), at: start.addingTimeInterval(60))
        #expect(lines.count == 2)
        let finished = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(finished["event"] as? String == "finished" && finished["error"] as? String == "link lost")
        let totalsEvent = try #require(try JSONSerialization.jsonObject(with: Data(lines[1].utf8)) as? [String: Any])
        #expect(totalsEvent["event"] as? String == "totals")
        #expect(totalsEvent["remaining"] as? Int == 3)
        #expect(totalsEvent["ratePerHour"] as? Double == 60)
    }
}

/// An adapter whose scan reports the given advertisements and then stays open until cancelled.
struct ScriptedAdapter: BLEAdapter {
    var name = "scripted"
    var advertisements: [Advertisement]

    func scan(filter: ScanFilter, duration: Duration) -> AsyncThrowingStream<Advertisement, any Error> {
        AsyncThrowingStream { continuation in
            for advertisement in advertisements where filter.matches(advertisement) { continuation.yield(advertisement) }
        }
    }

    func connect(to peer: PeerAddress, options: ConnectOptions) async throws(AdapterError) -> any ATTBearer {
        throw AdapterError(.deviceNotFound, "scripted adapter")
    }
}

@Suite(.timeLimit(.minutes(5))) struct DeviceDiscoveryTests {
    /// Scanning stops once `expect` devices are known: matched now, or known from the database (a device waiting
    /// in its bootloader matches no rule). The scan never ends by itself, so a missed stop would hang.
    @Test(.timeLimit(.minutes(3))) func scanningStopsAtTheExpectedCount() async throws {
        let adapter = ScriptedAdapter(advertisements: [
            DiscoveryTests.advertisement("C6:05:04:03:02:01", name: "Bracelet-1"),
            DiscoveryTests.advertisement("C6:05:04:03:03:02", name: "Dfu030301"),
            DiscoveryTests.advertisement("D2:C3:B4:A5:96:87", name: "Sensor-1"),
            DiscoveryTests.advertisement("C6:05:04:03:04:01", name: "Bracelet-3"),
        ])
        let rules = [
            DiscoveryRule(className: "bracelet", namePrefix: "Bracelet", buttonlessInAppMode: true, dfuServices: [BluetoothUUID(0xFE59)])
        ]
        let found = try await DeviceDiscovery.discover(BatchPlan.Discovery(rules: rules, duration: 3600, expect: 2), adapters: [adapter])
        #expect(found.map(\.address.description) == ["C6:05:04:03:02:01", "C6:05:04:03:04:01"])
        #expect(found.allSatisfy { $0.className == "bracelet" })

        let known: Set<BluetoothAddress> = [try #require(BluetoothAddress("C6:05:04:03:03:01"))]
        let rerun = try await DeviceDiscovery.discover(
            BatchPlan.Discovery(rules: rules, duration: 3600, expect: 3), adapters: [adapter], known: known)
        #expect(rerun.count == 2)
        // Everything already known: no scan at all.
        let none = try await DeviceDiscovery.discover(BatchPlan.Discovery(rules: rules, duration: 3600, expect: 1), adapters: [adapter], known: known)
        #expect(none.isEmpty)
    }
}
