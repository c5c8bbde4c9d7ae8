import ATT
import BLECore
import DFUPackage
import DFUProtocol
import DFUSimulator
import GATT
import Testing
import VirtualRadio

/// The simulated bootloader resets after the last Execute, as a Nordic bootloader does once the SoftDevice sent the
/// Write Response: the central must always get that Write Response (and the Execute notification) before the link
/// drops. Over a real `socketpair(AF_UNIX, SOCK_SEQPACKET)`, many times, because the failure was a race between the
/// response and the close (`GATTServer.closeAfterResponse()`; `GATTServerCloseTests` pins the order
/// deterministically, this test checks it end to end).
///
/// The time limit only guards against a hang. The loop takes 0.35 s alone but 45-105 s in a full `swift test` on two
/// loaded cores, and a limit of 2 minutes was hit there: swift-testing then cancels the test, and in a cancelled task
/// `AsyncStream`'s `next()` returns nil instead of waiting (and ends the stream), so every later iteration failed its
/// four notification checks although the device answered them all. Hence a generous limit, and a cancelled test stops
/// at the next iteration with one error (`checkCancellation`) and an ended notification stream stops the test
/// (`#require`) instead of reading as wrong answers.
@Suite(.timeLimit(.minutes(10))) struct SimulatorLastExecuteTests {
    static let iterations = 100

    @Test func theLastExecuteIsAlwaysAnsweredBeforeTheLinkDrops() async throws {
        let image = (0..<600).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let dat = SecureInitPacket(command: Self.command(for: image)).encode()
        var lost: [String] = []
        for iteration in 0..<Self.iterations {
            try Task.checkCancellation()
            let device = VirtualDevice(profile: try Self.profile(), clock: ContinuousClock())
            #expect(await device.mode == .bootloader)
            let (central, peripheral) = try SeqPacketBearer.makePair()
            let serving = Task { await device.serve(peripheral) }
            let att = ATTClient(bearer: central)
            let client = GATTClient(att: att)
            _ = try await att.exchangeMTU(247)
            let service = try #require(try await client.discoverAll().first { $0.uuid == SecureDFUUUID.service })
            let controlPoint = try #require(service.characteristic(SecureDFUUUID.controlPoint))
            let packet = try #require(service.characteristic(SecureDFUUUID.packet))
            var notifications = client.notifications.makeAsyncIterator()
            try await client.setNotifications(true, of: controlPoint)

            func ask(_ request: ControlPointRequest) async throws -> [UInt8] {
                try await client.write(handle: controlPoint.valueHandle, value: request.encoded)
                let answer = await notifications.next()
                return try #require(answer, "iteration \(iteration): no answer to \(request): stream ended").value
            }
            func send(_ bytes: [UInt8]) async throws {
                for start in stride(from: 0, to: bytes.count, by: 244) {
                    try await client.writeWithoutResponse(
                        handle: packet.valueHandle, value: Array(bytes[start..<min(start + 244, bytes.count)]))
                }
            }
            let executed: [UInt8] = [0x60, 0x04, 0x01]  // response to Execute, success
            _ = try await ask(.select(.command))
            _ = try await ask(.create(type: .command, size: UInt32(dat.count)))
            try await send(dat)
            let initChecksum = try await ask(.calculateChecksum)
            #expect(initChecksum == checksum(dat), "iteration \(iteration)")
            let initExecuted = try await ask(.execute)
            #expect(initExecuted == executed, "iteration \(iteration)")
            _ = try await ask(.select(.data))
            _ = try await ask(.create(type: .data, size: UInt32(image.count)))
            try await send(image)
            let imageChecksum = try await ask(.calculateChecksum)
            #expect(imageChecksum == checksum(image), "iteration \(iteration)")
            // The last Execute: the device activates the image and resets. Its Write Response must arrive first.
            do {
                try await client.write(handle: controlPoint.valueHandle, value: ControlPointRequest.execute.encoded)
            } catch {
                lost.append("iteration \(iteration): \(error)")
            }
            #expect(await notifications.next()?.value == executed, "iteration \(iteration)")
            await serving.value  // the device closed the link itself
            #expect(await att.disconnected().code == .disconnected)
            #expect(await device.mode == .application)
        }
        #expect(lost == [], "Write Responses of the last Execute lost in \(lost.count) of \(Self.iterations) updates")
    }

    /// A bootloader with no modelled time (speedup infinite), no application installed, unsigned packages accepted.
    static func profile() throws -> DeviceProfile {
        var profile = DeviceProfile(
            name: "Bracelet", address: try #require(BluetoothAddress("C0:11:22:33:44:FF")), hwVersion: 52,
            softDeviceFWID: 0xB7,
            link: LinkParameters(receiveBuffers: 64), flash: FlashParameters(queueDepth: 64), speedup: .infinity)
        profile.installed.application = nil
        return profile
    }

    static func command(for image: [UInt8]) -> InitCommand {
        InitCommand(
            fwVersion: 2, hwVersion: 52, sdReq: [0xB7], type: .application, sdSize: 0, blSize: 0,
            appSize: UInt32(image.count),
            // nrfutil stores the SHA-256 byte-reversed.
            hash: ImageHash(type: .sha256, bytes: Array(DFUSimulatorDigest.sha256(image).reversed())), isDebug: false,
            bootValidation: [BootValidation(type: .crc)])
    }

    func checksum(_ bytes: [UInt8]) -> [UInt8] {
        ControlPointResponse.checksum(offset: UInt32(bytes.count), crc: CRC32.checksum(bytes)).encoded
    }
}
