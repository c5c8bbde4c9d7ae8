import BLECore
import VirtualRadio

extension BatchPlan.Adapter {
    /// The links this adapter's controller carries, when bledfu knows it: a virtual adapter's controller profile
    /// (docs/virtual-radio.md §4.2). A real adapter's controller does not say (nil: `connections: auto` starts at
    /// ``BatchPlan/autoConnections`` and the scheduler lowers it when the controller refuses a link).
    public var controllerLinks: Int? {
        guard name.hasPrefix("virtual:"), let radio = VirtualRadio.parse(String(name.dropFirst(8))) else { return nil }
        return VirtualController(radio: radio.directory, name: radio.adapter).profile().maximumLinks
    }
}

extension DeviceDiscovery {
    /// What a run updates: the plan's explicit devices, then whatever discovery finds on `adapters` (an explicit
    /// entry wins over a discovered one with the same address). `known`: the batch's devices in the log, which count
    /// toward `discover.expect`. No scan when the plan has no discovery rule.
    public static func targets(_ plan: BatchPlan, known: Set<BluetoothAddress>, adapters: [any BLEAdapter]) async throws
        -> [BatchTarget]
    {
        var targets = plan.devices.map { BatchTarget(peer: PeerAddress($0.address, type: $0.addressType), className: $0.className) }
        guard !plan.discovery.rules.isEmpty else { return targets }
        let explicit = Set(targets.map(\.address))
        let found = try await discover(plan.discovery, adapters: adapters, known: known.union(explicit))
        targets += found.filter { !explicit.contains($0.address) }
        return targets
    }
}
