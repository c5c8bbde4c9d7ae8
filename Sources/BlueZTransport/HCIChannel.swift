import BLECore
import CBlueZShim
import LinuxIO
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A raw HCI socket bound to one adapter, for sending commands and reading the events that answer them
/// (advertising in the peripheral role, link tuning on central connections):
///
///     socket(AF_BLUETOOTH, SOCK_RAW|NONBLOCK|CLOEXEC, BTPROTO_HCI)
///     bind(sockaddr_hci { AF_BLUETOOTH, hciN, HCI_CHANNEL_RAW })
///     setsockopt(SOL_HCI, HCI_FILTER, { event packets: Disconnection Complete, Command Complete/Status, LE Meta })
///
/// Opening and binding need no capability; sending LE commands (OGF 0x08) and Disconnect, and receiving LE Meta
/// events, need CAP_NET_RAW: without it `send` fails with EPERM, reported as `.permissionDenied`.
///
/// Events that arrive while a command waits for its answer are kept for ``waitForLinkEvent(timeout:_:)``.
public struct HCIChannel: Sendable {
    public let adapter: BlueZAdapterInfo
    public let socket: SocketDescriptor
    /// Link events read while waiting for something else, oldest first.
    private var pending: [HCILinkEvent] = []

    /// Opens the channel; throws (with the socket closed) when the adapter cannot be bound.
    public static func open(adapter: BlueZAdapterInfo) throws(AdapterError) -> HCIChannel {
        let events = [
            HCILinkEvent.disconnectionCompleteCode, HCIEvent.commandCompleteCode, HCIEvent.commandStatusCode,
            HCIEvent.leMetaCode,
        ]
        let fd = try openRawSocket(adapter: adapter, events: events, failing: .bind)
        return HCIChannel(adapter: adapter, socket: fd)
    }

    /// A raw HCI socket bound to `adapter` that receives only `events`; closed again when a step fails, and the
    /// bind or filter failure reported as `operation`.
    static func openRawSocket(
        adapter: BlueZAdapterInfo, events: [UInt8], failing operation: BlueZOperation
    ) throws(AdapterError) -> SocketDescriptor {
        let fd: SocketDescriptor
        do {
            fd = try SocketDescriptor.open(domain: BLEDFU_AF_BLUETOOTH, type: CInt(SOCK_RAW.rawValue), protocol: BLEDFU_BTPROTO_HCI)
        } catch {
            throw BlueZErrors.adapterError(errno: error.rawValue, operation: .socket, adapter: adapter.name)
        }
        do throws(Errno) {
            var address = BlueZSocketAddress.hciRaw(device: adapter.id)
            try withUnsafeBytes(of: &address) { (raw) throws(Errno) in try fd.bind(address: raw) }
            var filter = BlueZSocketAddress.hciFilter(events: events)
            _ = try valueOrErrno {
                system_setsockopt(fd.rawValue, BLEDFU_SOL_HCI, BLEDFU_HCI_FILTER, &filter, socklen_t(MemoryLayout<hci_filter>.size))
            }.get()
        } catch {
            try? fd.close()  // already failing with `error`
            throw BlueZErrors.adapterError(errno: error.rawValue, operation: operation, adapter: adapter.name)
        }
        return fd
    }

    private init(adapter: BlueZAdapterInfo, socket: SocketDescriptor) {
        self.adapter = adapter
        self.socket = socket
    }

    public func close() {
        try? socket.close()  // nothing to do about a failed close of a control socket
    }

    /// What answered a command: its status and the return parameters of Command Complete (status first), or empty
    /// for Command Status.
    public struct Answer: Hashable, Sendable {
        public var status: HCIStatus
        public var returnParameters: [UInt8]
    }

    /// Sends `command` and waits up to `timeout` for its Command Complete or Command Status.
    public mutating func send(_ command: HCICommand, timeout: Duration = .seconds(2)) async throws(AdapterError) -> Answer {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        do throws(Errno) {
            while case .wouldBlock = try socket.send(command.packet) {
                try await socket.waitWritable(timeout: ContinuousClock.now.duration(to: deadline))
            }
            while true {
                guard let event = try await nextEvent(deadline: deadline) else { continue }
                switch event {
                case .commandComplete(let opcode, let status, let parameters) where opcode == command.opcode:
                    return Answer(status: status ?? .success, returnParameters: parameters)
                case .commandStatus(let opcode, let status) where opcode == command.opcode:
                    return Answer(status: status, returnParameters: [])
                default:
                    if let link = try? HCILinkEvent.decode(event) { pending.append(link) }
                }
            }
        } catch {
            throw failure(error, opcode: command.opcode, timeout: timeout)
        }
    }

    /// Waits up to `timeout` for the first link event `matches` accepts (kept events first). Nil on timeout.
    public mutating func waitForLinkEvent(
        timeout: Duration, _ matches: (HCILinkEvent) -> Bool
    ) async throws(AdapterError) -> HCILinkEvent? {
        if let index = pending.firstIndex(where: matches) { return pending.remove(at: index) }
        let deadline = ContinuousClock.now.advanced(by: timeout)
        do throws(Errno) {
            while true {
                guard let event = try await nextEvent(deadline: deadline) else { continue }
                guard let link = try? HCILinkEvent.decode(event) else { continue }
                if matches(link) { return link }
                pending.append(link)
            }
        } catch {
            if error == .timedOut { return nil }
            throw failure(error, opcode: nil, timeout: timeout)
        }
    }

    /// One event packet, or nil for a packet that is not a decodable event. Throws ETIMEDOUT at the deadline.
    private func nextEvent(deadline: ContinuousClock.Instant) async throws(Errno) -> HCIEvent? {
        let remaining = ContinuousClock.now.duration(to: deadline)
        if remaining <= .zero { throw .timedOut }
        try await socket.waitReadable(timeout: remaining)
        guard case .processed(let packet) = try socket.receive(maximumCount: 260) else { return nil }
        return try? HCIEvent.decode(packet)
    }

    private func failure(_ error: Errno, opcode: UInt16?, timeout: Duration) -> AdapterError {
        if error == .timedOut, let opcode {
            return AdapterError(
                .system, "\(adapter.name) did not answer HCI command 0x\(String(opcode, radix: 16)) in \(timeout)",
                errno: error.rawValue)
        }
        if error == .notPermitted || error == .permissionDenied {
            return AdapterError(
                .permissionDenied,
                "HCI commands on \(adapter.name) need CAP_NET_RAW: run as root or grant it with: "
                    + "sudo setcap cap_net_raw,cap_net_admin+eip $(command -v bledfu)", errno: error.rawValue)
        }
        return BlueZErrors.adapterError(errno: error.rawValue, operation: .socketOption, adapter: adapter.name)
    }
}
