import BLECore
import DFUSimulator
import Foundation
import SimulatorHost

extension DescribeRenderer {
    /// `--describe`: the central adapters' controllers (docs/simulator.md "One controller per central adapter"): what
    /// each carries, where the figures come from, and what its links of each device profile get when they share its
    /// air (SimulatorHost's ``SimulatorDescription/controllers(_:specs:)``).
    static func emitControllers(
        _ named: [(adapter: String, profile: ControllerProfile)], specs: [SimulatedDeviceSpec], json: Bool
    ) {
        for controller in SimulatorDescription.controllers(named, specs: specs) {
            if json {
                Console.jsonLine(controller.event)
                continue
            }
            let (adapter, profile) = (controller.adapter, controller.profile)
            print(adapter == "*" ? "any other adapter (default controller): \(profile)" : "adapter \(adapter): \(profile)")
            print("  sources: \(profile.source)")
            print(
                "  model: the links of this adapter share its radio; each link's events are placed without overlap "
                    + "(anchor, event length, interval), the air is shared max-min fairly, one connection is created "
                    + "at a time, a link beyond \(profile.maximumLinks) is refused"
                    + (profile.waitsForUnseenDevices ? ", a device never seen fails after the connect timeout" : ""))
            for (device, estimate) in controller.estimates {
                print(
                    "  \(estimate.links) × \(device): each at \(Int((estimate.slowestSpeed * 100).rounded())) % of its "
                        + "rate alone (\(Int(estimate.perLink.rounded())) B/s), adapter total "
                        + "\(Int(estimate.aggregate.rounded())) B/s; reservation "
                        + String(format: "%.2f", estimate.reservation))
            }
        }
    }
}
