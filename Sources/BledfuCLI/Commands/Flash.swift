import ArgumentParser
import Batch
import BLECore
import BledfuKit
import DFUCore
import Dispatch
import Foundation
import LinuxIO
import Synchronization

/// Options shared by `bledfu flash` and `bledfu resume`.
struct FlashOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The device's address type: public or random.", valueName: "type"))
    var addressType: AddressType = .random

    @Option(name: .long, help: ArgumentHelp("BT_SECURITY level for the link (1-4).", valueName: "level"))
    var security: UInt8?

    @Option(
        name: [.customLong("mode"), .customLong("prn-mode")],
        help: ArgumentHelp(
            """
            Pacing, checked by the package's family: Secure DFU prn:N, checksum:N, object, burst:N:Tms, adaptive, ios, \
            android, nrfutil, seed-pacing, with-response; SMP adaptive, window:N, one-at-a-time, mcumgr-cli, nordic, nordic:N.
            """,
            valueName: "mode"),
        completion: Completions.mode)
    var mode = "adaptive"

    @Option(
        name: .long,
        help: ArgumentHelp(
            "SMP: after the upload test-and-confirm (default: test, reset, check, confirm), confirm-only or upload-only.",
            valueName: "flow"))
    var confirm: String?

    @Flag(
        name: .long,
        help: "SMP: send `upgrade` with the first chunk: the device refuses an image not newer than the one it runs (rc 27).")
    var upgrade = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Secure DFU: the DFU service's UUID on a device whose vendor moved it (default FE59).", valueName: "uuid"))
    var serviceUUID: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "A family setting, repeatable (secure.control-point=UUID, secure.packet=UUID, smp.confirm=upload-only; docs/library.md).",
            valueName: "key=value"))
    var setting: [String] = []

    @Option(
        name: .long, help: ArgumentHelp("Where journals are kept (default $XDG_STATE_HOME/bledfu).", valueName: "dir"),
        completion: Completions.directory)
    var stateDir: String?

    @Flag(name: .long, help: "On Ctrl-C send Abort (the device discards the upload) instead of stopping at a safe point.")
    var abortOnCancel = false

    @Option(name: .long, help: ArgumentHelp("Name the bootloader advertises after the buttonless jump (1-20 bytes).", valueName: "name"))
    var bootloaderName: String?

    @Flag(name: .long, help: "Ask the device to advertise a unique bootloader name (DfuXXXXXX from its address).")
    var uniqueName = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The DFU family: \(DefaultFamilies.all.map(\.id.rawValue).joined(separator: ", ")) or auto (detect it from the device).",
            valueName: "family"),
        completion: Completions.family)
    var family = "auto"

    @Option(name: .long, help: ArgumentHelp("Seconds to look for the bootloader.", valueName: "seconds"))
    var scanTimeout: Double = 10

    @Option(name: .long, help: ArgumentHelp("Seconds to wait for a reset before looking for the device.", valueName: "seconds"))
    var rebootDelay: Double = 0.5

    @Option(name: .long, help: ArgumentHelp("Connection attempts per lost link (backoff 0.5, 1, 2, 4, 8 s); 0 never reconnects.", valueName: "n"))
    var reconnectAttempts = 5

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Seconds without any progress, step or retry after which bledfu's watchdog ends the update (exit 49, resumable); 0 turns it off.",
            valueName: "seconds"))
    var stallTimeout: Double = 120

    func validate() throws {
        // --mode and --confirm are checked by the package's family (its plan), before anything connects.
        guard !mode.isEmpty else { throw ValidationError("--mode must not be empty") }
        if let security, !(1...4).contains(security) { throw ValidationError("--security must be 1 to 4") }
        if let bootloaderName, bootloaderName.utf8.isEmpty || bootloaderName.utf8.count > 20 {
            throw ValidationError("--bootloader-name must be 1 to 20 bytes")
        }
        guard scanTimeout > 0, scanTimeout <= 600 else { throw ValidationError("--scan-timeout must be between 0 and 600 s") }
        guard rebootDelay >= 0, rebootDelay <= 60 else { throw ValidationError("--reboot-delay must be between 0 and 60 s") }
        guard (0...100).contains(reconnectAttempts) else { throw ValidationError("--reconnect-attempts must be 0 to 100") }
        guard stallTimeout == 0 || (30...3600).contains(stallTimeout) else {
            throw ValidationError("--stall-timeout must be 0 (off) or between 30 and 3600 s")
        }
        guard !family.isEmpty else { throw ValidationError("--family must name a family or be auto") }
        for item in setting where !item.contains("=") || item.hasPrefix("=") {
            throw ValidationError("--setting '\(item)': expected KEY=VALUE")
        }
    }

    /// `--setting KEY=VALUE` items, then the options a family maps to its settings (`--confirm`, `--upgrade`,
    /// `--service-uuid`).
    /// The values are checked by the package's family when it plans the update.
    var familySettings: [String: String] {
        var settings: [String: String] = [:]
        for item in setting {
            guard let equals = item.firstIndex(of: "=") else { continue }
            settings[String(item[..<equals])] = String(item[item.index(after: equals)...])
        }
        settings.merge(
            DefaultFamilies.settings(forOptions: [
                "confirm": confirm, "service-uuid": serviceUUID, "upgrade": upgrade ? "true" : nil,
            ])) { $1 }
        return settings
    }

    /// `--state-dir`, else `$BLEDFU_STATE_DIR` or the config file's `state_dir`, else $XDG_STATE_HOME/bledfu.
    var stateDirectory: URL { ConfigDefaults.currentOrNone.stateDirectory(option: stateDir) }

    func settings(package: String, keys: [String], scope: FlashScope, target: FlashSettings.Target, global: GlobalOptions)
        -> FlashSettings
    {
        var name = bootloaderName
        if name == nil, uniqueName, case .address(let address) = target {
            name = "Dfu" + address.description.filter { $0.isHexDigit }.suffix(6)
        }
        return FlashSettings(
            packagePath: package, keyPaths: keys.isEmpty ? ConfigDefaults.currentOrNone.keys : keys, pacing: mode, scope: scope, family: family, stateDirectory: stateDirectory,
            abortOnCancel: abortOnCancel, bootloaderName: name, scanTimeout: scanTimeout, rebootDelay: rebootDelay,
            reconnectAttempts: reconnectAttempts, stallTimeout: stallTimeout, target: target, addressType: addressType, security: security,
            adapter: global.adapter, json: global.json, verbose: global.tracesATT, detail: global.detail, timeout: global.timeout,
            capture: global.capture, settings: familySettings)
    }
}

