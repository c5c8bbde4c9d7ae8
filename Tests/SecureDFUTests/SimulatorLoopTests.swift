import BLECore
import DFUPackage
import DFUProtocol
import DFUSimulator
import Testing

@testable import SecureDFU

/// The engine against the simulator's pure `BootloaderStateMachine`, in-process: engine actions become bootloader
/// events, bootloader notifications become engine events. A dropped link ends the run with `.disconnected`. Device
/// time moves 1 ms per event, and by a timer's whole duration when the engine waits for it (nothing else to do).
struct SimulatorLoop {
    var engine: SecureDFUStateMachine
    var device: BootloaderStateMachine
    var now: Duration = .zero
    var result: Result<Void, DFUEngineError>?
    var requests: [ControlPointRequest] = []
    /// Every notification the device sent, in order.
    var notifications: [[UInt8]] = []
    /// Device time that passed in the engine's timers.
    var waited: Duration = .zero

    init(part: DFUPart, device: BootloaderStateMachine, configuration: SecureDFUConfiguration) {
        engine = SecureDFUStateMachine(part: part, configuration: configuration)
        self.device = device
        self.device.connected()
    }

    /// Notifications, or nil when the device dropped the link / refused the write.
    mutating func deliver(_ event: BootloaderEvent) -> [[UInt8]]? {
        now += .milliseconds(1)
        var out: [[UInt8]] = []
        for action in device.handle(event, at: now) {
            switch action {
            case .notify(let bytes):
                out.append(bytes)
                notifications.append(bytes)
            case .attError, .disconnect, .reboot, .resetAfterFlash: return nil
            case .flash, .wait, .fault: break
            }
        }
        return out
    }

    mutating func run(mtu: Int = 247) {
        var events: [DFUEvent] = [.started(mtu: mtu)]
        var timer: (DFUTimer, Duration)?
        var steps = 0
        while result == nil, steps < 200_000 {
            steps += 1
            let event: DFUEvent
            if !events.isEmpty {
                event = events.removeFirst()
            } else if let (pending, duration) = timer {
                timer = nil
                now += duration
                waited += duration
                event = .timerFired(pending)
            } else {
                break
            }
            var notifications: [[UInt8]] = []
            var linkLost = false
            for action in engine.handle(event) where !linkLost {
                switch action {
                case .writeControlPoint(let request):
                    requests.append(request)
                    if let out = deliver(.controlPointWrite(request.encoded, cccdEnabled: true)) {
                        notifications += out
                    } else {
                        linkLost = true
                    }
                case .sendPackets(let burst):
                    let bytes = burst.source == .initPacket ? engine.part.initPacket : engine.part.image
                    for range in burst.packets where !linkLost {
                        if let out = deliver(.packetWrite(Array(bytes[range]), withResponse: false)) {
                            notifications += out
                        } else {
                            linkLost = true
                        }
                    }
                    if !linkLost { events.append(.packetsSent) }
                case .startTimer(let t, let duration): timer = (t, duration)
                case .completed: result = .success(())
                case .failed(let error): result = .failure(error)
                case .progress, .objectExecuted: break
                }
            }
            if linkLost {
                _ = device.handle(.disconnected, at: now)
                events = [.disconnected]
                continue
            }
            events += notifications.map { .controlPointNotification($0) }
        }
    }

    var failure: DFUEngineError? { if case .failure(let e) = result { e } else { nil } }
    var succeeded: Bool { if case .success = result { true } else { false } }
}

extension SimulatorLoop: CustomStringConvertible {
    var description: String { "SimulatorLoop(result \(String(describing: result)), \(requests.count) requests)" }
}

enum SimulatorFixture {
    static let image = testBytes(10_000, seed: 11)  // 3 objects of at most 4096 bytes

    static func profile(saveProgress: Bool = false, sdk: String = "15.3.0") throws -> DeviceProfile {
        DeviceProfile(
            name: "Bracelet", sdkVersion: sdk, address: try #require(BluetoothAddress("C0:11:22:33:44:FF")),
            hwVersion: 52, softDeviceFWID: 0xB7, saveProgress: saveProgress, requireSignedApp: true, publicKeys: [],
            link: LinkParameters(receiveBuffers: 64), flash: FlashParameters(queueDepth: 64, bankSize: 200_704),
            speedup: .infinity)
    }

    static func part(fwVersion: UInt32 = 2) -> DFUPart {
        let command = InitCommand(
            fwVersion: fwVersion, hwVersion: 52, sdReq: [0xB7], type: .application, sdSize: 0, blSize: 0,
            appSize: UInt32(image.count),
            hash: ImageHash(type: .sha256, bytes: Array(DFUSimulatorDigest.sha256(image).reversed())), isDebug: false,
            bootValidation: [BootValidation(type: .crc)])
        return DFUPart(
            name: "application", initPacket: SecureInitPacket(command: command).encode(), image: image,
            firmwareVersion: fwVersion)
    }
}

