import DFUSimulator
import SecureDFU
import Foundation
import SimulatorHost
import Testing

@testable import Bench

/// `bledfu bench`'s virtual matrix: its targets from the profiles the options name, of any family.
@Suite(.timeLimit(.minutes(2))) struct BenchTargetsTests {
    static let catalog = ProfileCatalog(directory: BatchGridTests.firmware, builtIn: [:])

    @Test func everySizeTimesEveryProfileOfAnyFamily() throws {
        let targets = try BenchMatrix.targets(
            profiles: ["bracelet", "sdk11-nrf52", "smp-sensor"], sizes: [4096, 8192], speedup: 4, catalog: Self.catalog)
        #expect(targets.map(\.name) == ["bracelet", "sdk11-nrf52", "smp-sensor", "bracelet", "sdk11-nrf52", "smp-sensor"])
        let families = targets.map { item -> String in
            switch item.target {
            case .secure: "secure"
            case .legacy: "legacy"
            case .smp: "smp"
            }
        }
        #expect(families == ["secure", "legacy", "smp", "secure", "legacy", "smp"])
        if case .secure(_, let part) = targets[3].target {
            #expect(part.image.count == 8192)
        } else {
            Issue.record("the fourth target is not Secure DFU")
        }
    }

    @Test func anUnknownProfileIsTheCatalogsError() {
        do {
            _ = try BenchMatrix.targets(profiles: ["toaster"], sizes: [4096], speedup: 1, catalog: Self.catalog)
            Issue.record("a profile named toaster loaded")
        } catch let error as SimulatorError {
            #expect(error.code == .unknownProfile)
        } catch {
            Issue.record("not a SimulatorError: \(error)")
        }
    }
}
