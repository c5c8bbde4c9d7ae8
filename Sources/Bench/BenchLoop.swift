import ATT
import BLECore
import DFUSimulator
import GATT
import VirtualRadio

/// The one loop every family's bench shares (issue 14: the CLI only parses and renders): one connection to an
/// in-process virtual device over a real `socketpair(AF_UNIX, SOCK_SEQPACKET)`, the device serving it with its link
/// model, the engine on the host's end exactly as `bledfu flash` runs it, the transfer timed, both ends closed and
/// the device's serving task awaited before its state is read. A family's bench (``SecureBench``, ``LegacyBench``,
/// ``SMPBench``) supplies only what is its own: the engine it drives on the link and how it reads the device.
enum BenchLoop {
    /// The host's end as the family's engine sees it: the ATT client on the (possibly wrapped) bearer.
    struct Connection {
        var att: ATTClient
    }

    /// Serves `device` on one end of a fresh socket pair and runs `body` on the other; returns its result after the
    /// link closed and the device stopped serving. `secure` makes the pair a ``SeqPacketBearer/makePair`` (the
    /// central can raise the link's security, as SMP devices require); `wrap` wraps the host's bearer (counting).
    /// Throws only when the socket pair cannot be made.
    static func connect<Device: HostedDevice, Result: Sendable>(
        to device: Device, linkInfo: LinkInfo = LinkInfo(), secure: Bool = false,
        wrap: (any ATTBearer) -> any ATTBearer = { $0 },
        _ body: (Connection) async -> Result
    ) async throws(BenchSetupError) -> Result {
        let pair: (any ATTBearer, any ATTBearer)
        do {
            if secure {
                pair = try SeqPacketBearer.makePair(linkInfo: linkInfo)
            } else {
                let (host, deviceSide) = try SeqPacketBearer.makeSocketPair(linkInfo: linkInfo)
                pair = (host, deviceSide)
            }
        } catch {
            throw BenchSetupError("socketpair: \(error)")
        }
        let (hostSide, deviceSide) = pair
        let serving = Task {
            await device.serve(deviceSide)
            await deviceSide.close()
        }
        let att = ATTClient(bearer: wrap(hostSide))
        let result = await body(Connection(att: att))
        await att.close()
        await serving.value
        return result
    }

    /// Runs `body` and returns its result with the time it took, in seconds.
    static func timed<Result>(_ body: () async -> Result) async -> (Result, Double) {
        let clock = ContinuousClock()
        let start = clock.now
        let result = await body()
        return (result, seconds(start.duration(to: clock.now)))
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// The factor the model's rates are multiplied by: the profile's speedup, or 0 without a model (no ceiling).
    static func scale(_ speedup: Double) -> Double { speedup.isFinite && speedup > 0 ? speedup : 0 }
}

/// The bench could not set a run up (no socket pair): the run's `error` says so.
struct BenchSetupError: CodedError, Sendable {
    struct Code: RawRepresentable, Hashable, Sendable {
        var rawValue: String
        init(rawValue: String) { self.rawValue = rawValue }
        /// No socket pair (or no device) for the run.
        static let setup = Code(rawValue: "bench-setup")
    }

    var code: Code { .setup }
    var reason: String
    init(_ reason: String) { self.reason = reason }
    var message: String { reason }
}
