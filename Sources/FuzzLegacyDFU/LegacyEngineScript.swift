import BLECore
import DFUSimulator
import LegacyDFU

/// The virtual device of one script: a Legacy bootloader or InfiniTime's service.
enum FuzzDevice {
    case bootloader(LegacyBootloader)
    case watch(InfiniTimeDFU)

    mutating func handle(_ event: LegacyBootloaderEvent, at now: Duration) -> [LegacyBootloaderAction] {
        switch self {
        case .bootloader(var machine):
            let actions = machine.handle(event, at: now)
            self = .bootloader(machine)
            return actions
        case .watch(var machine):
            let actions = machine.handle(event, at: now)
            self = .watch(machine)
            return actions
        }
    }

    mutating func boot(at now: Duration) {
        if case .bootloader(var machine) = self {
            machine.boot(at: now)
            self = .bootloader(machine)
        }
    }

    var installedApplication: String? {
        switch self {
        case .bootloader(let machine): machine.installed.application?.sha256
        case .watch(let machine): machine.installed.application?.sha256
        }
    }
}

struct LegacyEngineScript {
    var input: ArraySlice<UInt8>
    var device: FuzzDevice
    var engine: LegacyDFUStateMachine
    var configuration: LegacyDFUConfiguration
    let part: LegacyPart
    var pending: [[UInt8]] = []
    var burstOutstanding = false
    var timer: LegacyTimer?
    var forged = false
    /// The link loss being handled was the script's, not the device's reset (a completion then proves nothing).
    var scriptedLoss = false
    var attempts = 1
    var rebooted = false
    var now = Duration.zero

    init(bytes: [UInt8]) {
        let first = bytes[0]
        let profiles = LegacyEngineFixture.profiles
        let profile = profiles[Int(first >> 3 & 7) % profiles.count]
        let pacing = (try? LegacyPacingPolicies.parse(LegacyEngineFixture.policies[Int(first & 7)])) ?? LegacyAdaptivePacing()
        configuration = LegacyDFUConfiguration(pacing: pacing, responseTimeout: .seconds(10))
        var mode: LegacyDeviceMode = .bootloader(version: profile.dfuVersion.map { LegacyDFUVersion(rawValue: $0) })
        if profile.kind == .infinitime { mode = .applicationService(version: .sdk11) }
        LegacyDetection.configure(&configuration, for: mode)
        part = profile.kind == .sdk6 ? LegacyEngineFixture.crcOnlyPart : LegacyEngineFixture.part
        let faults = FaultPlan(seed: UInt64(bytes[1]), dropRate: Double(bytes[1] & 0x0F) / 64)
        if profile.kind == .infinitime {
            device = .watch(InfiniTimeDFU(profile: profile))
        } else {
            var bootloader = LegacyBootloader(profile: profile, faults: faults)
            bootloader.boot(at: .zero)
            device = .bootloader(bootloader)
        }
        _ = device.handle(.connected, at: .zero)
        engine = LegacyDFUStateMachine(part: part, configuration: configuration)
        input = bytes.dropFirst(2)
    }

    mutating func byte() -> UInt8 { input.popFirst() ?? 0 }

    mutating func run() {
        perform(engine.handle(.started), byNotification: false)
        while let op = input.popFirst() {
            if engine.isFinished {
                guard attempts < 4 else { return }
                restart()
                continue
            }
            now += .milliseconds(1)
            _ = collect(device.handle(.tick, at: now))
            switch op & 7 {
            case 0, 1, 2, 3:
                if !pending.isEmpty {
                    notify(pending.removeFirst())
                } else if burstOutstanding {
                    written()
                } else if let timer {
                    perform(engine.handle(.timerFired(timer)), byNotification: false)
                }
            case 4: if burstOutstanding { written() }
            case 5: if let timer { perform(engine.handle(.timerFired(timer)), byNotification: false) }
            case 6: if !pending.isEmpty { pending.removeFirst() }
            default: special(byte() & 7)
            }
        }
    }