@Suite(.timeLimit(.minutes(5))) struct SimulatorLoopTests {
    @Test(arguments: ["adaptive", "prn:12", "nrfutil", "ios"])
    func threeObjects(policy: String) throws {
        let device = BootloaderStateMachine(profile: try SimulatorFixture.profile())
        var loop = SimulatorLoop(
            part: SimulatorFixture.part(), device: device,
            configuration: SecureDFUConfiguration(pacing: try PacingPolicies.parse(policy)))
        loop.run()
        let succeeded = loop.succeeded
        #expect(succeeded, "\(String(describing: loop.failure))")
        let completed = loop.device.counters.updatesCompleted
        #expect(completed == 1)
    }

    @Test(arguments: ["adaptive", "prn:8", "checksum:4", "object"])
    func withDrops(policy: String) throws {
        let faults = try FaultPlan(parsing: "seed=7,drop-rate=0.05")
        let device = BootloaderStateMachine(profile: try SimulatorFixture.profile(), faults: faults)
        var loop = SimulatorLoop(
            part: SimulatorFixture.part(), device: device,
            configuration: SecureDFUConfiguration(pacing: try PacingPolicies.parse(policy), maxAttempts: 5))
        loop.run()
        let succeeded = loop.succeeded
        #expect(succeeded, "\(String(describing: loop.failure))")
        let dropped = loop.device.counters.packetsDropped
        #expect(dropped > 0)
        #expect(loop.engine.retries > 0)
    }

    @Test func firmwareVersionTooLowByName() throws {
        let faults = try FaultPlan(parsing: "reject-at=execute-command:0B:05")
        let device = BootloaderStateMachine(profile: try SimulatorFixture.profile(), faults: faults)
        var loop = SimulatorLoop(
            part: SimulatorFixture.part(), device: device,
            configuration: SecureDFUConfiguration(deviceFirmwareVersion: 3))
        loop.run()
        let failure = loop.failure
        #expect(failure?.code == .remote)
        #expect(
            failure?.reason == "Execute (0x04) refused: firmware version too low (0x05): device has 3, package has 2")
    }

    @Test(arguments: [true, false])
    func resumesAfterADisconnect(saveProgress: Bool) throws {
        let faults = try FaultPlan(parsing: "disconnect-after-bytes=6000")
        let device = BootloaderStateMachine(
            profile: try SimulatorFixture.profile(saveProgress: saveProgress), faults: faults)
        var first = SimulatorLoop(
            part: SimulatorFixture.part(), device: device, configuration: SecureDFUConfiguration())
        first.run()
        #expect(first.failure?.code == .disconnected)
        var second = SimulatorLoop(
            part: SimulatorFixture.part(), device: first.device, configuration: SecureDFUConfiguration())
        second.run()
        let succeeded = second.succeeded
        #expect(succeeded, "\(String(describing: second.failure))")
        #expect(!second.requests.contains { if case .create(.command, _) = $0 { true } else { false } })
    }
}

/// Issue 22: a repeated Execute answers 0x08 or success depending on the SDK version (docs/simulator.md, "Settled
/// against the SDK sources"). The link drops right after the second Create Data; the engine resumes at 4096 with a
/// matching CRC and executes "to be sure": SDK 15 kept the created, empty object (0x08), SDK 17 reloaded its settings
/// (success). The engine goes on either way.
@Suite(.timeLimit(.minutes(5))) struct RepeatedExecuteAnswerTests {
    @Test(arguments: [("15.3.0", UInt8(0x08)), ("17.1.0", UInt8(0x01))])
    func eitherAnswer(sdk: String, answer: UInt8) throws {
        let faults = try FaultPlan(parsing: "disconnect-at=after-create-data#2")
        let device = BootloaderStateMachine(
            profile: try SimulatorFixture.profile(saveProgress: true, sdk: sdk), faults: faults)
        var first = SimulatorLoop(part: SimulatorFixture.part(), device: device, configuration: SecureDFUConfiguration())
        first.run()
        #expect(first.failure?.code == .disconnected)
        var second = SimulatorLoop(part: SimulatorFixture.part(), device: first.device, configuration: SecureDFUConfiguration())
        second.run()
        let succeeded = second.succeeded
        #expect(succeeded, "\(String(describing: second.failure))")
        #expect(second.device.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(SimulatorFixture.image))
        // The first Execute of the second connection is the resume's, answered as the version does.
        let executes = second.notifications.filter { $0.count >= 3 && $0[0] == 0x60 && $0[1] == 0x04 }
        #expect(executes.dropFirst().first == [0x60, 0x04, answer], "\(executes)")
    }
}

