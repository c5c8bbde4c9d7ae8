import ATT
import BLECore
import DFUPackage
import DFUProtocol
import DFUSimulator
import Foundation
import Testing

@Suite("Disconnects, resume and faults", .timeLimit(.minutes(5)))
struct ResumeAndFaultTests {
    let image = Fixture.firmware(10_000)

    func started(_ profile: DeviceProfile, faults: FaultPlan = .none) -> Conversation {
        var c = Conversation(profile, faults: faults)
        #expect(c.sendInit(Fixture.initPacket(Fixture.command(for: image))) == [0x60, 0x04, 0x01])
        _ = c.ask([0x06, 0x02])
        _ = c.sendData(Array(image.prefix(4096)))
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        _ = c.send(Array(image[4096..<5000]))
        return c
    }

    @Test("SDK 17 without save_progress: a disconnect loses data progress but keeps the executed init command")
    func disconnectWithoutSaveProgress() {
        var c = started(Fixture.profile(saveProgress: false, sdk: "17.1.0"))
        _ = c.machine.handle(.disconnected, at: .zero)
        // 60 06 01 | max 4096 | offset 0 | crc 0
        #expect(c.ask([0x06, 0x02]) == [ControlPointResponse.select(maxSize: 4096, offset: 0, crc: 0).encoded])
        let dat = Fixture.initPacket(Fixture.command(for: image))
        let command = ControlPointResponse.select(maxSize: 512, offset: UInt32(dat.count), crc: CRC32.checksum(dat))
        #expect(c.ask([0x06, 0x01]) == [command.encoded])
        #expect(c.machine.initValid)
        // Data can start again without resending the init packet.
        #expect(c.ask([0x01, 0x02, 0x00, 0x10, 0, 0]) == [[0x60, 0x01, 0x01]])
    }

    @Test("SDK 17 with save_progress: the executed objects survive a disconnect, the partial one does not")
    func disconnectWithSaveProgress() {
        var c = started(Fixture.profile(saveProgress: true, sdk: "17.1.0"))
        #expect(c.ask([0x03]) == [checksumBytes(5000, CRC32.checksum(image.prefix(5000)))])
        _ = c.machine.handle(.disconnected, at: .zero)
        let select = ControlPointResponse.select(maxSize: 4096, offset: 4096, crc: CRC32.checksum(image.prefix(4096)))
        #expect(c.ask([0x06, 0x02]) == [select.encoded])
        let rest = c.sendData(image, from: 4096)
        #expect(rest.last == [0x60, 0x04, 0x01])
        #expect(c.machine.installed.application?.version == 2)
    }

    @Test("SDK 17: an init command that was never executed is lost on disconnect")
    func unexecutedInitLost() {
        var c = Conversation(Fixture.profile(sdk: "17.1.0"))
        let dat = Fixture.initPacket(Fixture.command(for: image))
        _ = c.ask([0x01, 0x01, UInt8(dat.count), 0, 0, 0])
        _ = c.send(dat)
        _ = c.machine.handle(.disconnected, at: .zero)
        #expect(c.ask([0x06, 0x01]) == [ControlPointResponse.select(maxSize: 512, offset: 0, crc: 0).encoded])
    }

