import ATT
import BLECore
import DFUPackage
import DFUProtocol
import DFUSimulator

/// Shared fixtures: a profile without link/flash delays, firmware images and their init packets.
enum Fixture {
    static let address = BluetoothAddress("C0:11:22:33:44:FF")!

    /// A bootloader profile with no modelled time (speedup infinite), SDK 15.3, hw 52, S132 6.1.1 (0xB7).
    static func profile(
        saveProgress: Bool = false, keys: [String] = [], queueDepth: Int = 64, receiveBuffers: Int = 64,
        buttonless: ButtonlessKind = .unbonded, sdk: String = "15.3.0"
    ) -> DeviceProfile {
        DeviceProfile(
            name: "Bracelet", chip: "nRF52832", sdkVersion: sdk, address: address, hwVersion: 52, softDeviceFWID: 0xB7,
            buttonless: buttonless, saveProgress: saveProgress, requireSignedApp: true, publicKeys: keys,
            link: LinkParameters(receiveBuffers: receiveBuffers),
            flash: FlashParameters(queueDepth: queueDepth, bankSize: 200_704), speedup: .infinity)
    }

    /// Deterministic firmware bytes.
    static func firmware(_ count: Int, seed: UInt8 = 7) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
    }

    /// SHA-256 as nrfutil stores it in the init packet (byte-reversed).
    static func storedHash(_ image: [UInt8]) -> [UInt8] { Array(SHA256Hex.digest(image).reversed()) }

    static func command(
        for image: [UInt8], type: FirmwareType = .application, fw: UInt32? = 2, hw: UInt32? = 52,
        sdReq: [UInt32] = [0xB7], hashType: HashType = .sha256, hash: [UInt8]? = nil
    ) -> InitCommand {
        let size = UInt32(image.count)
        return InitCommand(
            fwVersion: fw, hwVersion: hw, sdReq: sdReq, type: type, sdSize: type == .softdevice ? size : 0,
            blSize: type == .bootloader ? size : 0, appSize: type == .application ? size : 0,
            hash: ImageHash(type: hashType, bytes: hash ?? storedHash(image)), isDebug: false,
            bootValidation: [BootValidation(type: .crc)])
    }

    static func initPacket(_ command: InitCommand, signature: [UInt8]? = nil) -> [UInt8] {
        SecureInitPacket(command: command, signature: signature).encode()
    }
}

/// SHA-256 through the simulator's public state (no Crypto import needed in tests).
enum SHA256Hex {
    static func digest(_ bytes: [UInt8]) -> [UInt8] { DFUSimulatorDigest.sha256(bytes) }
}

/// Drives a `BootloaderStateMachine` with a CCCD-enabled control point, at a fixed device time unless told.
struct Conversation {
    var machine: BootloaderStateMachine
    var now: Duration = .zero

    init(_ profile: DeviceProfile = Fixture.profile(), faults: FaultPlan = .none) {
        machine = BootloaderStateMachine(profile: profile, faults: faults)
    }

    mutating func cp(_ bytes: [UInt8]) -> [BootloaderAction] {
        machine.handle(.controlPointWrite(bytes, cccdEnabled: true), at: now)
    }

    /// The notifications the control point write produced.
    mutating func ask(_ bytes: [UInt8]) -> [[UInt8]] { Self.notifications(cp(bytes)) }

    mutating func packet(_ bytes: [UInt8]) -> [BootloaderAction] {
        machine.handle(.packetWrite(bytes, withResponse: false), at: now)
    }

    /// Writes `bytes` in `chunk`-byte Packet writes; returns the notifications.
    mutating func send(_ bytes: [UInt8], chunk: Int = 244) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var index = 0
        while index < bytes.count {
            out += Self.notifications(packet(Array(bytes[index..<min(index + chunk, bytes.count)])))
            index += chunk
        }
        return out
    }

    static func notifications(_ actions: [BootloaderAction]) -> [[UInt8]] {
        actions.compactMap { if case .notify(let bytes) = $0 { bytes } else { nil } }
    }

    /// Select, Create, send, Execute the init packet; returns the Execute response.
    mutating func sendInit(_ packet: [UInt8]) -> [UInt8] {
        _ = ask([0x06, 0x01])
        _ = ask(ControlPointRequest.create(type: .command, size: UInt32(packet.count)).encoded)
        _ = send(packet)
        return ask([0x04]).first ?? []
    }

    /// Sends every data object (create, write, execute); returns the last Execute response.
    mutating func sendData(_ image: [UInt8], from start: Int = 0) -> [[UInt8]] {
        var responses: [[UInt8]] = []
        var offset = start
        while offset < image.count {
            let end = min(offset + 4096, image.count)
            responses += ask(ControlPointRequest.create(type: .data, size: UInt32(end - offset)).encoded)
            responses += send(Array(image[offset..<end]))
            responses += ask([0x04])
            offset = end
        }
        return responses
    }
}

/// `60 03 01 <offset u32> <crc u32>`.
func checksumBytes(_ offset: Int, _ crc: UInt32) -> [UInt8] {
    ControlPointResponse.checksum(offset: UInt32(offset), crc: crc).encoded
}

func le32(_ value: UInt32) -> [UInt8] {
    [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 24)]
}