@Suite(.timeLimit(.minutes(5))) struct PackagePartTests {
    @Test func partsFromABuiltPackage() throws {
        var builder = PackageBuilder()
        builder.application = PackageBuilder.Image(stem: "app", bytes: testBytes(5000, seed: 4))
        builder.applicationVersion = 7
        builder.hwVersion = 52
        builder.sdReq = [0xB7]
        let package = try FirmwarePackage(bytes: try builder.archive())
        let parts = DFUPart.parts(of: package)
        #expect(parts.count == 1)
        #expect(parts.first?.name == "application")
        #expect(parts.first?.firmwareVersion == 7)
        #expect(parts.first?.image.count ?? 0 >= 5000)
        #expect(parts.first?.initPacket == package.parts.first?.initPacketBytes)
    }
}

/// Issue 18 point 1: SDK 15-17 refuse Create Data with 0x05 while the flash queue is full
/// (`on_data_obj_create_request`) and drop Packet writes meanwhile; the real bootloader only asks for patience. The
/// engine used to stop at the refusal ("Create (0x01) refused: invalid object") and to give up after six failed
/// checkpoints in a row, well inside one page erase. Device time runs at the parts' real flash times (speedup 1).
@Suite(.timeLimit(.minutes(5))) struct FlashQueueFullEngineTests {
    @Test func aRefusedCreateIsRetriedAfterTheQueueDrains() throws {
        var profile = try SimulatorFixture.profile()
        profile.speedup = 1  // real flash times; the loop's device clock moves 1 ms per event and through waits
        // Page erases of 85 ms fill the 64-deep queue before the 2nd Create Data: refused until the first one is done.
        let faults = try FaultPlan(parsing: "flash-busy-at=before-create-data#2")
        var loop = SimulatorLoop(
            part: SimulatorFixture.part(), device: BootloaderStateMachine(profile: profile, faults: faults),
            configuration: SecureDFUConfiguration())
        loop.run()
        let succeeded = loop.succeeded
        #expect(succeeded, "\(String(describing: loop.failure))")
        #expect(loop.device.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(SimulatorFixture.image))
        let refused = loop.device.counters.createsRefused
        #expect(refused >= 2)
        // 60 01 05 answers, each followed by the same Create after a wait: more Creates of object 1 than refusals.
        let refusals = loop.notifications.filter { $0 == [0x60, 0x01, 0x05] }.count
        #expect(refusals == refused)
        let creates = loop.requests.filter { if case .create(.data, _) = $0 { true } else { false } }.count
        #expect(creates >= refused + 2, "\(loop.requests) \(loop.notifications)")
        // The waits before the Creates that were refused: 50 ms, then 100 ms, … (the first erase ends after 85 ms).
        #expect(loop.waited >= .milliseconds(50 * ((1 << refused) - 1)), "\(loop.requests) \(loop.notifications)")
    }

    /// The SDK's fstorage queue of 16 behind a link faster than the flash (one packet per millisecond of device
    /// time): writes are dropped while the page erase runs, and each in-object retry comes before it is done.
    @Test func aDeviceThatIsMerelyErasingIsWaitedFor() throws {
        var profile = try SimulatorFixture.profile()
        profile.speedup = 1
        profile.flash.queueDepth = 16
        profile.link.receiveBuffers = 17
        var loop = SimulatorLoop(
            part: SimulatorFixture.part(), device: BootloaderStateMachine(profile: profile),
            configuration: SecureDFUConfiguration())
        loop.run()
        #expect(loop.device.counters.packetsDropped > 0)
        let succeeded = loop.succeeded
        #expect(succeeded, "\(String(describing: loop.failure))")
        #expect(loop.device.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(SimulatorFixture.image))
        #expect(loop.engine.retries >= 1)
    }

    /// A flash that never finishes (its queue filled with erases that take days): the device truly stopped
    /// accepting data. The engine gives up with one line once it waited the stall timeout (10 s) without progress.
    @Test func aDeviceWhoseFlashNeverDrainsIsGivenUpOn() throws {
        var profile = try SimulatorFixture.profile()
        profile.speedup = 1
        let faults = try FaultPlan(parsing: "flash-busy-at=before-create-data#2,slow-flash=1000000")
        var loop = SimulatorLoop(
            part: SimulatorFixture.part(), device: BootloaderStateMachine(profile: profile, faults: faults),
            configuration: SecureDFUConfiguration())
        loop.run()
        let failure = loop.failure
        #expect(failure?.code == .gaveUp)
        #expect(failure?.reason.hasPrefix("gave up: no new data past offset 4096 in ") == true, "\(String(describing: failure))")
        #expect(failure?.reason.hasSuffix("; last: Create (0x01) refused: invalid object (0x05)") == true)
        #expect(loop.waited >= .seconds(10))
        #expect(loop.device.installed.application?.sha256 != DFUSimulatorDigest.sha256Hex(SimulatorFixture.image))
    }
}
