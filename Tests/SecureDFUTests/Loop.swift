import BLECore
import DFUProtocol
import TestDoubles

@testable import SecureDFU

/// Runs a state machine against a fake bootloader in-process, as the driver would: actions in order, packets
/// written before notifications are delivered, and the latest timer fired when nothing else is left to happen.
struct Loop {
    var machine: SecureDFUStateMachine
    var device: FakeBootloader
    var log: [DFUAction] = []
    var result: Result<Void, DFUEngineError>?
    var timersFired = 0
    /// The durations of the timers that fired (the time the engine waited).
    var waited: Duration = .zero
    /// Disconnect after this many data packets (once).
    var disconnectAfterPackets: Int?

    init(
        part: DFUPart, configuration: SecureDFUConfiguration = SecureDFUConfiguration(),
        device: FakeBootloader = FakeBootloader()
    ) {
        machine = SecureDFUStateMachine(part: part, configuration: configuration)
        self.device = device
    }

    mutating func run(mtu: Int = 247, maxSteps: Int = 100_000) {
        var events: [DFUEvent] = [.started(mtu: mtu)]
        var timer: (DFUTimer, Duration)?
        var steps = 0
        while result == nil, steps < maxSteps {
            steps += 1
            let event: DFUEvent
            if !events.isEmpty {
                event = events.removeFirst()
            } else if let (pending, duration) = timer {
                timer = nil
                timersFired += 1
                waited += duration
                event = .timerFired(pending)
            } else {
                break
            }
            var notifications: [[UInt8]] = []
            for action in machine.handle(event) {
                log.append(action)
                switch action {
                case .writeControlPoint(let request):
                    if request == .abort { device.reset = true }
                    notifications += device.controlPoint(request.encoded)
                case .sendPackets(let burst):
                    let bytes = burst.source == .initPacket ? machine.part.initPacket : machine.part.image
                    var lost = false
                    for range in burst.packets {
                        if let limit = disconnectAfterPackets, burst.source == .firmware, device.packetIndex >= limit {
                            lost = true
                            break
                        }
                        notifications += device.packet(Array(bytes[range]))
                    }
                    if lost {
                        disconnectAfterPackets = nil
                        events.append(.disconnected)
                    } else {
                        events.append(.packetsSent)
                    }
                case .startTimer(let t, let duration): timer = (t, duration)
                case .completed: result = .success(())
                case .failed(let error): result = .failure(error)
                case .progress, .objectExecuted: break
                }
            }
            events += notifications.map { .controlPointNotification($0) }
        }
    }

    var requests: [ControlPointRequest] { log.compactMap { if case .writeControlPoint(let r) = $0 { r } else { nil } } }
    var failure: DFUEngineError? { if case .failure(let e) = result { e } else { nil } }
    var succeeded: Bool { if case .success = result { true } else { false } }
}

/// Deterministic test bytes.
func testBytes(_ count: Int, seed: UInt32 = 1) -> [UInt8] {
    var x = seed &* 2_654_435_761 | 1
    return (0..<count).map { _ in
        x ^= x << 13
        x ^= x >> 17
        x ^= x << 5
        return UInt8(truncatingIfNeeded: x)
    }
}

func testPart(imageSize: Int = 10_000, initSize: Int = 141) -> DFUPart {
    DFUPart(
        name: "application", initPacket: testBytes(initSize, seed: 7), image: testBytes(imageSize, seed: 3),
        firmwareVersion: 2)
}

extension Loop: CustomStringConvertible {
    var description: String { "Loop(\(machine.part.name), result \(String(describing: result)), \(log.count) actions)" }
}

/// Keeps the journals a driver hands to its checkpoint, by device and package (as the updater's store would).
actor JournalRecorder {
    private var journals: [String: DFUJournal] = [:]

    private static func key(_ address: String, _ sha: String) -> String { address.uppercased() + "|" + sha.lowercased() }

    func record(_ journal: DFUJournal) { journals[Self.key(journal.deviceAddress, journal.packageSHA256)] = journal }

    func load(deviceAddress: String, packageSHA256: String) -> DFUJournal? {
        journals[Self.key(deviceAddress, packageSHA256)]
    }

    /// The driver's checkpoint.
    nonisolated var checkpoint: @Sendable (DFUJournal) async -> Void { { journal in await self.record(journal) } }
}
