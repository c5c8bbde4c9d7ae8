import DFUSimulator
import SimulatorHost

extension BenchTarget {
    /// A cell's target from a simulator profile of any family (SimulatorHost's ``SimulatedProfile``): its device
    /// made ready for the bench and its part of `size` bytes.
    public static func make(_ profile: SimulatedProfile, size: Int, speedup: Double) throws -> BenchTarget {
        switch profile {
        case .secure(let loaded): .secure(loaded, size: size, speedup: speedup)
        case .legacy(let loaded): .legacy(loaded, size: size, speedup: speedup)
        case .smp(let loaded): try .smp(loaded, size: size, speedup: speedup)
        }
    }
}

extension BenchMatrix {
    /// The targets of `bledfu bench`'s virtual matrix: every size, and for each every profile (loaded from
    /// `catalog`, any family), in that order. Throws the catalog's `SimulatorError` for a profile that does not load.
    public static func targets(
        profiles: [String], sizes: [Int], speedup: Double, catalog: ProfileCatalog
    ) throws -> [(name: String, target: BenchTarget)] {
        var targets: [(name: String, target: BenchTarget)] = []
        for size in sizes {
            for name in profiles {
                let profile = try catalog.loadAny(SimulatedDeviceRequest(parsing: name))
                targets.append((name, try BenchTarget.make(profile, size: size, speedup: speedup)))
            }
        }
        return targets
    }
}
