import DFUPackage
import DFUSimulator
import LegacyDFU
import MCUbootImage
import MCUmgr
import SecureDFU

/// One device of the bench, prepared for repeated updates, with the part its family sends.
public enum BenchTarget: Sendable {
    case secure(DeviceProfile, DFUPart)
    case legacy(LegacyDeviceProfile, LegacyPart)
    case smp(SMPDeviceProfile, MCUbootImage)

    /// A Secure DFU profile made ready for the bench with an image of `size` bytes.
    public static func secure(_ profile: DeviceProfile, size: Int, speedup: Double) -> BenchTarget {
        let ready = SecureBench.benchProfile(profile, imageBytes: size, speedup: speedup)
        return .secure(ready, SecureBench.part(size: size, profile: ready))
    }

    /// A Legacy DFU profile made ready for the bench with an image of `size` bytes (rounded down to words).
    public static func legacy(_ profile: LegacyDeviceProfile, size: Int, speedup: Double) -> BenchTarget {
        let ready = LegacyBench.benchProfile(profile, speedup: speedup)
        return .legacy(ready, LegacyBench.part(size: size, profile: ready))
    }

    /// An SMP profile made ready for the bench with an MCUboot image of `size` bytes in all.
    public static func smp(_ profile: SMPDeviceProfile, size: Int, speedup: Double) throws -> BenchTarget {
        let ready = SMPBench.benchProfile(profile, imageBytes: size, speedup: speedup)
        return .smp(ready, try SMPBench.image(size: size))
    }

    /// The modes of `requested` this family runs (nil: the bench's defaults).
    public func modes(_ requested: [String]?) -> [String] {
        switch self {
        case .secure: SecureBench.modes(requested)
        case .legacy: LegacyBench.modes(requested)
        case .smp: SMPBench.modes(requested)
        }
    }
}

/// One run of the matrix: a mode on a target, the n-th time.
public struct BenchJob: Sendable {
    public var mode: String
    public var profileName: String
    public var target: BenchTarget
    public var repetition: Int
    /// `--warm`: an adaptive Secure DFU transfer starts from what a first, untimed transfer learned.
    public var warm: Bool

    public init(mode: String, profileName: String, target: BenchTarget, repetition: Int, warm: Bool = false) {
        self.mode = mode
        self.profileName = profileName
        self.target = target
        self.repetition = repetition
        self.warm = warm
    }

    /// Runs this job on a fresh virtual device of its family; `timeout` bounds each checkpoint or response wait.
    public func run(timeout: Duration, trace: (@Sendable (String) -> Void)? = nil) async -> BenchRun {
        switch target {
        case .secure(let profile, let part) where warm:
            return await SecureBench.runWarm(
                mode: mode, profileName: profileName, profile: profile, part: part, repetition: repetition,
                checkpointTimeout: timeout, trace: trace)
        case .secure(let profile, let part):
            return await SecureBench.run(
                mode: mode, profileName: profileName, profile: profile, part: part, repetition: repetition,
                checkpointTimeout: timeout, trace: trace)
        case .legacy(let profile, let part):
            return await LegacyBench.run(
                mode: mode, profileName: profileName, profile: profile, part: part, repetition: repetition,
                responseTimeout: timeout)
        case .smp(let profile, let image):
            return await SMPBench.run(
                mode: mode, profileName: profileName, profile: profile, image: image, repetition: repetition,
                timeout: timeout)
        }
    }
}

/// The bench matrix (modes x profiles x sizes x repetitions) on in-process virtual devices of every family.
public enum BenchMatrix {
    /// The jobs in matrix order: per size, per profile, per repetition, every mode of the profile's family.
    public static func jobs(
        targets: [(name: String, target: BenchTarget)], modes: [String]?, repetitions: Int, warm: Bool = false
    ) -> [BenchJob] {
        var jobs: [BenchJob] = []
        for (name, target) in targets {
            let modes = target.modes(modes)
            for repetition in 1...max(repetitions, 1) {
                for mode in modes {
                    jobs.append(BenchJob(mode: mode, profileName: name, target: target, repetition: repetition, warm: warm))
                }
            }
        }
        return jobs
    }

    /// Runs `jobs`, `parallel` at a time; `emit` sees each run as it ends; returns the runs in matrix order.
    public static func run(
        _ jobs: [BenchJob], parallel: Int, timeout: Duration, trace: (@Sendable (String) -> Void)? = nil,
        emit: (BenchRun) -> Void
    ) async -> [BenchRun] {
        var results: [(Int, BenchRun)] = []
        await withTaskGroup(of: (Int, BenchRun).self) { group in
            var next = 0
            func add() {
                let index = next
                let job = jobs[index]
                group.addTask { (index, await job.run(timeout: timeout, trace: trace)) }
                next += 1
            }
            while next < min(max(parallel, 1), jobs.count) { add() }
            for await result in group {
                results.append(result)
                emit(result.1)
                if next < jobs.count { add() }
            }
        }
        return results.sorted { $0.0 < $1.0 }.map(\.1)
    }
}
