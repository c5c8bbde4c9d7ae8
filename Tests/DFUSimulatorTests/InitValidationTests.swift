import ATT
import BLECore
import DFUPackage
import DFUProtocol
import DFUSimulator
import Testing

@Suite("Init packet validation on Execute Command", .timeLimit(.minutes(5)))
struct InitValidationTests {
    let image = Fixture.firmware(6000)

    func execute(_ command: InitCommand, profile: DeviceProfile = Fixture.profile(), signature: [UInt8]? = nil)
        -> [UInt8]
    {
        var c = Conversation(profile)
        return c.sendInit(Fixture.initPacket(command, signature: signature))
    }

    @Test("A hand-encoded unsigned init packet is accepted")
    func handEncoded() {
        // InitCommand: 08 02 (fw 2) 10 34 (hw 52) 1a 02 b7 01 (sd_req [0xB7], packed: 183 is a 2-byte varint)
        // 20 00 (APPLICATION)
        // 38 f0 2e (app_size 6000) 42 24 08 03 12 20 <32-byte SHA-256, reversed> (hash SHA256)
        let hash = Fixture.storedHash(image)
        let initCommand: [UInt8] =
            [
                0x08, 0x02, 0x10, 0x34, 0x1A, 0x02, 0xB7, 0x01, 0x20, 0x00, 0x38, 0xF0, 0x2E, 0x42, 0x24, 0x08, 0x03,
                0x12, 0x20,
            ] + hash
        // Command: 08 01 (op INIT) 12 <len> <InitCommand>; Packet: 0a <len> <Command>.
        let command: [UInt8] = [0x08, 0x01, 0x12, UInt8(initCommand.count)] + initCommand
        let packet: [UInt8] = [0x0A, UInt8(command.count)] + command
        var c = Conversation()
        #expect(c.sendInit(packet) == [0x60, 0x04, 0x01])
        #expect(c.machine.settingsSnapshot.firmwareSize == 6000)
    }

    @Test("Garbage that is no dfu.Packet → 0x05 invalid object")
    func garbage() {
        var c = Conversation()
        #expect(c.sendInit([0xFF, 0xFF, 0x01]) == [0x60, 0x04, 0x05])
        #expect(!c.machine.initValid)
    }

    @Test("Firmware type missing → 0x0B 0x04 init command invalid")
    func typeMissing() {
        var command = Fixture.command(for: image)
        command.type = nil
        #expect(execute(command) == [0x60, 0x04, 0x0B, 0x04])
    }

    @Test("Hash type other than SHA-256 → 0x0B 0x09")
    func hashType() {
        #expect(execute(Fixture.command(for: image, hashType: .crc)) == [0x60, 0x04, 0x0B, 0x09])
    }

    @Test("hw_version missing → 0x0B 0x04; different → 0x0B 0x06")
    func hardwareVersion() {
        #expect(execute(Fixture.command(for: image, hw: nil)) == [0x60, 0x04, 0x0B, 0x04])
        #expect(execute(Fixture.command(for: image, hw: 53)) == [0x60, 0x04, 0x0B, 0x06])
    }

    @Test("sd_req without the installed FWID → 0x0B 0x07; with it among others → success")
    func softDeviceRequirement() {
        #expect(execute(Fixture.command(for: image, sdReq: [0x0100])) == [0x60, 0x04, 0x0B, 0x07])
        #expect(execute(Fixture.command(for: image, sdReq: [])) == [0x60, 0x04, 0x0B, 0x07])
        #expect(execute(Fixture.command(for: image, sdReq: [0x0100, 0xB7])) == [0x60, 0x04, 0x01])
        // 0xFFFE (any) is for external applications only.
        #expect(execute(Fixture.command(for: image, sdReq: [0xFFFE])) == [0x60, 0x04, 0x0B, 0x07])
    }

    @Test("Versions: app same or newer OK, older → 0x0B 0x05; bootloader must be newer; app version required")
    func versions() {
        var profile = Fixture.profile()
        profile.installed.application = InstalledImage(version: 5)
        profile.installed.bootloader = InstalledImage(version: 3)
        #expect(execute(Fixture.command(for: image, fw: 4), profile: profile) == [0x60, 0x04, 0x0B, 0x05])
        #expect(execute(Fixture.command(for: image, fw: 5), profile: profile) == [0x60, 0x04, 0x01])
        #expect(execute(Fixture.command(for: image, fw: nil), profile: profile) == [0x60, 0x04, 0x0B, 0x04])
        let bl = Fixture.command(for: Fixture.firmware(20_000), type: .bootloader, fw: 3)
        #expect(execute(bl, profile: profile) == [0x60, 0x04, 0x0B, 0x05])
        let newer = Fixture.command(for: Fixture.firmware(20_000), type: .bootloader, fw: 4)
        #expect(execute(newer, profile: profile) == [0x60, 0x04, 0x01])
    }

    @Test("An image larger than the bank → 0x04 insufficient resources")
    func tooLarge() {
        #expect(execute(Fixture.command(for: Fixture.firmware(300_000))) == [0x60, 0x04, 0x04])
    }

    @Test("Signatures: unsigned → 0B 08, wrong key → 0x05, wrong type → 0B 0B, right key → success")
    func signatures() throws {
        let devicePEM = PackageKeys.generatePrivateKeyPEM()
        let otherPEM = PackageKeys.generatePrivateKeyPEM()
        // The profile takes PEM keys; the public half of a private PEM is used.
        let profile = Fixture.profile(keys: [devicePEM])
        let command = Fixture.command(for: image)
        let body = SecureInitPacket(command: command).initCommandBytes
        let good = try NordicSignature.sign(body, with: PackageKeys.privateKey(pem: devicePEM))
        let bad = try NordicSignature.sign(body, with: PackageKeys.privateKey(pem: otherPEM))
        #expect(execute(command, profile: profile) == [0x60, 0x04, 0x0B, 0x08])
        #expect(execute(command, profile: profile, signature: bad) == [0x60, 0x04, 0x05])
        #expect(execute(command, profile: profile, signature: good) == [0x60, 0x04, 0x01])
        var wrongType = SecureInitPacket(command: command, signature: good)
        wrongType.signatureType = 1
        var c = Conversation(profile)
        #expect(c.sendInit(wrongType.encode()) == [0x60, 0x04, 0x0B, 0x0B])
        // Without keys nothing is checked.
        #expect(execute(command, signature: bad) == [0x60, 0x04, 0x01])
        // Unsigned applications are fine when the profile does not require signed apps; bootloaders still are not.
        var lenient = profile
        lenient.requireSignedApp = false
        #expect(execute(command, profile: lenient) == [0x60, 0x04, 0x01])
        let bl = Fixture.command(for: Fixture.firmware(20_000), type: .bootloader, fw: 2)
        #expect(execute(bl, profile: lenient) == [0x60, 0x04, 0x0B, 0x08])
    }
}
