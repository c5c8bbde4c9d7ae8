// Micro-benchmarks of the per-byte and per-packet work of an update (docs/benchmarks.md):
// CRC-32, ATT PDU encode/decode, and packetization of an image into Write Commands (through the general codec and
// the way the engine does it now: image slices straight into encoded Write Commands).
// Run: BLEDFU_BENCHMARKS=1 swift package --scratch-path .build-bench benchmark
import ATT
import BLECore
import Benchmark
import SecureDFU

/// 256 KiB of reproducible bytes.
let image: [UInt8] = {
    var state: UInt32 = 0x1234_5678
    return (0..<(256 * 1024)).map { _ in
        state = state &* 1_664_525 &+ 1_013_904_223
        return UInt8(truncatingIfNeeded: state >> 24)
    }
}()

/// A Write Command carrying one 244-byte packet (ATT_MTU 247) to handle 0x0010.
let writeCommand = ATTPDU.writeCommand(handle: 0x0010, value: Array(image.prefix(244)))
let writeCommandBytes = writeCommand.encoded
/// A Calculate Checksum response as notified on the Control Point (handle 0x000E): 60 03 01 offset crc.
let notificationBytes = ATTPDU.handleValueNotification(
    handle: 0x000E, value: [0x60, 0x03, 0x01, 0x00, 0x10, 0x00, 0x00, 0xEF, 0xBE, 0xAD, 0xDE]
).encoded

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal, .memoryLeaked], maxDuration: .seconds(2))

    Benchmark("CRC-32 of 256 KiB", configuration: .init(scalingFactor: .one)) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(CRC32.checksum(image)) }
    }

    Benchmark("CRC-32 incremental, 244-byte packets of 256 KiB") { benchmark in
        for _ in benchmark.scaledIterations {
            var crc = CRC32()
            var offset = 0
            while offset < image.count {
                let end = min(offset + 244, image.count)
                crc.update(image[offset..<end])
                offset = end
            }
            blackHole(crc.value)
        }
    }

    Benchmark("ATT encode Write Command (244 bytes)", configuration: .init(scalingFactor: .kilo)) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(writeCommand.encoded) }
    }

    Benchmark("ATT encodeWriteCommand from an image slice (244 bytes)", configuration: .init(scalingFactor: .kilo)) {
        benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(ATTPDU.encodeWriteCommand(handle: 0x0010, value: image[4096..<4340]))
        }
    }

    Benchmark("ATT decode Write Command (244 bytes)", configuration: .init(scalingFactor: .kilo)) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try? ATTPDU(decoding: writeCommandBytes)) }
    }

    Benchmark("ATT decode Control Point notification", configuration: .init(scalingFactor: .kilo)) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try? ATTPDU(decoding: notificationBytes)) }
    }

    Benchmark("Packetize 256 KiB as the engine does: slices, encodeWriteCommand") { benchmark in
        for _ in benchmark.scaledIterations {
            var bytes = 0
            for object in DFUPlanning.objectRanges(imageSize: image.count, maxObjectSize: 4096) {
                let burst = DFUPlanning.packets(in: object, packetSize: 244).map { image[$0] }
                for packet in burst { bytes += ATTPDU.encodeWriteCommand(handle: 0x0010, value: packet).count }
            }
            blackHole(bytes)
        }
    }

    Benchmark("Packetize 256 KiB: objects, packets, Write Commands") { benchmark in
        for _ in benchmark.scaledIterations {
            var bytes = 0
            for object in DFUPlanning.objectRanges(imageSize: image.count, maxObjectSize: 4096) {
                for packet in DFUPlanning.packets(in: object, packetSize: 244) {
                    bytes += ATTPDU.writeCommand(handle: 0x0010, value: Array(image[packet])).encoded.count
                }
            }
            blackHole(bytes)
        }
    }
}
