import ATT
import BLECore
import DFUPackage
import DFUProtocol
import DFUSimulator
import Testing

@Suite("Bootloader data objects", .timeLimit(.minutes(5)))
struct DataObjectTests {
    let image = Fixture.firmware(10_000)

    func ready(_ profile: DeviceProfile = Fixture.profile(), faults: FaultPlan = .none) -> Conversation {
        var c = Conversation(profile, faults: faults)
        let response = c.sendInit(Fixture.initPacket(Fixture.command(for: image)))
        #expect(response == [0x60, 0x04, 0x01])
        _ = c.ask([0x06, 0x02])
        return c
    }

    @Test("Create Data before a valid executed init → 0x08")
    func createBeforeInit() {
        var c = Conversation()
        #expect(c.ask([0x01, 0x02, 0x00, 0x10, 0, 0]) == [[0x60, 0x01, 0x08]])
    }

    @Test("Create Data sizes: 0 → 0x03, not a page multiple → 0x03, 8192 → 0x04, beyond the image → 0x08")
    func createDataSizes() {
        var c = ready()
        #expect(c.ask([0x01, 0x02, 0, 0, 0, 0]) == [[0x60, 0x01, 0x03]])
        #expect(c.ask([0x01, 0x02, 0x64, 0, 0, 0]) == [[0x60, 0x01, 0x03]])  // 100, not the last object
        #expect(c.ask([0x01, 0x02, 0x00, 0x20, 0, 0]) == [[0x60, 0x01, 0x04]])  // 8192
        _ = c.sendData(Array(image.prefix(8192)))
        #expect(c.machine.settings.offsetLast == 8192)
        // 8192 + 4096 > 10000, and 4096 is a page multiple → 0x08 operation not permitted.
        #expect(c.ask([0x01, 0x02, 0x00, 0x10, 0, 0]) == [[0x60, 0x01, 0x08]])
        // The last object may be short: 10000 - 8192 = 1808 = 0x0710.
        #expect(c.ask([0x01, 0x02, 0x10, 0x07, 0, 0]) == [[0x60, 0x01, 0x01]])
    }

    @Test("PRN: byte-identical to the checksum response, counter reset by Create and Set PRN")
    func prn() {
        var c = ready()
        #expect(c.ask([0x02, 0x03, 0x00]) == [[0x60, 0x02, 0x01]])  // PRN 3
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        var notes = c.send(Array(image.prefix(100)), chunk: 20)  // 5 packets → one PRN after the 3rd
        #expect(notes == [checksumBytes(60, CRC32.checksum(image.prefix(60)))])
        #expect(c.ask([0x03]) == [checksumBytes(100, CRC32.checksum(image.prefix(100)))])
        // Set PRN restarts the count: 2 more packets give nothing, the 3rd fires.
        _ = c.ask([0x02, 0x03, 0x00])
        notes = c.send(Array(image[100..<140]), chunk: 20)
        #expect(notes.isEmpty)
        // Create rewinds and restarts the count too.
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        notes = c.send(Array(image.prefix(60)), chunk: 20)
        #expect(notes == [checksumBytes(60, CRC32.checksum(image.prefix(60)))])
    }

    @Test("Create Data rewinds to the last executed offset and CRC")
    func createRewinds() {
        var c = ready()
        _ = c.sendData(Array(image.prefix(4096)))
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        _ = c.send(Array(image[4096..<5000]))
        #expect(c.ask([0x03]) == [checksumBytes(5000, CRC32.checksum(image.prefix(5000)))])
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        #expect(c.ask([0x03]) == [checksumBytes(4096, CRC32.checksum(image.prefix(4096)))])
    }

    @Test("Execute Data: size mismatch → 0x08, a repeat → success again (SDKFidelityTests)")
    func executeData() {
        var c = ready()
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        _ = c.send(Array(image.prefix(4000)))
        #expect(c.ask([0x04]) == [[0x60, 0x04, 0x08]])
        _ = c.send(Array(image[4000..<4096]))
        #expect(c.ask([0x04]) == [[0x60, 0x04, 0x01]])
        #expect(c.ask([0x04]) == [[0x60, 0x04, 0x01]])
    }