    @Test("Fault plan strings parse, round-trip through JSON, and reject nonsense")
    func faultPlanParsing() throws {
        let plan = try FaultPlan(
            parsing:
                "seed=42,disconnect-after-bytes=8192,drop-rate=0.01,stall-at=execute,reject-at=execute-command:0B:05,"
                + "disconnect-at=after-create-data#2,power-loss-at=before-execute,slow-flash=4,corrupt-flash-at=0x1000")
        #expect(plan.seed == 42)
        #expect(plan.dropRate == 0.01)
        #expect(plan.slowFlash == 4)
        #expect(plan.corruptFlashAt == [4096])
        #expect(plan.triggers.count == 5)
        #expect(plan.triggers[0] == FaultTrigger(action: .disconnect, afterBytes: 8192))
        #expect(
            plan.triggers[2] == FaultTrigger(action: .reject, step: "execute-command", result: 0x0B, extended: 0x05))
        let json = try JSONEncoder().encode(plan)
        #expect(try JSONDecoder().decode(FaultPlan.self, from: json) == plan)
        #expect(throws: FaultPlanError.self) { try FaultPlan(parsing: "stall-at=lunch") }
        #expect(throws: FaultPlanError.self) { try FaultPlan(parsing: "drop-rate=2") }
        #expect(throws: FaultPlanError.self) { try FaultPlan(parsing: "explode=1") }
    }

    @Test("disconnect-after-bytes fires once, after that packet, and is logged")
    func disconnectAfterBytes() throws {
        var c = Conversation(Fixture.profile(), faults: try FaultPlan(parsing: "disconnect-after-bytes=500"))
        _ = c.sendInit(Fixture.initPacket(Fixture.command(for: image)))
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        let dat = Fixture.initPacket(Fixture.command(for: image)).count
        var disconnects = 0
        for index in stride(from: 0, to: 4096, by: 244) {
            let actions = c.packet(Array(image[index..<min(index + 244, 4096)]))
            disconnects += actions.filter { $0 == .disconnect }.count
        }
        #expect(disconnects == 1)
        #expect(c.machine.faultLog.count == 1)
        #expect(c.machine.faultLog[0].kind == "disconnect")
        #expect(c.machine.faultLog[0].bytesReceived >= 500)
        #expect(c.machine.faultLog[0].bytesReceived < UInt64(dat + 500 + 244))
    }

    @Test("disconnect-at=after-create-data answers the Create, then drops the link")
    func disconnectAfterCreate() throws {
        var c = Conversation(Fixture.profile(), faults: try FaultPlan(parsing: "disconnect-at=after-create-data"))
        _ = c.sendInit(Fixture.initPacket(Fixture.command(for: image)))
        let actions = c.cp([0x01, 0x02, 0x00, 0x10, 0, 0])
        #expect(Conversation.notifications(actions) == [[0x60, 0x01, 0x01]])
        #expect(actions.last == .disconnect)
        #expect(c.machine.faultLog.map(\.trigger) == ["after-create-data"])
    }

    @Test("stall-at=execute: the Execute and everything after it go unanswered until the link drops")
    func stall() throws {
        var c = Conversation(Fixture.profile(), faults: try FaultPlan(parsing: "stall-at=execute"))
        _ = c.ask([0x01, 0x01, 10, 0, 0, 0])
        #expect(c.ask([0x04]).isEmpty)
        #expect(c.ask([0x06, 0x01]).isEmpty)
        _ = c.machine.handle(.disconnected, at: .zero)
        #expect(c.ask([0x06, 0x01]).count == 1)
    }

    @Test("reject-at answers the chosen result or extended error instead of handling the request")
    func reject() throws {
        var c = Conversation(
            Fixture.profile(), faults: try FaultPlan(parsing: "reject-at=create-command:04,reject-at=execute:0B:0D"))
        #expect(c.ask([0x01, 0x01, 10, 0, 0, 0]) == [[0x60, 0x01, 0x04]])
        #expect(c.ask([0x01, 0x01, 10, 0, 0, 0]) == [[0x60, 0x01, 0x01]])
        #expect(c.ask([0x04]) == [[0x60, 0x04, 0x0B, 0x0D]])
        #expect(c.machine.counters.faultsFired == 2)
    }

    @Test(
        "Power loss mid-object (single bank): completed flash writes stay, queued ones and RAM are lost; bootloader")
    func powerLoss() {
        var profile = Fixture.profile(saveProgress: true, queueDepth: 64)
        profile.flash.singleBank = true
        profile.speedup = 1
        var c = started(profile)
        let actions = c.machine.handle(.powerLoss, at: .milliseconds(1))
        #expect(actions == [.reboot(into: .bootloader)])
        #expect(c.machine.flash.pending.isEmpty)
        // The first object was executed and saved; the partial one is gone.
        #expect(c.machine.settings.firmwareOffset == 4096)
        #expect(c.machine.initValid)
    }

    @Test("drop-rate is deterministic for a seed")
    func dropRate() throws {
        func drops(seed: UInt64) throws -> Int {
            var c = Conversation(Fixture.profile(), faults: try FaultPlan(parsing: "seed=\(seed),drop-rate=0.3"))
            _ = c.sendInit(Fixture.initPacket(Fixture.command(for: image)))
            _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
            _ = c.send(Array(image.prefix(4096)), chunk: 20)
            return c.machine.counters.packetsDropped
        }
        let first = try drops(seed: 1)
        #expect(first > 0)
        #expect(try drops(seed: 1) == first)
    }

    @Test("slow-flash=4 makes a flash write take four times as long (queue still busy when it would be done)")
    func slowFlash() throws {
        var profile = Fixture.profile(queueDepth: 1)
        profile.speedup = 1
        var c = Conversation(profile, faults: try FaultPlan(parsing: "slow-flash=4"))
        _ = c.sendInit(Fixture.initPacket(Fixture.command(for: image)))
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        c.now = .milliseconds(400)  // the erase takes 4 × 85 ms = 340 ms
        _ = c.packet(Array(image.prefix(244)))  // 61 words × 41 µs × 4 ≈ 10 ms
        c.now = .milliseconds(405)
        #expect(c.machine.handle(.packetWrite(Array(image[244..<488]), withResponse: false), at: c.now).isEmpty)
        #expect(c.machine.counters.packetsDropped == 1)
        c.now = .milliseconds(411)
        _ = c.packet(Array(image[244..<488]))
        #expect(c.machine.settings.firmwareOffset == 488)
    }

    @Test("power-loss-after-bytes reboots mid-object (dual bank: into the old application) and logs the fault")
    func powerLossAfterBytes() throws {
        var c = Conversation(Fixture.profile(), faults: try FaultPlan(parsing: "power-loss-after-bytes=1000"))
        _ = c.sendInit(Fixture.initPacket(Fixture.command(for: image)))
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        var reboots: [BootloaderAction] = []
        for start in stride(from: 0, to: 4096, by: 244) {
            reboots += c.packet(Array(image[start..<min(start + 244, 4096)])).filter {
                if case .reboot = $0 { true } else { false }
            }
        }
        #expect(reboots == [.reboot(into: .application)])
        #expect(c.machine.faultLog.first?.kind == "power-loss")
    }

    @Test("DeviceState encodes to JSON with snake_case keys")
    func stateJSON() async throws {
        let device = VirtualDevice(profile: Fixture.profile(), clock: ContinuousClock())
        let data = try JSONEncoder().encode(await device.state())
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains("\"mode\":\"app\""))
        #expect(text.contains("\"packets_received\":0"))
        #expect(text.contains("\"init_command_present\":false"))
        #expect(try JSONDecoder().decode(DeviceState.self, from: data) == (await device.state()))
    }
}
