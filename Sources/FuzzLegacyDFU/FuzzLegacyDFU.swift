import BLECore
import DFUPackage
import DFUSimulator
import Foundation
import FuzzSupport
import LegacyDFU

/// libFuzzer target for the Legacy DFU codec and engine (tools/fuzz LegacyDFU).
///
/// First byte with bit 7 set: the codec. The rest is decoded as a Control Point request, a notification, the Start
/// sizes and a DFU Version; whatever decodes must encode to the same bytes; then the bytes go to a virtual bootloader
/// as a Control Point write and as a Packet write (no crash, no trap).
///
/// Otherwise the engine (`LegacyDFUStateMachine`) talks to a virtual device (`LegacyBootloader` of SDK 11 dual and
/// single bank, Adafruit, SDK 6, or InfiniTime's service), and the input decides what happens to the device's
/// notifications on their way back. First byte: pacing (low 3 bits) and device (bits 3–5); second byte: the device's
/// drop rate. Then one operation per byte (low 3 bits):
///
///     0-3 deliver the next notification (none pending: the burst was written, else the timer fires)
///     4   the burst was written        5  the timer fires        6  the next notification is lost
///     7   next byte & 7: 0 link lost, 1 duplicate the next notification, 2 swap the next two, 3 inject L = next
///         byte & 0x1F raw bytes, 4 flip bits of one byte of the next notification, 5 cancel, 6 a stale timer,
///         7 device power loss
///
/// After a failure the engine starts again on the same device (up to four attempts, a fresh bootloader session after
/// a reset). Invariants: every packet lies inside the init packet or image and is at most 20 bytes; the engine never
/// acts after it finished; and when every notification came from the device (lost, duplicated or reordered, never
/// forged), an engine that reports the image activated has made the device install exactly that image.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLegacyDFU(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 1 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if bytes[0] & 0x80 != 0 {
        LegacyCodecFuzz.run(Array(bytes.dropFirst()))
    } else {
        var script = LegacyEngineScript(bytes: bytes)
        script.run()
    }
    return 0
}

enum LegacyCodecFuzz {
    static func run(_ bytes: [UInt8]) {
        if let request = try? LegacyRequest(decoding: bytes) {
            precondition(request.encoded == bytes, "asymmetric request \(request): \(bytes.hexString)")
        }
        if let notification = try? LegacyNotification(decoding: bytes) {
            precondition(notification.encoded == bytes, "asymmetric notification \(notification): \(bytes.hexString)")
        }
        if let sizes = try? LegacyStartSizes(decoding: bytes) { precondition(sizes.encoded == bytes, "asymmetric sizes") }
        if let version = try? LegacyDFUVersion(decoding: bytes) { precondition(version.encoded == bytes, "asymmetric version") }
        guard let profile = LegacyEngineFixture.profiles.first else { return }
        var device = LegacyBootloader(profile: profile)
        device.boot(at: .zero)
        _ = device.handle(.connected, at: .zero)
        _ = device.handle(.controlPointWrite(bytes, cccdEnabled: true), at: .zero)
        _ = device.handle(.packetWrite(bytes, withResponse: false), at: .milliseconds(1))
        var watch = InfiniTimeDFU(profile: LegacyEngineFixture.profiles[LegacyEngineFixture.profiles.count - 1])
        _ = watch.handle(.controlPointWrite(bytes, cccdEnabled: true), at: .zero)
        _ = watch.handle(.packetWrite(bytes, withResponse: false), at: .zero)
    }
}

enum LegacyEngineFixture {
    static let image: [UInt8] = (0..<1204).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ $0 >> 7) }
    static let imageSHA = DFUSimulatorDigest.sha256Hex(image)
    static let policies = ["adaptive", "prn:4", "stream", "ios", "nrfutil", "android", "prn:1", "prn:255"]

    static let part = LegacyPart.application(
        image,
        initPacket: LegacyInitPacket(
            layout: .v05, deviceType: 0x0052, deviceRevision: 0xFFFF, applicationVersion: 2, softdeviceReq: [0xFFFE],
            image: image
        ).encode(), layout: .v05)
    static let crcOnlyPart = LegacyPart.application(
        image, initPacket: [UInt8(CRC16.ccittFalse(image) & 0xFF), UInt8(CRC16.ccittFalse(image) >> 8)], layout: .crcOnly)

    static let profiles: [LegacyDeviceProfile] = {
        guard let address = BluetoothAddress("D4:CA:6E:11:22:01") else { return [] }
        var single = LegacyDeviceProfile.sdk11NRF52(address: address)
        single.dualBank = false
        single.initPacketCapacity = 64
        return [.sdk11NRF51(address: address), single, .adafruitNRF52832(address: address), .sdk6NRF51(address: address),
            .pineTime(address: address)].map { profile in
            var instant = profile
            instant.speedup = .infinity
            return instant
        }
    }()
}

#if FUZZING
/// SwiftPM links executables with `main` aliased to `<Target>_main`: hand over to libFuzzer.
@_cdecl("FuzzLegacyDFU_main")
public func fuzzLegacyDFUMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzDriver.run(argc, argv, fuzzLegacyDFU)
}
#else
/// An ordinary build replays the files given as arguments (crash reproducers).
@main enum FuzzLegacyDFUMain { static func main() { FuzzDriver.replay(fuzzLegacyDFU) } }
#endif