    @Test("A packet longer than the object is refused with 0x03 (seen through the PRN)")
    func packetTooLong() {
        var c = ready()
        _ = c.ask([0x02, 0x01, 0x00])
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        _ = c.send(Array(image.prefix(4000)), chunk: 4000)
        #expect(c.send(Array(image[4000..<4200])) == [[0x60, 0x03, 0x03]])
        #expect(c.machine.settings.firmwareOffset == 4000)
    }

    @Test("Full flash queue: the write is dropped silently, still counted, and its PRN carries offset 0 / CRC 0")
    func flashQueueFull() {
        // Real flash timing (speedup 1): erase 85 ms, 41 µs per word, queue of 2.
        var profile = Fixture.profile(queueDepth: 2)
        profile.speedup = 1
        var c = ready(profile)
        _ = c.ask([0x02, 0x01, 0x00])  // PRN 1
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])  // queues an erase (85 ms)
        // t = 0: erase + 1 write fit, the next write finds the queue full.
        #expect(c.send(Array(image.prefix(244))) == [checksumBytes(244, CRC32.checksum(image.prefix(244)))])
        #expect(c.send(Array(image[244..<488])) == [checksumBytes(0, 0)])
        #expect(c.machine.counters.packetsDropped == 1)
        #expect(c.ask([0x03]) == [checksumBytes(244, CRC32.checksum(image.prefix(244)))])
        // 100 ms later the erase and the write are done: the retransmission is accepted.
        c.now = .milliseconds(100)
        #expect(c.send(Array(image[244..<488])) == [checksumBytes(488, CRC32.checksum(image.prefix(488)))])
    }

    @Test("No free receive buffer: the write is dropped before it is counted (no PRN at all)")
    func receiveBuffersFull() {
        var profile = Fixture.profile(queueDepth: 10, receiveBuffers: 1)
        profile.speedup = 1
        var c = ready(profile)
        _ = c.ask([0x02, 0x01, 0x00])
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        #expect(c.send(Array(image.prefix(244))).count == 1)
        #expect(c.send(Array(image[244..<488])).isEmpty)
        #expect(c.machine.counters.packetsDropped == 1)
        #expect(c.machine.counters.prnsSent == 1)
    }

    @Test("Happy path: the last Execute checks the SHA-256, answers, and reboots into the new application")
    func happyPath() {
        var c = ready()
        _ = c.ask([0x02, 0x0C, 0x00])
        var responses: [[UInt8]] = []
        var offset = 0
        while offset < image.count {
            let end = min(offset + 4096, image.count)
            _ = c.ask(ControlPointRequest.create(type: .data, size: UInt32(end - offset)).encoded)
            _ = c.send(Array(image[offset..<end]))
            responses += c.ask([0x03])
            let actions = c.cp([0x04])
            responses += Conversation.notifications(actions)
            if end == image.count { #expect(actions.last == .resetAfterFlash(.zero, into: .application)) }
            offset = end
        }
        #expect(responses.last == [0x60, 0x04, 0x01])
        #expect(responses[responses.count - 2] == checksumBytes(10_000, CRC32.checksum(image)))
        #expect(c.machine.installed.application?.version == 2)
        #expect(c.machine.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(image))
        #expect(c.machine.counters.updatesCompleted == 1)
        #expect(c.machine.bootMode == .application)
    }

    @Test("An image whose SHA-256 differs from the init packet → 0x0B 0x0C on the last Execute")
    func hashMismatch() {
        var c = Conversation()
        let wrong = Fixture.command(for: image, hash: Fixture.storedHash(Fixture.firmware(10_000, seed: 9)))
        #expect(c.sendInit(Fixture.initPacket(wrong)) == [0x60, 0x04, 0x01])
        let responses = c.sendData(image)
        #expect(responses.last == [0x60, 0x04, 0x0B, 0x0C])
        #expect(c.machine.installed.application?.version == 1)
    }

    @Test("A corrupted flash write passes the CRC (computed on received data) but fails the hash: 0x0B 0x0C")
    func corruptFlash() throws {
        let plan = try FaultPlan(parsing: "corrupt-flash-at=5000")
        var c = ready(faults: plan)
        let responses = c.sendData(image)
        #expect(responses.last == [0x60, 0x04, 0x0B, 0x0C])
        #expect(c.machine.faultLog.map(\.kind) == ["corrupt-flash"])
    }
}
