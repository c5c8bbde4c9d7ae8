import BLECore
import DFUPackage
import DFUSimulator
import LegacyDFU
import Testing

/// The engine against the simulator's pure `LegacyBootloader`, in-process: engine actions become bootloader events,
/// bootloader notifications become engine events, and device time jumps to whatever is due next (a wake-up of the
/// device, or the engine's timer). A dropped link or a reset ends the attempt with `.disconnected`.
struct LegacyLoop {
    var engine: LegacyDFUStateMachine
    var device: LegacyBootloader
    var now: Duration = .zero
    var result: Result<Void, LegacyDFUError>?
    var requests: [LegacyRequest] = []
    var packetWrites = 0
    var deviceWake: Duration?
    /// The device reset (`06`, Activate) into this target.
    var rebootedInto: LegacyBootTarget?

    init(part: LegacyPart, device: LegacyBootloader, configuration: LegacyDFUConfiguration = LegacyDFUConfiguration()) {
        engine = LegacyDFUStateMachine(part: part, configuration: configuration)
        self.device = device
    }

    /// Notifications, or nil when the device dropped the link.
    mutating func deliver(_ event: LegacyBootloaderEvent) -> [[UInt8]]? {
        now += .microseconds(100)
        return collect(device.handle(event, at: now))
    }

    mutating func collect(_ actions: [LegacyBootloaderAction]) -> [[UInt8]]? {
        var out: [[UInt8]] = []
        var linkLost = false
        for action in actions {
            switch action {
            case .notify(let bytes): out.append(bytes)
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
        return linkLost ? nil : out
    }

    mutating func run() {
        _ = deliver(.connected)
        var events: [LegacyDFUEvent] = [.started]
        var timer: (LegacyTimer, Duration)?
        var steps = 0
        while result == nil, steps < 1_000_000 {
            steps += 1
            let event: LegacyDFUEvent
            if !events.isEmpty {
                event = events.removeFirst()
            } else if let wake = deviceWake, timer.map({ wake <= $0.1 }) ?? true {
                deviceWake = nil
                now = max(now, wake)
                guard let out = collect(device.handle(.tick, at: now)) else {
                    events = [.disconnected]
                    continue
                }
                events += out.map { .notification($0) }
                continue
            } else if let (pending, at) = timer {
                timer = nil
                now = max(now, at)
                event = .timerFired(pending)
            } else {
                break
            }
            var notifications: [[UInt8]] = []
            var linkLost = false
            for action in engine.handle(event) {
                if linkLost, action != .completed { continue }
                switch action {
                case .writeControlPoint(let request):
                    requests.append(request)
                    if let out = deliver(.controlPointWrite(request.encoded, cccdEnabled: true)) {
                        notifications += out
                    } else {
                        // The SDK authorizes the write before acting: Activate and Reset still counts as acknowledged.
                        linkLost = true
                    }
                case .writePacket(let bytes):
                    packetWrites += 1
                    if let out = deliver(.packetWrite(bytes, withResponse: false)) { notifications += out } else { linkLost = true }
                case .sendPackets(let burst):
                    let bytes = burst.source == .initPacket ? engine.part.initPacket : engine.part.image
                    for range in burst.packets where !linkLost {
                        packetWrites += 1
                        if let out = deliver(.packetWrite(Array(bytes[range]), withResponse: false)) {
                            notifications += out
                        } else {
                            linkLost = true
                        }
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
                events = [.disconnected]
                continue
            }
            events += notifications.map { .notification($0) }
        }
    }

    var failure: LegacyDFUError? { if case .failure(let e) = result { e } else { nil } }
    var succeeded: Bool { if case .success = result { true } else { false } }
}

/// Runs attempts until the part is installed or an attempt fails for good, as the updater does: every attempt that
/// ends in a restart-from-zero failure starts again on a fresh bootloader session (after the reset, or after a jump
/// from the application), with the pacing the attempt learned.
struct LegacyAttempts {
    var device: LegacyBootloader
    var attempts: [LegacyLoop] = []
    var configuration: LegacyDFUConfiguration

    init(device: LegacyBootloader, configuration: LegacyDFUConfiguration = LegacyDFUConfiguration()) {
        self.device = device
        self.configuration = configuration
    }

    mutating func run(_ part: LegacyPart, maximum: Int = 6) -> LegacyLoop {
        var now: Duration = .zero
        while true {
            device.boot(at: now)
            var loop = LegacyLoop(part: part, device: device, configuration: configuration)
            loop.now = now
            loop.run()
            device = loop.device
            now = loop.now
            configuration.pacing = loop.engine.pacing
            attempts.append(loop)
            guard let failure = loop.failure, failure.restartsFromZero, attempts.count < maximum else { return loop }
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