extension FlashScope: ExpressibleByArgument {}

/// `bledfu flash PKG --device ADDR`: send a DFU package to a device (anchors 2.7, 2.8, 3.7, 3.8).
struct FlashCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flash",
        abstract: "Update a device's firmware: a Nordic DFU zip (Secure or Legacy DFU), an MCUboot image or NCS zip (MCUmgr SMP).",
        discussion: """
            Verifies the package first (with --key, its signatures), connects, recognises the device's DFU family \
            (--family), jumps from the application to the bootloader when needed, and sends the parts in order \
            (system first). Secure DFU files that come without a zip are given as --image APP.bin --init APP.dat. A lost link is resumed \
            automatically; the journal in the state directory lets `bledfu resume` (or the same command again) \
            continue later. The first Ctrl-C stops after the current object; a second one quits at once.

            \(FlashExit.helpText)
            """)

    @Argument(
        help: "The package: a DFU .zip (Secure or Legacy), an MCUboot .bin/.hex or an NCS dfu_application.zip.",
        completion: Completions.package)
    var package: String?
    @Option(
        name: .long,
        help: ArgumentHelp("Secure DFU without a zip: the firmware image (.bin), with --init (instead of the package).", valueName: "bin"),
        completion: Completions.firmware)
    var image: String?
    @Option(
        name: .customLong("init"), help: ArgumentHelp("Secure DFU without a zip: the image's init packet (.dat).", valueName: "dat"),
        completion: Completions.initPacket)
    var initPacket: String?
    @OptionGroup var options: GlobalOptions
    @Option(name: .long, help: ArgumentHelp("The device address (C0:FF:EE:00:00:01).", valueName: "address"))
    var device: String?
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Find the device by advertised name (prefix); several matches are an error that lists them.", valueName: "name"))
    var name: String?
    @Flag(name: .long, help: "With --name: take the strongest of the devices that match.")
    var strongest = false
    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp("Only a device heard at least this strong (dBm, e.g. -60).", valueName: "dBm"))
    var minRssi: Int?
    @Option(
        name: .long,
        help: "A PEM public (or private) key the package's signatures (init packets, MCUboot images) must verify with (repeatable).",
        completion: Completions.key)
    var key: [String] = []
    @Option(name: .long, help: "Which parts to send: system, application or all.") var scope: FlashScope = .all
    @OptionGroup var flash: FlashOptions

    func validate() throws {
        switch (package, image, initPacket) {
        case (.some, nil, nil), (nil, .some, .some): break
        case (nil, nil, nil): throw ValidationError("give the package, or --image and --init")
        case (nil, .some, nil): throw ValidationError("--image needs --init (its init packet); an MCUboot image is given as the package")
        case (nil, nil, .some): throw ValidationError("--init needs --image (the firmware it describes)")
        case (.some, _, _): throw ValidationError("give either the package or --image and --init, not both")
        }
        switch (device, name) {
        case (nil, nil): throw ValidationError("give --device ADDRESS or --name NAME")
        case (.some, .some): throw ValidationError("give either --device or --name, not both")
        // A bad address is reported by run() with its own exit code (14).
        case (.some, nil), (nil, .some): break
        }
        if strongest, name == nil { throw ValidationError("--strongest chooses among the devices --name matches") }
        if let minRssi, !(-127...20).contains(minRssi) { throw ValidationError("--min-rssi must be between -127 and 20") }
    }

    func run() async throws {
        let address = try device.map(parseAddress)
        var settings = flash.settings(
            package: package ?? image ?? "", keys: key, scope: scope, target: address.map { .address($0) } ?? .name(name ?? ""),
            global: options)
        settings.initPacketPath = initPacket
        if name != nil || minRssi != nil {
            // Listen first: which device the name means (or whether the address is heard strongly enough).
            let filter = ScanFilter(namePrefix: name, minimumRSSI: minRssi.map { Int8($0) }, address: address)
            let wanted = name.map { "--name '\($0)'" } ?? address.map { "\($0)" } ?? ""
            let adapter = try makeAdapter(options)
            let heard: [DeviceSelection.Candidate]
            let chosen: DeviceSelection.Candidate
            do throws(DeviceSelectionError) {
                heard = try await DeviceSelection.candidates(
                    adapter: adapter, filter: filter, timeout: FlashSettings.duration(flash.scanTimeout))
                chosen = try DeviceSelection.choose(heard, wanted: wanted, minimumRSSI: minRssi, strongest: strongest)
            } catch {
                throw CLIError(error.message, exitCode: ExitCodeRegistry.code(for: error))
            }
            settings.target = .address(chosen.peer.address)
            settings.addressType = chosen.peer.type
            settings.selection = [.found(address: chosen.peer.address.description, name: chosen.name, byName: name != nil)]
            if let name { settings.selection.insert(.scanning(name: name), at: 0) }
            if heard.count > 1 { settings.selection.append(.message("the strongest of \(heard.count): \(chosen.line)")) }
        }
        try await runFlash(settings)
    }
}

func makeFlashAdapter(_ adapter: String) throws -> any BLEAdapter {
    var options = GlobalOptions()
    options.adapter = adapter
    return try makeAdapter(options)
}

/// SIGINT: the first calls `onFirst`, the second calls `onSecond` and exits with 130 at once.
final class InterruptHandler: Sendable {
    private let watch: SignalWatch

    init(onSecond: @escaping @Sendable () -> Void = {}, onFirst: @escaping @Sendable () -> Void) {
        let count = Mutex(0)
        watch = SignalWatch(signals: [SIGINT]) { _ in
            let seen = count.withLock { value in
                value += 1
                return value
            }
            if seen >= 2 {
                onSecond()
                Console.errorRaw("bledfu: interrupted")
                exit(BledfuExit.interrupted)
            }
            onFirst()
        }
    }

    func cancel() { watch.cancel() }
}
