import BLECore
import DFUSimulator

/// The campaign's deterministic generator (one seed gives the same runs on every machine).
typealias CampaignRandom = SplitMix64

/// The kinds of fault a run may get. `kill` is done by the campaign: the run goes through real processes (a `bledfu
/// simulate` child hosts the device, a `bledfu flash` child is sent SIGKILL, then `bledfu resume` reruns it,
/// ``ProcessKillRun``); the others are the virtual device's `FaultPlan`.
enum CampaignFault: String, CaseIterable, Comparable {
    case disconnectAtBytes = "disconnect-after-bytes"
    case disconnectAtStep = "disconnect-at-step"
    case disconnectRate = "disconnect-rate"
    case kill
    case powerLoss = "power-loss"
    case drop = "silent-drops"
    case stall
    case corruptFlash = "corrupt-flash"
    case reject = "rejected-operation"
    /// The flash queue fills before a Create Data (issue 18 point 1: SDK 15-17 refuse it with 0x05) or after a
    /// checksum (writes dropped until it drained). Drawn by default; `--no-flash-faults` gives the older draws.
    case flashBusy = "flash-busy"

    static func < (a: CampaignFault, b: CampaignFault) -> Bool { a.rawValue < b.rawValue }

    /// The kinds a campaign draws from.
    static func pool(flashFaults: Bool) -> [CampaignFault] {
        flashFaults ? allCases : allCases.filter { $0 != .flashBusy }
    }

    /// Faults that only drop the link (for the bytes-resent-per-disconnect figure). Power loss is not one: it also
    /// loses queued flash writes.
    var interruptsOnly: Bool { [.disconnectAtBytes, .disconnectAtStep, .kill].contains(self) }
}

/// Everything random about one upload.
struct RunPlan: CustomStringConvertible {
    var index: Int
    var seed: UInt64
    var imageSize: Int
    var mtu: UInt16
    var saveProgress: Bool
    /// The device runs an old application (dual bank, unbonded buttonless) and the run reconnects after a lost
    /// link: a power loss brings that application back at the device's own address, where the reconnect must look
    /// (issue 18 point 1). Drawn for half the runs with a power loss, from a generator of its own (the other draws
    /// stay as they were).
    var oldApplication = false
    var pacing: String
    var faults: FaultPlan
    var kinds: [CampaignFault]
    /// SIGKILL the `bledfu` process once the device has received this many Packet bytes (counted over the device's
    /// life, each fires once): a seeded number of packets of the run's MTU.
    var killsAfterBytes: [Int]
    var items: [String]

    static let steps = [
        "select-command", "create-command", "execute-command", "set-prn", "select-data", "create-data", "checksum",
        "execute-data", "final-execute",
    ]
    /// Result codes a bootloader may answer (nrf_dfu_req_handler.c): invalid parameter, insufficient resources,
    /// invalid object, unsupported type, operation not permitted, operation failed, extended (with its code).
    static let rejections = ["03", "04", "05", "07", "08", "0A", "0B:07", "0B:08", "0B:0C"]

    /// `killShare`: the chance that a run which drew no kill gets one anyway (from a generator of its own, so the
    /// other draws, and the runs that get none, stay the same as without it).
    init(index: Int, campaignSeed: UInt64, killShare: Double = 0, flashFaults: Bool = true) {
        self.index = index
        var random = CampaignRandom(seed: campaignSeed &* 0x1000_0001 &+ UInt64(index))
        seed = random.next()
        imageSize = 2_000 + random.below(18_000)
        mtu = random.pick([23, 64, 185, 247])
        saveProgress = random.chance(0.5)
        var kinds: [CampaignFault] = []
        for _ in 0..<(1 + random.below(3)) {
            let kind = random.pick(CampaignFault.pool(flashFaults: flashFaults))
            if !kinds.contains(kind) { kinds.append(kind) }
        }
        var extra = CampaignRandom(seed: (campaignSeed &* 0x1000_0001 &+ UInt64(index)) ^ 0x6B69_6C6C)
        let forcedKill = !kinds.contains(.kill) && killShare > 0 && extra.chance(killShare)
        // PRN policies wait for receipts without asking; with silent drops every lost receipt costs a timeout.
        let lossy = kinds.contains(.drop) || kinds.contains(.stall)
        pacing = lossy ? random.pick(["adaptive", "checksum:8", "object"]) : random.pick(["adaptive", "prn:12", "object", "checksum:16", "nrfutil"])
        var items = ["seed=\(seed)"]
        var kills: [Int] = []
        let total = imageSize + 150
        let packetSize = Int(mtu) - 3
        for kind in kinds {
            switch kind {
            case .disconnectAtBytes: items.append("disconnect-after-bytes=\(1 + random.below(total))")
            case .disconnectAtStep:
                items.append("disconnect-at=\(random.pick(["before-", "after-"]))\(random.pick(Self.steps))#\(1 + random.below(2))")
            case .disconnectRate: items.append("disconnect-rate=0.00\(1 + random.below(3))")
            case .kill:
                kills.append(1 + random.below(max(1, total / packetSize)))
                if random.chance(0.3) { kills.append(kills[0] + 1 + random.below(40)) }
                kills = kills.map { $0 * packetSize }
            case .powerLoss:
                if random.chance(0.5) {
                    items.append("power-loss-after-bytes=\(1 + random.below(total))")
                } else {
                    items.append("power-loss-at=\(random.pick(["before-", "after-"]))\(random.pick(Self.steps))")
                }
            case .drop: items.append("drop-rate=0.0\(1 + random.below(4))")
            case .stall: items.append("stall-at=\(random.pick(Self.steps))#\(1 + random.below(2))")
            case .corruptFlash: items.append("corrupt-flash-at=\(random.below(imageSize))")
            case .reject:
                let step = random.pick(Self.steps.filter { $0 != "set-prn" })
                items.append("reject-at=\(step):\(random.pick(Self.rejections))")
            case .flashBusy:
                items.append("flash-busy-at=\(random.pick(["before-create-data", "after-checksum"]))#\(1 + random.below(3))")
            }
        }
        if forcedKill {
            kinds.append(.kill)
            kills = [packetSize * (1 + extra.below(max(1, total / packetSize)))]
            if extra.chance(0.3) { kills.append(kills[0] + packetSize * (1 + extra.below(40))) }
        }
        var application = CampaignRandom(seed: (campaignSeed &* 0x1000_0001 &+ UInt64(index)) ^ 0x6170_706C)
        oldApplication = kinds.contains(.powerLoss) && application.chance(0.5)
        killsAfterBytes = kills.sorted()
        self.items = items
        self.kinds = kinds.sorted()
        faults = (try? FaultPlan(parsing: items)) ?? FaultPlan(seed: seed)
    }

    var description: String {
        let kills = killsAfterBytes.isEmpty ? "" : " kill-after-bytes=\(killsAfterBytes.map(String.init).joined(separator: "/"))"
        return "run \(index): \(imageSize) B, MTU \(mtu), \(pacing), save_progress=\(saveProgress), "
            + (oldApplication ? "old application, " : "") + items.joined(separator: ",") + kills
    }
}
