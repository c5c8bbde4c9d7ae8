// Allocations and time of the send path of a burst of Write Commands (issue 18 point 3, docs/benchmarks.md): one
// data object's 17 packets of 244 bytes (ATT_MTU 247) from image slices to a real socketpair(AF_UNIX,
// SOCK_SEQPACKET), drained on the other end into one reused buffer (no allocation there). Each path is measured
// twice in one run: the way the engine sent a burst before (a new array per PDU, `SocketDescriptor.send(messages:)`
// with headers and a data buffer allocated per sendmmsg, `ATTClient.commands(encoded:)`) and the way it sends it
// now (the ATT header written straight into a reused sendmmsg buffer: `send(payloads:prefix:using:)`,
// `SocketBearer.send(burst:prefix:)`, `ATTClient.writeCommands(handle:values:)`).
// Run: BLEDFU_BENCHMARKS=1 swift package --scratch-path .build-bench benchmark --target SendPathBenchmarks
import ATT
import BLECore
import Benchmark
import GATT
import LinuxIO

/// 64 KiB of reproducible bytes; a burst is 17 slices of 244 bytes (the last one of an object: 192).
let image: [UInt8] = {
    var state: UInt32 = 0x1234_5678
    return (0..<(64 * 1024)).map { _ in
        state = state &* 1_664_525 &+ 1_013_904_223
        return UInt8(truncatingIfNeeded: state >> 24)
    }
}()
let slices: [ArraySlice<UInt8>] = (0..<17).map { index in
    image[(index * 244)..<min(index * 244 + 244, 4096)]
}
let header: [UInt8] = [0x52, 0x10, 0x00]
/// 17 slices of 20 bytes: the ATT client has not exchanged the MTU here (ATT_MTU 23); allocations per burst do not
/// depend on the packet size.
let shortSlices: [ArraySlice<UInt8>] = (0..<17).map { index in image[(index * 20)..<(index * 20 + 20)] }

/// A socket pair whose far end is drained into one buffer after every burst (both ends non-blocking).
final class Pair: @unchecked Sendable {
    let near: SocketDescriptor
    let far: SocketDescriptor
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 16)

    init() {
        // A benchmark that cannot open a socket pair cannot run at all.
        guard let pair = try? SocketDescriptor.seqPacketPair() else { fatalError("socketpair failed") }
        (near, far) = pair
        try? SocketDescriptor.setNonBlockingCloseOnExec(far.rawValue)
        try? SocketDescriptor.setNonBlockingCloseOnExec(near.rawValue)
    }

    /// Reads every message waiting on the far end.
    func drain() {
        while case .processed? = try? far.receive(into: buffer) {}
    }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal], maxDuration: .seconds(2), maxIterations: 20_000)

    let socketPair = Pair()
    Benchmark("socket: burst of 17, before (new PDU arrays, send(messages:))") { benchmark in
        for _ in benchmark.scaledIterations {
            let pdus = slices.map { ATTPDU.encodeWriteCommand(handle: 0x0010, value: $0) }
            blackHole(try? socketPair.near.send(messages: pdus[...]))
            socketPair.drain()
        }
    }
    let batch = SendBatch()
    Benchmark("socket: burst of 17, now (header into the reused sendmmsg buffer)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try? socketPair.near.send(payloads: slices[...], prefix: header, using: batch))
            socketPair.drain()
        }
    }

    let bearerPair = Pair()
    let bearer = SocketBearer(descriptor: bearerPair.near)
    Benchmark("bearer: burst of 17, before (send(burst:) of new PDU arrays)") { benchmark in
        for _ in benchmark.scaledIterations {
            try? await bearer.send(burst: slices.map { header + $0 })
            bearerPair.drain()
        }
    }
    Benchmark("bearer: burst of 17, now (send(burst:prefix:))") { benchmark in
        for _ in benchmark.scaledIterations {
            try? await bearer.send(burst: slices, prefix: header)
            bearerPair.drain()
        }
    }

    let clientPair = Pair()
    let client = ATTClient(bearer: SocketBearer(descriptor: clientPair.near))
    Benchmark("ATT client: burst of 17 (20 bytes), before (commands(encoded:))") { benchmark in
        for _ in benchmark.scaledIterations {
            try? await client.commands(encoded: shortSlices.map { ATTPDU.encodeWriteCommand(handle: 0x0010, value: $0) })
            clientPair.drain()
        }
    }
    Benchmark("ATT client: burst of 17 (20 bytes), now (writeCommands(handle:values:))") { benchmark in
        for _ in benchmark.scaledIterations {
            try? await client.writeCommands(handle: 0x0010, values: shortSlices)
            clientPair.drain()
        }
    }
}
