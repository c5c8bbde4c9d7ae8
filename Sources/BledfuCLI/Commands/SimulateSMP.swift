import Batch
import BLECore
import DFUSimulator
import Foundation
import SimulatorHost

/// `--describe` for an SMP device: its profile, link ceilings and the SMP bound of an upload of its first image's
/// size.
enum SMPSimulatorDescription {
    static func emit(_ profile: SMPDeviceProfile, json: Bool) {
        let ceiling = LinkModel(link: profile.link, flash: FlashParameters()).ceiling()
        let size = profile.images.first?.size ?? 128 * 1024
        let bound = profile.smpBound(imageBytes: size)
        if json {
            Console.jsonLine(
                SMPDescribeEvent(
                    name: profile.name, address: profile.address.description, family: "smp",
                    ceiling: .init(
                        writeWithoutResponse: Int(ceiling.airWriteWithoutResponse.rounded()),
                        smpBound: Int(bound.bytesPerSecond.rounded()),
                        oneAtATime: Int(bound.oneAtATimeBytesPerSecond.rounded()), imageBytes: size),
                    profile: profile))
            return
        }
        let smp = profile.smp
        let mcuboot = profile.mcuboot
        let images = profile.images.enumerated().map { "image \($0.offset) v\($0.element.version)" }.joined(separator: ", ")
        print("\(profile.name) \(profile.address) \(profile.addressType) \(profile.chip) MCUmgr SMP \(images)")
        print(
            "  smp: buf_size \(smp.bufferSize) buf_count \(smp.bufferCount) reassembly \(smp.reassembly)"
                + " mcumgr_params \(smp.mcumgrParameters) v2 \(smp.smpV2); mcuboot: slot \(mcuboot.slotSize)"
                + " page \(mcuboot.pageSize) erase \(Int(mcuboot.pageEraseMicros)) us"
                + " downgrade prevention \(mcuboot.downgradePrevention), \(mcuboot.publicKeys.count) key(s)"
                + ", speedup \(profile.speedup)")
        let link = profile.link
        print(
            "  link: \(link.phy) LL \(link.llDataLength) MTU \(link.maxMTU) CI \(link.connectionIntervalMs) ms"
                + " \(link.packetsPerEvent)/event; air \(Int(ceiling.airWriteWithoutResponse.rounded())) B/s")
        print(
            "  SMP bound (\(size) bytes, \(bound.chunkBytes)-byte chunks in \(bound.writesPerChunk) writes): pipelined"
                + " \(Int(bound.bytesPerSecond.rounded())) B/s, one at a time \(Int(bound.oneAtATimeBytesPerSecond.rounded())) B/s")
    }
}

/// The NDJSON line `--describe --json` prints per SMP device.
struct SMPDescribeEvent: Encodable {
    struct Ceiling: Encodable {
        var writeWithoutResponse: Int
        var smpBound: Int
        var oneAtATime: Int
        var imageBytes: Int

        enum CodingKeys: String, CodingKey {
            case writeWithoutResponse = "air_write_without_response"
            case smpBound = "smp_bound"
            case oneAtATime = "smp_one_at_a_time"
            case imageBytes = "image_bytes"
        }
    }

    var event = "device"
    var name: String
    var address: String
    var family: String
    var ceiling: Ceiling
    var profile: SMPDeviceProfile
}

extension ProfileOverrides {
    /// An SMP device takes `--speedup` and `--public-key` (MCUboot's keys); the Secure DFU options do not apply.
    func apply(to profile: inout SMPDeviceProfile) throws {
        let secureOnly: [(String, Bool)] = [
            ("--hw-version", hwVersion != nil), ("--sd-fwid", softDeviceFWID != nil),
            ("--app-version", applicationVersion != nil), ("--require-signature", requireSignature != nil),
            ("--save-progress", saveProgress != nil),
        ]
        if let option = secureOnly.first(where: \.1)?.0 {
            throw CLIError("\(option) is a Secure DFU option; \(profile.name) is an SMP device", exitCode: BledfuExit.usage)
        }
        if let publicKeys { profile.mcuboot.publicKeys = publicKeys }
        if let speedup { profile.speedup = speedup }
    }
}
