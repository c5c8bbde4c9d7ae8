import BLECore
import DFUPackage
import DFUSimulator
import LegacyDFU
import Testing

/// The engine against the simulator's pure `LegacyBootloader`, in-process: engine actions become bootloader events,
/// bootloader notifications become engine events. Time follows the profile's link model (a Write Command costs its
/// air time, a Control Point write a request round trip, a notification reaches the host one connection interval
/// later) and jumps to whatever is due next: a notification, a wake-up of the device, or the engine's timer. A
/// dropped link or a reset ends the attempt with `.disconnected`.
struct LegacyLoop {
    var engine: LegacyDFUStateMachine
    var device: LegacyBootloader
    let link: LinkModel
    var now: Duration = .zero
    var result: Result<Void, LegacyDFUError>?
    var requests: [LegacyRequest] = []
    var packetWrites = 0
    var deviceWake: Duration?
    /// Notifications on their way to the host, with their arrival times.
    var inFlight: [(at: Duration, bytes: [UInt8])] = []
    /// The device reset (`06`, Activate) into this target.
    var rebootedInto: LegacyBootTarget?
    /// A lying device: rewrites each notification into any number of notifications.
    var lie: (([UInt8]) -> [[UInt8]])?

    init(part: LegacyPart, device: LegacyBootloader, configuration: LegacyDFUConfiguration = LegacyDFUConfiguration()) {
        engine = LegacyDFUStateMachine(part: part, configuration: configuration)
        self.device = device
        link = LinkModel(link: device.profile.link, flash: device.profile.flash)
    }

    func scaled(_ micros: Double) -> Duration {
        let speedup = device.profile.speedup
        guard speedup.isFinite, speedup > 0 else { return .zero }
        return .nanoseconds(Int64(micros * 1000 / speedup))
    }

    /// False when the device dropped the link.
    mutating func deliver(_ event: LegacyBootloaderEvent, cost: Duration) -> Bool {
        now += cost
        return collect(device.handle(event, at: now))
    }

    mutating func collect(_ actions: [LegacyBootloaderAction]) -> Bool {
        var linkLost = false
        let latency = scaled(max(link.link.connectionIntervalMs, 7.5) * 1000)
        for action in actions {
            switch action {
            case .notify(let bytes):
                for out in lie?(bytes) ?? [bytes] { inFlight.append((now + latency, out)) }
            case .attError: linkLost = true
            case .wake(let at): deviceWake = min(deviceWake ?? at, at)
            case .wait(let duration): now += duration
            case .disconnect: linkLost = true
            case .reboot(let target):
                rebootedInto = target
                linkLost = true
            case .fault: break
            }
        }
        return !linkLost
    }

    mutating func run() {
        _ = deliver(.connected, cost: .zero)
        var events: [LegacyDFUEvent] = [.started]
        var timer: (LegacyTimer, Duration)?
        var steps = 0
        while result == nil, steps < 1_000_000 {
            steps += 1
            let event: LegacyDFUEvent
            let nextNotification = inFlight.first?.at
            let candidates = [nextNotification, deviceWake, timer?.1].compactMap { $0 }
            if !events.isEmpty {
                event = events.removeFirst()
            } else if let first = candidates.min() {
                now = max(now, first)
                if first == nextNotification {
                    event = .notification(inFlight.removeFirst().bytes)
                } else if first == deviceWake {
                    deviceWake = nil
                    if !collect(device.handle(.tick, at: now)) { events = [.disconnected] }
                    continue
                } else if let pending = timer {
                    timer = nil
                    event = .timerFired(pending.0)
                } else {
                    break
                }
            } else {
                break
            }
            var linkLost = false
            for action in engine.handle(event) {
                // After a lost link only the engine's own verdict counts (Activate and Reset is acknowledged first).
                if linkLost, action != .completed, !action.isFailure { continue }
                switch action {
                case .writeControlPoint(let request):
                    requests.append(request)
                    linkLost = !deliver(.controlPointWrite(request.encoded, cccdEnabled: true), cost: scaled(link.requestRoundTripMicros))
                case .writePacket(let bytes):
                    packetWrites += 1
                    linkLost = !deliver(.packetWrite(bytes, withResponse: false), cost: scaled(link.writeCommandMicros(attBytes: 3 + bytes.count)))
                case .sendPackets(let burst):
                    let bytes = burst.source == .initPacket ? engine.part.initPacket : engine.part.image
                    for range in burst.packets where !linkLost {
                        packetWrites += 1
                        let cost = scaled(link.writeCommandMicros(attBytes: 3 + range.count))
                        linkLost = !deliver(.packetWrite(Array(bytes[range]), withResponse: false), cost: cost)
                    }
                    if !linkLost { events.append(.packetsSent) }
                case .startTimer(let t, let duration): timer = (t, now + duration)
                case .completed: result = .success(())
                case .failed(let error): result = .failure(error)
                case .progress: break
                }
            }
            if result != nil { break }
            if linkLost {
                _ = device.handle(.disconnected, at: now)
                inFlight = []
                events = [.disconnected]
            }
        }
    }

