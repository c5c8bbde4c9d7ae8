import ATT
import BLECore
import DFUSimulator
import LegacyDFU

/// Drives a `LegacyBootloader` like a central over one connection, with the Control Point's notifications on:
/// each write returns what the device notified, after delivering every wake-up that is due by then.
struct LegacyConversation {
    var device: LegacyBootloader
    var now: Duration = .zero
    var wake: Duration?
    /// The last reset (`reboot`) action, or the link drop.
    var rebooted: LegacyBootTarget?
    var disconnected = false
    var attErrors: [UInt8] = []
    var waited: Duration = .zero

    init(_ profile: LegacyDeviceProfile, faults: FaultPlan = .none) {
        device = LegacyBootloader(profile: profile, faults: faults)
        device.boot(at: .zero)
        _ = device.handle(.connected, at: .zero)
    }

    mutating func collect(_ actions: [LegacyBootloaderAction]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        for action in actions {
            switch action {
            case .notify(let bytes): out.append(bytes)
            case .attError(let code): attErrors.append(code.rawValue)
            case .wake(let at): wake = min(wake ?? at, at)
            case .wait(let duration):
                waited += duration
                now += duration
            case .disconnect: disconnected = true
            case .reboot(let target): rebooted = target
            case .fault: break
            }
        }
        return out
    }

    /// Wake-ups due by `now`.
    mutating func settle() -> [[UInt8]] {
        var out: [[UInt8]] = []
        while let due = wake, due <= now {
            wake = nil
            out += collect(device.handle(.tick, at: now))
        }
        return out
    }

    mutating func cp(_ bytes: [UInt8], cccd: Bool = true) -> [[UInt8]] {
        collect(device.handle(.controlPointWrite(bytes, cccdEnabled: cccd), at: now)) + settle()
    }

    mutating func packet(_ bytes: [UInt8], withResponse: Bool = false) -> [[UInt8]] {
        collect(device.handle(.packetWrite(bytes, withResponse: withResponse), at: now)) + settle()
    }

    /// Lets device time pass (to a wake-up or by `duration`).
    mutating func advance(_ duration: Duration) -> [[UInt8]] {
        now += duration
        return settle()
    }

    /// Writes `bytes` in 20-byte Packet writes; returns every notification.
    mutating func send(_ bytes: [UInt8], chunk: Int = 20) -> [[UInt8]] {
        stride(from: 0, to: bytes.count, by: chunk).flatMap { packet(Array(bytes[$0..<min($0 + chunk, bytes.count)])) }
    }

    /// Start (application of `size` bytes), the init packet, `02 01`: returns the init answer.
    mutating func prepare(size: Int, initPacket: [UInt8], type: UInt8 = 0x04) -> [[UInt8]] {
        _ = cp([0x01, type])
        let sizes = LegacyStartSizes(application: UInt32(size)).encoded
        let start = packet(sizes)
        guard start == [[0x10, 0x01, 0x01]] else { return start }
        _ = cp([0x02, 0x00])
        _ = send(initPacket)
        return cp([0x02, 0x01])
    }
}

/// `10 <op> <status>`.
func answer(_ op: UInt8, _ status: UInt8) -> [UInt8] { [0x10, op, status] }
