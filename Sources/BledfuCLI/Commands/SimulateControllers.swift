import BLECore
import DFUSimulator
import Foundation
import SimulatorHost

/// `--describe`: the central adapters' controllers (docs/simulator.md "One controller per central adapter"): what each
/// carries, where the figures come from, and what its links of each device profile get when they share its air.
extension SimulatorDescription {
    static func emitControllers(
        _ named: [(adapter: String, profile: ControllerProfile)], specs: [SimulatedDeviceSpec], json: Bool
    ) {
        // Every virtual adapter has a controller: one not named by --controller has the default one
        // (docs/virtual-radio.md §4.2), stated as adapter "*".
        var controllers = named
        controllers.append((adapter: "*", profile: .generic))
        var models: [(name: String, model: LinkModel)] = []
        for spec in specs {
            let model: LinkModel
            switch spec.device {
            case .secure(let profile): model = LinkModel(profile: profile)
            case .legacy(let profile): model = LinkModel(link: profile.link, flash: profile.flash)
            case .smp(let profile): model = LinkModel(link: profile.link, flash: FlashParameters())
            }
            // Instances of one profile ("bracelet-1", "bracelet-2") share its link model.
            var base = spec.name
            if let dash = base.lastIndex(of: "-"), base[base.index(after: dash)...].allSatisfy(\.isNumber) {
                base = String(base[..<dash])
            }
            if !models.contains(where: { $0.name == base }) { models.append((base, model)) }
        }
        for (adapter, profile) in controllers {
            let estimates = models.map { entry in
                (entry.name, SharedAir.estimate(
                    model: entry.model, links: profile.maximumLinks, eventLengthMicros: profile.eventLengthMicros))
            }
            if json {
                Console.jsonLine(ControllerDescribeEvent(
                    adapter: adapter, controller: profile,
                    shared: estimates.map { .init(device: $0.0, estimate: $0.1) }))
                continue
            }
            print(adapter == "*" ? "any other adapter (default controller): \(profile)" : "adapter \(adapter): \(profile)")
            print("  sources: \(profile.source)")
            print(
                "  model: the links of this adapter share its radio; each link's events are placed without overlap "
                    + "(anchor, event length, interval), the air is shared max-min fairly, one connection is created "
                    + "at a time, a link beyond \(profile.maximumLinks) is refused"
                    + (profile.waitsForUnseenDevices ? ", a device never seen fails after the connect timeout" : ""))
            for (device, estimate) in estimates {
                print(
                    "  \(estimate.links) × \(device): each at \(Int((estimate.slowestSpeed * 100).rounded())) % of its "
                        + "rate alone (\(Int(estimate.perLink.rounded())) B/s), adapter total "
                        + "\(Int(estimate.aggregate.rounded())) B/s; reservation "
                        + String(format: "%.2f", estimate.reservation))
            }
        }
    }
}

/// The NDJSON line `--describe --json` prints per central adapter.
struct ControllerDescribeEvent: Encodable {
    struct Shared: Encodable {
        var device: String
        var estimate: AdapterEstimate
    }
    var event = "controller"
    var adapter: String
    var controller: ControllerProfile
    var shared: [Shared]
}