    var failure: LegacyDFUError? { if case .failure(let e) = result { e } else { nil } }
    var succeeded: Bool { if case .success = result { true } else { false } }
}

/// Runs attempts until the part is installed or an attempt fails for good, as the updater does: an attempt that ends
/// in a restart-from-zero failure starts again (on a fresh bootloader session after a reset, or on the same one
/// after a lost link: the jump from the application is not modelled here), with the pacing the attempt learned,
/// recorded in the journal and bounded by the restart policy.
struct LegacyAttempts {
    var device: LegacyBootloader
    var attempts: [LegacyLoop] = []
    var configuration: LegacyDFUConfiguration
    var journal = LegacyJournal()
    var policy = LegacyRestartPolicy()
    var lie: (([UInt8]) -> [[UInt8]])?
    /// The error the update ended with, nil on success.
    var outcome: LegacyDFUError?

    init(device: LegacyBootloader, configuration: LegacyDFUConfiguration = LegacyDFUConfiguration()) {
        self.device = device
        self.configuration = configuration
    }

    @discardableResult
    mutating func run(_ part: LegacyPart) -> LegacyLoop {
        var now: Duration = .zero
        var boot = true
        while true {
            if boot { device.boot(at: now) }
            var loop = LegacyLoop(part: part, device: device, configuration: configuration)
            loop.now = now
            loop.lie = lie
            loop.run()
            device = loop.device
            now = loop.now + .milliseconds(500)
            configuration.pacing = loop.engine.pacing
            attempts.append(loop)
            guard let failure = loop.failure else {
                journal.partInstalled(0)
                outcome = nil
                return loop
            }
            if failure.restartsFromZero { journal.recordRestart(part: 0, error: failure, bytesSent: loop.engine.sentOffset) }
            if let final = policy.verdict(journal, part: 0, after: failure) {
                outcome = final
                return loop
            }
            boot = loop.rebootedInto != nil
        }
    }
}

enum LegacyFixture {
    static let address = BluetoothAddress("D4:CA:6E:11:22:01")!

    /// Deterministic firmware bytes.
    static func firmware(_ count: Int, seed: UInt8 = 7) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed) &+ ($0 >> 8)) }
    }

    /// Instant flash and timers (speedup infinite).
    static func instant(_ profile: LegacyDeviceProfile) -> LegacyDeviceProfile {
        var profile = profile
        profile.speedup = .infinity
        return profile
    }

    /// An application part with an init packet of `layout` (nrfutil 0.5 defaults: device type and revision 0xFFFF,
    /// application version 0xFFFFFFFF, SoftDevice 0xFFFE).
    static func application(
        _ image: [UInt8], layout: LegacyInitPacket.Layout = .v05, deviceType: UInt16 = 0xFFFF,
        deviceRevision: UInt16 = 0xFFFF, softdeviceReq: [UInt16] = [0xFFFE]
    ) -> LegacyPart {
        let packet = LegacyInitPacket(
            layout: layout, deviceType: deviceType, deviceRevision: deviceRevision, applicationVersion: 2,
            softdeviceReq: softdeviceReq, image: image)
        return LegacyPart.application(image, initPacket: packet.encode(), layout: layout)
    }

    static func sha(_ bytes: [UInt8]) -> String { DFUSimulatorDigest.sha256Hex(bytes) }
}

extension LegacyDFUAction {
    var isFailure: Bool { if case .failed = self { true } else { false } }
}
