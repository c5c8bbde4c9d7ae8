import BLECore
import CBlueZShim
import Logging
import LinuxIO
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What link tuning asks of a new central connection (linux-ble.md §2.4-2.6). The defaults: a 7.5-15 ms connection
/// interval, no peripheral latency, a 4 s supervision timeout, the 2M PHY both ways, 251-byte LL payloads.
public struct LinkTuningRequest: Sendable, Hashable {
    /// Connection interval bounds in 1.25 ms units.
    public var intervalMin: UInt16 = 0x0006
    public var intervalMax: UInt16 = 0x000C
    public var latency: UInt16 = 0
    /// Supervision timeout in 10 ms units.
    public var supervisionTimeout: UInt16 = 400
    public var requestTwoMegabitPHY = true
    /// LL payload octets (27-251) and the matching transmit time in µs.
    public var dataLengthOctets: UInt16 = 251
    public var dataLengthTime: UInt16 = 2120
    /// How long each procedure may take to complete.
    public var procedureTimeout: Duration = .seconds(2)

    public init() {}
}

/// What the link got after tuning, as the controller and the kernel report it. Fields are nil when unknown.
public struct LinkTuningReport: Sendable, Hashable, CustomStringConvertible {
    /// False when the process lacks CAP_NET_RAW: nothing was requested.
    public var privileged: Bool
    /// True for the first unprivileged report of the process: the one to warn about.
    public var shouldWarn = false
    /// Connection interval in 1.25 ms units, latency, supervision timeout in 10 ms units.
    public var interval: UInt16?
    public var latency: UInt16?
    public var supervisionTimeout: UInt16?
    /// HCI PHY numbers (1 1M, 2 2M, 3 Coded).
    public var transmitPHY: UInt8?
    public var receivePHY: UInt8?
    public var maxTransmitOctets: UInt16?
    public var maxReceiveOctets: UInt16?
    /// One short note per procedure that did not do what was asked.
    public var notes: [String] = []

    public init(privileged: Bool) { self.privileged = privileged }

    public var description: String {
        var parts: [String] = []
        if let interval {
            var text = "interval \(Self.milliseconds(interval, unit: 1.25)) ms"
            if let latency { text += ", latency \(latency)" }
            if let supervisionTimeout { text += ", timeout \(Int(supervisionTimeout) * 10) ms" }
            parts.append(text)
        } else {
            parts.append("interval unchanged")
        }
        if let transmitPHY, let receivePHY {
            parts.append("PHY \(LEPHYName.describe(transmitPHY))/\(LEPHYName.describe(receivePHY)) (tx/rx)")
        }
        if let maxTransmitOctets, let maxReceiveOctets {
            parts.append("data length \(maxTransmitOctets)/\(maxReceiveOctets) bytes (tx/rx)")
        }
        var text = "link: " + parts.joined(separator: "; ")
        if !notes.isEmpty { text += " (" + notes.joined(separator: "; ") + ")" }
        return text
    }

    /// The one line to print when tuning was not possible.
    public static let unprivilegedMessage =
        "link tuning needs CAP_NET_RAW: the link keeps the kernel's defaults (30-50 ms connection interval, 1M PHY, "
        + "27-byte packets unless the device asks for more), so the upload can be several times slower; grant it "
        + "with: sudo setcap cap_net_raw,cap_net_admin+eip $(command -v bledfu)"

    static func milliseconds(_ value: UInt16, unit: Double) -> String {
        let ms = Double(value) * unit
        return ms == ms.rounded() ? String(Int(ms)) : String(ms)
    }
}

/// Remembers whether the missing-privilege warning was given (``process``: once per process, whichever adapter value
/// connects).
public final class LinkTuningWarnings: Sendable {
    public static let process = LinkTuningWarnings()
    private let warned = Mutex(false)
    public init() {}
    /// True the first time only.
    public func claim() -> Bool {
        warned.withLock { warned in
            defer { warned = true }
            return !warned
        }
    }
}

