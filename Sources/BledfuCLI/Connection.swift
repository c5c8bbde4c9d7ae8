import ATT
import ArgumentParser
import Batch
import BLECore
import BlueZTransport
import Foundation
import GATT
import LinuxIO
import VirtualRadio

/// Options naming one device.
struct DeviceOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The device address (C0:FF:EE:00:00:01).", valueName: "address"))
    var device: String

    @Option(name: .long, help: ArgumentHelp("The device's address type: public or random.", valueName: "type"))
    var addressType: AddressType = .random

    @Option(
        name: .long,
        help: ArgumentHelp("BT_SECURITY level for the link (1 low, 2 medium, 3 high, 4 FIPS).", valueName: "level"))
    var security: UInt8?

    /// The address is checked when the command runs (``peer()``), not here: a bad address ends in its own exit
    /// code (14, `bad-address`), which ArgumentParser's validation cannot give.
    func validate() throws {
        if let security, !(1...4).contains(security) { throw ValidationError("--security must be 1 to 4") }
    }

    func peer() throws -> PeerAddress {
        PeerAddress(try parseAddress(device), type: addressType)
    }
}

extension AddressType: ExpressibleByArgument {}

/// Makes the adapter named by `--adapter`.
func makeAdapter(_ options: GlobalOptions) throws -> any BLEAdapter {
    switch AdapterSpec(options.adapter) {
    case .virtual(let directory):
        return VirtualRadio(directory: directory, adapterName: AdapterSpec.virtualAdapterName(options.adapter))
    case .bluez(let name):
        // Link tuning (issue #5 item 2): say what the link got, or once what an unprivileged user loses.
        return BlueZAdapter(name: name, linkReport: { report in
            if report.shouldWarn {
                Console.warning(LinkTuningReport.unprivilegedMessage)
            } else if report.privileged {
                Console.errorRaw("bledfu: \(report)")  // the report starts with "link: "
            }
        })
    case nil: throw CLIError("bad --adapter '\(options.adapter)'", exitCode: BledfuExit.usage)
    }
}

/// An open ATT connection with its capture, for the duration of a command.
struct OpenConnection {
    let att: ATTClient
    let gatt: GATTClient
    let capture: BTSnoopWriter?

    func close() async {
        await att.close()
        capture?.close()
    }
}

/// Connects, wraps the bearer for `--capture` and `--trace`, and exchanges the MTU.
func openConnection(_ options: GlobalOptions, _ device: DeviceOptions) async throws -> OpenConnection {
    var connectOptions = ConnectOptions(timeout: options.timeoutDuration)
    connectOptions.securityLevel = device.security
    let peer = try device.peer()  // a bad address is reported before the adapter is looked at
    let (connection, capture) = try await connectATT(
        adapter: try makeAdapter(options), peer: peer, options: connectOptions,
        capturePath: options.capture, capture: nil, verbose: options.tracesATT)
    return OpenConnection(att: connection.att, gatt: connection.gatt, capture: capture)
}

/// Connects to `peer`, wraps the bearer for `--capture` and `--trace`, and exchanges the MTU.
///
/// - Parameter capture: an open capture to append to (one file across reconnects), or nil to open `capturePath`.
/// - Returns: the connection (its `capture` is nil: the caller owns the writer) and the capture writer in use.
func connectATT(
    adapter: any BLEAdapter, peer: PeerAddress, options: ConnectOptions, capturePath: String?,
    capture: BTSnoopWriter?, verbose: Bool
) async throws(CLIError) -> (OpenConnection, BTSnoopWriter?) {
    let bearer: any ATTBearer
    do {
        bearer = try await adapter.connect(to: peer, options: options)
    } catch {
        throw CLIError(error)
    }
    var writer = capture
    var observers: [any PDUObserver] = []
    if let path = capturePath {
        if writer == nil {
            do {
                writer = try BTSnoopWriter(path: path)
            } catch {
                await bearer.close()
                throw CLIError("cannot write capture file \(path): \(error)", exitCode: BledfuExit.failure)
            }
        }
        if let writer { observers.append(writer.link(peer: bearer.linkInfo.peer ?? peer, connectionHandle: bearer.linkInfo.connectionHandle)) }
    }
    if verbose { observers.append(TraceObserver()) }
    let wrapped: any ATTBearer = observers.isEmpty ? bearer : CapturingBearer(wrapping: bearer, observers: observers)
    let att = ATTClient(bearer: wrapped)
    do {
        _ = try await att.exchangeMTU()
    } catch {
        await att.close()
        if capture == nil { writer?.close() }
        throw CLIError(error)
    }
    return (OpenConnection(att: att, gatt: GATTClient(att: att), capture: nil), writer)
}

/// `--trace` (`-vv`): one line per PDU on standard error.
struct TraceObserver: PDUObserver {
    func observe(pdu: [UInt8], sent: Bool) {
        let text = (try? ATTPDU(decoding: pdu).description) ?? "undecodable PDU \(pdu.hexString)"
        Console.errorRaw("\(sent ? "ATT >" : "ATT <") \(text)")
    }
}

extension CLIError {
    init(_ error: ATTClientError) {
        let code = ExitCodeRegistry.code(for: error)
        self.init(code == BledfuExit.disconnected ? "the device disconnected: \(error)" : "\(error)", exitCode: code)
    }
}

/// Parses a handle ("0x000E" or "14").
func parseHandle(_ text: String) throws -> UInt16 {
    let value: UInt16? = text.lowercased().hasPrefix("0x") ? UInt16(text.dropFirst(2), radix: 16) : UInt16(text)
    guard let value, value != 0 else { throw ValidationError("bad attribute handle '\(text)': expected 0x0001-0xFFFF") }
    return value
}
