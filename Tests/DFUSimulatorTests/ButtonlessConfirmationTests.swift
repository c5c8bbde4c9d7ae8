import ATT
import BLECore
import DFUProtocol
import DFUSimulator
import GATT
import TestDoubles
import Testing

@Suite("Buttonless jump waits for the confirmation", .timeLimit(.minutes(5)))
struct ButtonlessConfirmationTests {
    @Test("No jump while the 20 01 01 indication is unconfirmed; the Handle Value Confirmation triggers it")
    func jumpOnlyAfterConfirmation() async throws {
        let clock = ManualClock()
        let device = VirtualDevice(profile: Fixture.profile(), clock: clock)
        // Learn the handles with a GATT client, then talk raw ATT on a second connection so that nothing confirms
        // the indication behind the test's back.
        let link = try await Link(device, clock: clock)
        let buttonless = try link.characteristic(SecureDFUUUID.buttonlessWithoutBonds, in: SecureDFUUUID.service)
        let cccd = try #require(buttonless.cccdHandle)
        await link.client.att.close()
        await link.serving.value

        let (central, peripheral) = InMemoryBearer.makePair(capacity: 64)
        let serving = Task { await device.serve(peripheral) }
        // Client sends: 12 <cccd> 02 00 (Write Request, indications on); device answers 13.
        try await central.send(ATTPDU.writeRequest(handle: cccd, value: [0x02, 0x00]).encoded)
        #expect(try ATTPDU(decoding: try await central.receive()) == .writeResponse)
        // Client sends: 12 <buttonless> 01 (enter bootloader); device answers 13 and indicates 20 01 01.
        try await central.send(ATTPDU.writeRequest(handle: buttonless.valueHandle, value: [0x01]).encoded)
        var received: [ATTPDU] = []
        for _ in 0..<2 { received.append(try ATTPDU(decoding: try await central.receive())) }
        #expect(received.contains(.writeResponse))
        #expect(received.contains(.handleValueIndication(handle: buttonless.valueHandle, value: [0x20, 0x01, 0x01])))
        // Unconfirmed: still the application, still at its own address.
        #expect(await device.mode == .application)
        #expect(await device.currentAdvertisement.peer.address == Fixture.address)
        // Client sends: 1E (Handle Value Confirmation); the device resets into the bootloader and drops the link.
        try await central.send(ATTPDU.handleValueConfirmation.encoded)
        await serving.value
        #expect(await device.mode == .bootloader)
        #expect(await device.currentAdvertisement.peer.address == Fixture.address.nordicBootloaderAddress)
    }
}
