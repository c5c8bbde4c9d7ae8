import BLECore
import DFUPackage
import DFUProtocol
import DFUSimulator
import Foundation
import SecureDFU
import FuzzSupport

/// libFuzzer target for the Secure DFU engine (`SecureDFUStateMachine`) fed Control Point responses and
/// notifications (tools/fuzz SecureDFU).
///
/// The engine talks to the simulator's bootloader (`BootloaderStateMachine`), so inputs reach every phase of a
/// transfer; the input decides what happens to the device's notifications on their way back. First byte: pacing
/// policy and ATT_MTU (0xFF: an MTU below 23); second byte: the device's packet drop rate. Then one operation per
/// byte (low 3 bits):
///
///     0-3 deliver the next notification (none pending: the burst was written, else the timer fires)
///     4   the burst was written        5  the timer fires        6  the next notification is lost
///     7   next byte & 7: 0 link lost, 1 duplicate the next notification, 2 swap the next two, 3 inject L = next
///         byte & 0x1F raw bytes, 4 flip bits of one byte of the next notification, 5 cancel, 6 a stale timer,
///         7 device power loss
///
/// After a link loss or a failure the engine starts again on the same device (up to four connections), as a rerun
/// of `bledfu flash` would. Invariants: every packet range lies inside the init packet or image; the engine never
/// acts after it finished; and when every notification it saw came from the device (duplicated, reordered or lost,
/// never forged), a transfer the engine reports complete on a device response is complete on the device with the
/// right image.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSecureDFU(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 1, let profile = EngineFixture.profile else { return 0 }
    var script = EngineScript(bytes: Array(UnsafeBufferPointer(start: data, count: size)), profile: profile)
    script.run()
    return 0
}

enum EngineFixture {
    // Three data objects of at most 512 bytes (a small page keeps each run short).
    static let image: [UInt8] = (0..<1300).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ $0 >> 7) }
    static let imageSHA = DFUSimulatorDigest.sha256Hex(image)
    static let policies = ["adaptive", "prn:4", "checksum:3", "object", "nrfutil", "ios", "android", "with-response"]

    static let part: DFUPart = {
        let command = InitCommand(
            fwVersion: 2, hwVersion: 52, sdReq: [0xB7], type: .application, sdSize: 0, blSize: 0,
            appSize: UInt32(image.count),
            hash: ImageHash(type: .sha256, bytes: Array(DFUSimulatorDigest.sha256(image).reversed())), isDebug: false,
            bootValidation: [BootValidation(type: .crc)])
        return DFUPart(
            name: "application", initPacket: SecureInitPacket(command: command).encode(), image: image,
            firmwareVersion: 2)
    }()

    static let profile: DeviceProfile? = BluetoothAddress("C0:11:22:33:44:FF").map {
        DeviceProfile(
            name: "Fuzz", address: $0, link: LinkParameters(receiveBuffers: 64),
            flash: FlashParameters(pageSize: 512, queueDepth: 64, bankSize: 4096), speedup: .infinity)
    }
}

struct EngineScript {
    var input: ArraySlice<UInt8>
    var device: BootloaderStateMachine
    var engine: SecureDFUStateMachine
    let configuration: SecureDFUConfiguration
    let mtu: Int
    var pending: [[UInt8]] = []
    var burstOutstanding = false
    var timer: DFUTimer?
    var forged = false
    var connections = 1
    var now = Duration.zero

    init(bytes: [UInt8], profile: DeviceProfile) {
        let first = bytes[0]
        let policy = (try? PacingPolicies.parse(EngineFixture.policies[Int(first & 7)])) ?? AdaptivePacing()
        mtu = first == 0xFF ? 20 : 23 + Int(first >> 3) * 8
        let dropRate = Double(bytes[1] & 0x0F) / 64
        configuration = SecureDFUConfiguration(pacing: policy, maxAttempts: 3)
        device = BootloaderStateMachine(
            profile: profile, faults: FaultPlan(seed: UInt64(bytes[1]), dropRate: dropRate))
        device.connected()
        engine = SecureDFUStateMachine(part: EngineFixture.part, configuration: configuration)
        input = bytes.dropFirst(2)
    }

    mutating func byte() -> UInt8 { input.popFirst() ?? 0 }

    mutating func run() {
        perform(engine.handle(.started(mtu: mtu)), byNotification: false)
        while let op = input.popFirst() {
            if engine.isFinished {
                guard connections < 4 else { return }
                reconnect()
                continue
            }
            now += .milliseconds(1)
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
        case 0: linkLost()
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
        case 6: perform(engine.handle(.timerFired(DFUTimer(id: Int(byte())))), byNotification: false)
        default:
            _ = device.handle(.powerLoss, at: now)
            pending = []
            perform(engine.handle(.disconnected), byNotification: false)
        }
    }

    mutating func notify(_ bytes: [UInt8]) {
        perform(engine.handle(.controlPointNotification(bytes)), byNotification: true)
    }

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

    mutating func reconnect() {
        connections += 1
        pending = []
        burstOutstanding = false
        timer = nil
        device.connected()
        engine = SecureDFUStateMachine(part: EngineFixture.part, configuration: configuration)
        perform(engine.handle(.started(mtu: mtu)), byNotification: false)
    }

    /// Carries out engine actions against the device; a refused write or a dropped link ends the connection.
    mutating func perform(_ actions: [DFUAction], byNotification: Bool) {
        var lost = false
        for action in actions where !lost {
            switch action {
            case .writeControlPoint(let request):
                lost = !deliver(.controlPointWrite(request.encoded, cccdEnabled: true))
            case .sendPackets(let burst):
                let source = burst.source == .initPacket ? EngineFixture.part.initPacket : EngineFixture.part.image
                for range in burst.packets where !lost {
                    precondition(
                        range.lowerBound >= 0 && range.upperBound <= source.count && !range.isEmpty,
                        "packet \(range) outside the \(burst.source) of \(source.count) bytes")
                    precondition(range.count <= max(20, mtu - 3), "packet of \(range.count) bytes for MTU \(mtu)")
                    lost = !deliver(.packetWrite(Array(source[range]), withResponse: false))
                }
                burstOutstanding = !lost
            case .startTimer(let next, _): timer = next
            case .completed:
                if byNotification, !forged {
                    precondition(
                        device.counters.updatesCompleted >= 1
                            && device.installed.application?.sha256 == EngineFixture.imageSHA,
                        "engine reports success on a device response, but the device has no valid image")
                }
            case .failed, .progress, .objectExecuted: break
            }
        }
        if lost { linkLost() }
        precondition(actions.isEmpty || !actions.dropLast().contains { if case .failed = $0 { true } else { false } },
            "actions after a failure: \(actions)")
    }

    /// Hands an event to the device; false when the link is gone.
    mutating func deliver(_ event: BootloaderEvent) -> Bool {
        for action in device.handle(event, at: now) {
            switch action {
            case .notify(let bytes): pending.append(bytes)
            case .attError, .disconnect, .reboot, .resetAfterFlash: return false
            case .flash, .wait, .fault: break
            }
        }
        return true
    }
}

#if FUZZING
/// SwiftPM links executables with `main` aliased to `<Target>_main`: hand over to libFuzzer.
@_cdecl("FuzzSecureDFU_main")
public func fuzzSecureDFUMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzDriver.run(argc, argv, fuzzSecureDFU)
}
#else
/// An ordinary build replays the files given as arguments (crash reproducers).
@main enum FuzzSecureDFUMain { static func main() { FuzzDriver.replay(fuzzSecureDFU) } }
#endif
