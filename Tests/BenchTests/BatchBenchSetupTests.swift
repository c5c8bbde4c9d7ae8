import BLECore
import Batch
import DFUSimulator
import Foundation
import LinuxIO
import SimulatorHost
import Testing

@testable import Bench

/// `bledfu bench batch`'s set-up below the CLI: the profile and its sample package, the plan of a run, and the
/// simulator child it waits for (its `ready` event, bounded). The timed runs themselves are CLITests'
/// BatchBenchTests (children of the built binary).
@Suite(.timeLimit(.minutes(2))) struct BatchBenchSetupTests {
    static let firmware = BatchGridTests.firmware
    static let catalog = ProfileCatalog(directory: firmware, builtIn: [:])

    static func bench(controller: String = "generic:links=3", connections: Int? = nil) throws -> BatchBench {
        BatchBench(
            executable: URL(fileURLWithPath: "/bin/false"), firmware: firmware, speedup: 2, controllerSpec: controller,
            controller: try ControllerProfile(parsing: controller), connections: connections
        ) { _ in throw BenchError(.scratch, "no adapter in this test") }
    }

    @Test func aProfileLoadsWithItsSamplePackage() throws {
        let profile = try BatchBenchProfile.load("sensor", catalog: Self.catalog)
        #expect(profile.name == "sensor")
        #expect(profile.package.path.hasSuffix("samples/sensor-app-v2.zip"))
        #expect(profile.package.totalBytes > 0)
        #expect(profile.package.sha256.count == 64)
    }

    @Test func aMissingFirmwareDirectoryOrProfileIsNamed() {
        #expect(throws: BenchError(.noFirmware, "")) {
            try BatchBenchProfile.load("bracelet", catalog: ProfileCatalog(directory: nil, builtIn: [:]))
        }
        do {
            _ = try BatchBenchProfile.load("toaster", catalog: Self.catalog)
            Issue.record("a profile named toaster loaded")
        } catch {
            #expect(error.code == .profile)
            #expect((error.cause as? SimulatorError)?.code == .unknownProfile)
        }
    }

    /// Links per adapter: the option, else `--connections`, else one per device; never more than the devices nor
    /// the controller's links. More than one adapter: `@central1`, `@central2`...
    @Test func thePlanSharesTheDevicesOverTheAdapters() throws {
        let profile = try BatchBenchProfile.load("bracelet", catalog: Self.catalog)
        let radio = URL(fileURLWithPath: "/tmp/radio")
        let plan = try Self.bench().plan(profile, count: 5, radio: radio, links: nil, adapters: 2)
        #expect(plan.adapters.map(\.name) == ["virtual:/tmp/radio@central1", "virtual:/tmp/radio@central2"])
        #expect(plan.adapters.map(\.connections) == [3, 3])
        #expect(Set(plan.devices.map(\.address)).count == 5)
        #expect(plan.devices.allSatisfy { $0.className == "bracelet" })
        #expect(plan.classes.map(\.package) == [profile.package.path])
        #expect(plan.policies.retries == 0 && !plan.policies.skipAtTargetVersion)
        let one = try Self.bench(connections: 2).plan(profile, count: 5, radio: radio, links: nil, adapters: 1)
        #expect(one.adapters.map(\.name) == ["virtual:/tmp/radio"])
        #expect(one.adapters.map(\.connections) == [2])
        #expect(try Self.bench().plan(profile, count: 2, radio: radio, links: 8, adapters: 1).adapters.map(\.connections) == [2])
    }

    /// Every central adapter of a run gets the bench's controller: with two adapters only the default one had it,
    /// so `central1` and `central2` carried the default controller's five links, and a grid cell of 12 devices at
    /// `auto` on two adapters measured refusals (61 % of its bound, every other cell 92-101 %).
    @Test func everyAdapterOfARunHasTheBenchsController() throws {
        let profile = try BatchBenchProfile.load("bracelet", catalog: Self.catalog)
        let radio = URL(fileURLWithPath: "/tmp/radio")
        let bench = try Self.bench(controller: "generic:links=12")
        for adapters in [1, 2, 3] {
            let arguments = bench.simulatorArguments(profile, count: 12, radio: radio, adapters: adapters)
            let controllers = arguments.indices.filter { arguments[$0] == "--controller" && $0 + 1 < arguments.count }.map { arguments[$0 + 1] }
            let names = try bench.plan(profile, count: 12, radio: radio, links: nil, adapters: adapters).adapters.map { adapter in
                adapter.name.split(separator: "@").dropFirst().first.map(String.init) ?? "default"
            }
            #expect(controllers == names.map { "\($0)=generic:links=12" }, "\(adapters) adapter(s): \(arguments)")
            #expect(arguments.prefix(7) == ["simulate", "--adapter", "virtual:/tmp/radio", "--device", "bracelet:12", "--speedup", "2.0"])
            #expect(arguments.last == "--json")
        }
    }
}

/// The simulator child: its `ready` event on standard output ends the wait; its exit or the deadline end it with
/// an error. Real children (/bin/sh) on a real pipe.
@Suite(.timeLimit(.minutes(2))) struct BenchSimulatorTests {
    static func shell(_ script: String) throws -> BenchSimulator {
        try BenchSimulator.start(executable: URL(fileURLWithPath: "/bin/sh"), arguments: ["-c", script], environment: ProcessInfo.processInfo.environment)
    }

    @Test func theReadyEventEndsTheWait() async throws {
        let simulator = try Self.shell(#"echo '{"event":"advertising"}'; echo '{"devices":2,"event":"ready"}'; exec sleep 60"#)
        try await simulator.waitUntilReady(timeout: .seconds(60))
        await simulator.stop()
        #expect(simulator.child.exit != nil)
    }

    @Test func aSimulatorThatExitsFirstIsAnError() async throws {
        let simulator = try Self.shell(#"echo '{"event":"advertising"}'; exit 3"#)
        await #expect(throws: BenchError(.simulatorStopped, "")) { try await simulator.waitUntilReady(timeout: .seconds(60)) }
        await simulator.stop()
    }

    /// Never ready: the deadline ends the wait (whatever the load: the script never prints `ready`).
    @Test func aSimulatorNeverReadyTimesOut() async throws {
        let simulator = try Self.shell("exec sleep 60")
        do {
            try await simulator.waitUntilReady(timeout: .milliseconds(200))
            Issue.record("ready without a ready event")
        } catch {
            #expect(error.code == .simulatorStopped)
            #expect(error.message.contains("did not report its devices advertising"), "\(error.message)")
        }
        await simulator.stop()
        #expect(simulator.child.exit != nil)
    }

    @Test func onlyTheReadyEventCounts() {
        #expect(BenchSimulator.isReady(Array(#"{"devices":1,"event":"ready","radio":"/tmp/r"}"#.utf8)))
        #expect(!BenchSimulator.isReady(Array(#"{"event":"advertising"}"#.utf8)))
        #expect(!BenchSimulator.isReady(Array("ready".utf8)))
    }
}