/// Tunes one central connection over a raw HCI socket on its adapter (``HCIChannel``):
///
///     LE Connection Update (0x2013)  → Command Status, LE Connection Update Complete (interval, latency, timeout)
///     LE Set PHY (0x2032, 2M)        → Command Status, LE PHY Update Complete (tx/rx PHY)
///     LE Set Data Length (0x2022)    → Command Complete, LE Data Length Change (when the LL values change)
///     LE Read PHY (0x2030)           → the PHYs in use (when no PHY Update Complete came)
///
/// Without CAP_NET_RAW the first command fails with EPERM: nothing is changed and the PHY is read with
/// getsockopt(SOL_BLUETOOTH, BT_PHY), which needs no privilege. A controller that refuses a procedure (unknown
/// command, unsupported feature) is noted in the report and the next procedure runs.
public enum LinkTuner {
    public static func tune(
        adapter: BlueZAdapterInfo, handle: UInt16, socket: SocketDescriptor, request: LinkTuningRequest = LinkTuningRequest(),
        logger: Logger = Logger(label: "bledfu.bluez.link")
    ) async -> LinkTuningReport {
        var channel: HCIChannel
        do throws(AdapterError) {
            channel = try HCIChannel.open(adapter: adapter)
        } catch {
            // Opening a raw HCI socket needs no capability: this is not the missing-privilege case.
            var report = LinkTuningReport(privileged: true)
            report.notes.append("no HCI socket: \(error.reason)")
            readSocketPHY(socket, into: &report)
            return report
        }
        defer { channel.close() }
        var report = LinkTuningReport(privileged: true)
        let matchesHandle: (HCILinkEvent) -> Bool = { $0.handle == handle }

        // 1. Connection interval.
        let update = HCICommand.leConnectionUpdate(
            handle: handle, intervalMin: request.intervalMin, intervalMax: request.intervalMax, latency: request.latency,
            supervisionTimeout: request.supervisionTimeout)
        switch await started(update, on: &channel, timeout: request.procedureTimeout) {
        case .unprivileged:
            var unprivileged = LinkTuningReport(privileged: false)
            readSocketPHY(socket, into: &unprivileged)
            return unprivileged
        case .refused(let note):
            report.notes.append("connection interval: \(note)")
        case .accepted:
            let event = try? await channel.waitForLinkEvent(timeout: request.procedureTimeout) {
                if case .connectionUpdateComplete = $0 { return matchesHandle($0) }
                return false
            }
            if case .connectionUpdateComplete(let status, _, let interval, let latency, let timeout) = event {
                if status == .success {
                    report.interval = interval
                    report.latency = latency
                    report.supervisionTimeout = timeout
                } else {
                    report.notes.append("connection interval: \(status)")
                }
            } else {
                report.notes.append("connection interval: no update within \(request.procedureTimeout)")
            }
        }

        // 2. PHY.
        if request.requestTwoMegabitPHY {
            switch await started(.leSetPHY(handle: handle), on: &channel, timeout: request.procedureTimeout) {
            case .unprivileged, .refused:
                report.notes.append("2M PHY: not supported here")
            case .accepted:
                let event = try? await channel.waitForLinkEvent(timeout: request.procedureTimeout) {
                    if case .phyUpdateComplete = $0 { return matchesHandle($0) }
                    return false
                }
                if case .phyUpdateComplete(let status, _, let transmit, let receive) = event, status == .success {
                    report.transmitPHY = transmit
                    report.receivePHY = receive
                }
            }
        }
        if report.transmitPHY == nil,
            let answer = try? await channel.send(.leReadPHY(handle: handle), timeout: request.procedureTimeout),
            answer.status == .success, let phys = try? HCIReadPHYResult(returnParameters: answer.returnParameters)
        {
            report.transmitPHY = phys.transmit
            report.receivePHY = phys.receive
        }
        if report.transmitPHY == nil { readSocketPHY(socket, into: &report) }

        // 3. Data length.
        let length = HCICommand.leSetDataLength(handle: handle, octets: request.dataLengthOctets, time: request.dataLengthTime)
        switch await started(length, on: &channel, timeout: request.procedureTimeout) {
        case .unprivileged, .refused(_):
            report.notes.append("data length: not supported here")
        case .accepted:
            let event = try? await channel.waitForLinkEvent(timeout: request.procedureTimeout) {
                if case .dataLengthChange = $0 { return matchesHandle($0) }
                return false
            }
            if case .dataLengthChange(_, let tx, _, let rx, _) = event {
                report.maxTransmitOctets = tx
                report.maxReceiveOctets = rx
            } else {
                report.notes.append("data length: no change reported")
            }
        }
        logger.debug("link tuned", metadata: ["link": "\(report)"])
        return report
    }

    private enum Start {
        case accepted
        case refused(String)
        case unprivileged
    }

    private static func started(_ command: HCICommand, on channel: inout HCIChannel, timeout: Duration) async -> Start {
        do throws(AdapterError) {
            let answer = try await channel.send(command, timeout: timeout)
            return answer.status == .success ? .accepted : .refused("\(answer.status)")
        } catch {
            return error.code == .permissionDenied ? .unprivileged : .refused(error.reason)
        }
    }

    /// getsockopt(SOL_BLUETOOTH, BT_PHY): a u32 bitmask; LE 2M TX 0x0800, RX 0x1000, 1M 0x0200/0x0400,
    /// Coded 0x2000/0x4000. When several bits are set, the fastest one is reported.
    static func readSocketPHY(_ socket: SocketDescriptor, into report: inout LinkTuningReport) {
        var mask: UInt32 = 0
        var length = socklen_t(MemoryLayout<UInt32>.size)
        guard case .success = valueOrErrno({ system_getsockopt(socket.rawValue, BLEDFU_SOL_BLUETOOTH, BLEDFU_BT_PHY, &mask, &length) })
        else { return }
        func pick(_ twoM: UInt32, _ oneM: UInt32, _ coded: UInt32) -> UInt8? {
            if mask & twoM != 0 { return 2 }
            if mask & oneM != 0 { return 1 }
            if mask & coded != 0 { return 3 }
            return nil
        }
        report.transmitPHY = pick(BLEDFU_BT_PHY_LE_2M_TX, BLEDFU_BT_PHY_LE_1M_TX, BLEDFU_BT_PHY_LE_CODED_TX)
        report.receivePHY = pick(BLEDFU_BT_PHY_LE_2M_RX, BLEDFU_BT_PHY_LE_1M_RX, BLEDFU_BT_PHY_LE_CODED_RX)
    }
}