    mutating func special(_ kind: UInt8) {
        switch kind {
        case 0:
            scriptedLoss = true
            linkLost()
            scriptedLoss = false
        case 1: if let first = pending.first { pending.insert(first, at: 0) }
        case 2: if pending.count >= 2 { pending.swapAt(0, 1) }
        case 3:
            let length = Int(byte() & 0x1F)
            forged = true
            notify(Array(input.prefix(length)))
            input = input.dropFirst(length)
        case 4:
            let position = Int(byte())
            let mask = byte() | 1
            if !pending.isEmpty, !pending[0].isEmpty {
                forged = true
                pending[0][position % pending[0].count] ^= mask
            }
        case 5: perform(engine.handle(.cancelled), byNotification: false)
        case 6: perform(engine.handle(.timerFired(LegacyTimer(id: Int(byte())))), byNotification: false)
        default:
            rebooted = true
            _ = device.handle(.powerLoss, at: now)
            pending = []
            perform(engine.handle(.disconnected), byNotification: false)
        }
    }

    mutating func notify(_ bytes: [UInt8]) { perform(engine.handle(.notification(bytes)), byNotification: true) }

    mutating func written() {
        burstOutstanding = false
        perform(engine.handle(.packetsSent), byNotification: false)
    }

    mutating func linkLost() {
        _ = device.handle(.disconnected, at: now)
        pending = []
        burstOutstanding = false
        perform(engine.handle(.disconnected), byNotification: false)
    }

    /// A new attempt: a fresh bootloader session after a reset, the same one after a lost link.
    mutating func restart() {
        attempts += 1
        pending = []
        burstOutstanding = false
        timer = nil
        configuration.pacing = engine.pacing
        if rebooted { device.boot(at: now) }
        rebooted = false
        _ = device.handle(.connected, at: now)
        engine = LegacyDFUStateMachine(part: part, configuration: configuration)
        perform(engine.handle(.started), byNotification: false)
    }

    /// Carries out engine actions against the device; a refused write, a reset or a dropped link ends the connection.
    /// (`byNotification`: the actions answer a device notification, for traces.)
    mutating func perform(_ actions: [LegacyDFUAction], byNotification: Bool) {
        var lost = false
        for (index, action) in actions.enumerated() {
            if case .failed = action { precondition(index == actions.count - 1, "actions after a failure: \(actions)") }
            if lost, action != .completed { continue }
            switch action {
            case .writeControlPoint(let request):
                lost = !deliver(.controlPointWrite(request.encoded, cccdEnabled: true))
            case .writePacket(let bytes):
                precondition(bytes.count <= 20, "a packet of \(bytes.count) bytes")
                lost = !deliver(.packetWrite(bytes, withResponse: false))
            case .sendPackets(let burst):
                let source = burst.source == .initPacket ? part.initPacket : part.image
                for range in burst.packets where !lost {
                    precondition(
                        range.lowerBound >= 0 && range.upperBound <= source.count && !range.isEmpty && range.count <= 20,
                        "packet \(range) outside the \(burst.source) of \(source.count) bytes")
                    lost = !deliver(.packetWrite(Array(source[range]), withResponse: false))
                }
                burstOutstanding = !lost
            case .startTimer(let next, _): timer = next
            case .completed:
                // Activate and Reset is acknowledged, then the device's own reset drops the link: the image must be in.
                if !forged, !scriptedLoss {
                    precondition(
                        device.installedApplication == LegacyEngineFixture.imageSHA,
                        "the engine reports the image activated, but the device did not install it")
                }
            case .failed, .progress: break
            }
        }
        if lost, !engine.isFinished { linkLost() }
    }

    /// Hands an event to the device; false when the link is gone.
    mutating func deliver(_ event: LegacyBootloaderEvent) -> Bool { collect(device.handle(event, at: now)) }

    mutating func collect(_ actions: [LegacyBootloaderAction]) -> Bool {
        var up = true
        for action in actions {
            switch action {
            case .notify(let bytes): pending.append(bytes)
            case .attError, .disconnect: up = false
            case .reboot:
                rebooted = true
                up = false
            case .wait(let duration): now += duration
            case .wake, .fault: break
            }
        }
        return up
    }
}
