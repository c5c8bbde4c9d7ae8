import ArgumentParser
import Batch
import BLECore
import VirtualRadio

/// Options shared by every command that talks to a radio.
public struct GlobalOptions: ParsableArguments {
    @Option(
        name: .customLong("adapter"),
        help: ArgumentHelp(
            "The radio: a BlueZ adapter (hci0, hci1, or 'any') or a virtual radio (virtual:DIR). Default: $BLEDFU_ADAPTER, the config file's adapter, else any.",
            valueName: "adapter"),
        completion: Completions.adapter)
    var adapterArgument: String?

    /// The adapter in force: `--adapter`, else `$BLEDFU_ADAPTER`, else the config file's (``ConfigDefaults``), else
    /// `any`.
    public var adapter: String {
        get { adapterArgument ?? ConfigDefaults.currentOrNone.adapter ?? "any" }
        set { adapterArgument = newValue }
    }

    @Flag(name: .long, help: "Print machine-readable NDJSON events on standard output.")
    public var json = false

    @Flag(name: .shortAndLong, help: "Only errors and the final line.")
    public var quiet = false

    @Flag(
        name: [.customShort("v"), .customLong("verbose")],
        help: "More detail (-v: every step and progress line; -vv: also every ATT PDU, as --trace).")
    public var verbosity: Int

    @Flag(name: .long, help: "Trace every ATT PDU on standard error (same as -vv).")
    public var trace = false

    @Option(name: .long, help: ArgumentHelp("Seconds allowed for connecting or scanning.", valueName: "seconds"))
    public var timeout: Double = 10

    @Option(
        name: .long,
        help: ArgumentHelp("Write all ATT traffic to a btsnoop file (Wireshark, btmon -r).", valueName: "file"))
    public var capture: String?

    public init() {}

    /// Every ATT PDU on standard error: `--trace` or `-vv`.
    public var tracesATT: Bool { trace || verbosity >= 2 }

    /// How much the human output says.
    var detail: OutputDetail { quiet ? .quiet : verbosity >= 1 ? .verbose : .normal }

    public mutating func validate() throws {
        if quiet, verbosity > 0 { throw ValidationError("give either --quiet or --verbose, not both") }
        if case .failure(let error) = ConfigDefaults.current { throw ValidationError(error.message) }
        guard timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout must be between 0 and 3600 seconds") }
        guard AdapterSpec(adapter) != nil else {
            throw ValidationError("--adapter must be hciN, 'any', or virtual:DIR (got '\(adapter)')")
        }
    }

    public var timeoutDuration: Duration { .milliseconds(Int64(timeout * 1000)) }
}

/// A parsed `--adapter` value.
public enum AdapterSpec: Equatable, Sendable {
    case bluez(String?)
    case virtual(String)

    public init?(_ text: String) {
        if text.hasPrefix("virtual:") {
            // virtual:DIR or virtual:DIR@ADAPTER (docs/virtual-radio.md §4.2): the case holds the directory.
            guard let parsed = VirtualRadio.parse(String(text.dropFirst("virtual:".count))), !parsed.directory.isEmpty
            else { return nil }
            self = .virtual(parsed.directory)
        } else if text == "any" {
            self = .bluez(nil)
        } else if text.hasPrefix("hci"), let index = Int(text.dropFirst(3)), index >= 0, index < 0xFFFF {
            self = .bluez(text)
        } else {
            return nil
        }
    }
}

extension AdapterSpec {
    /// The central adapter of `virtual:DIR@ADAPTER` (`default` for `virtual:DIR` and for other adapters).
    static func virtualAdapterName(_ text: String) -> String {
        VirtualRadio.parse(String(text.dropFirst("virtual:".count)))?.adapter ?? VirtualController.defaultName
    }
}

/// Parses a device address for `--device`.
func parseAddress(_ text: String) throws -> BluetoothAddress {
    guard let address = BluetoothAddress(text) else {
        throw CLIError("bad device address '\(text)': expected six hex bytes like C0:FF:EE:00:00:01", exitCode: BledfuExit.badAddress)
    }
    return address
}

/// How much `flash` and `resume` say on a terminal or in plain lines (NDJSON always carries every event).
enum OutputDetail: Int, Sendable, Comparable {
    /// `-q`: errors and the final line only.
    case quiet
    /// The steps as short sentences, progress every 10 % in plain lines.
    case normal
    /// `-v`: also the progress at every percent and each reconnect attempt's backoff.
    case verbose

    static func < (lhs: OutputDetail, rhs: OutputDetail) -> Bool { lhs.rawValue < rhs.rawValue }
}
