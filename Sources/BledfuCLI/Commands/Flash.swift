import DFUCore
import ArgumentParser
import Synchronization
import LinuxIO
import BLECore
import Dispatch
import Foundation
import BledfuKit

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
            android, nrfutil, seed-pacing, with-response; SMP adaptive, window:N, one-at-a-time, mcumgr-cli, nordic.
            """,
            valueName: "mode"))
    var mode = "adaptive"

    @Option(
        name: .long,
        help: ArgumentHelp(
            "SMP: after the upload test-and-confirm (default: test, reset, check, confirm), confirm-only or upload-only.",
            valueName: "flow"))
    var confirm: String?

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

    @Option(name: .long, help: ArgumentHelp("Where journals are kept (default $XDG_STATE_HOME/bledfu).", valueName: "dir"))
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
            valueName: "family"))
    var family = "auto"

    @Option(name: .long, help: ArgumentHelp("Seconds to look for the bootloader.", valueName: "seconds"))
    var scanTimeout: Double = 10

    @Option(name: .long, help: ArgumentHelp("Seconds to wait for a reset before looking for the device.", valueName: "seconds"))
    var rebootDelay: Double = 0.5

    @Option(name: .long, help: ArgumentHelp("Connection attempts per lost link (backoff 0.5, 1, 2, 4, 8 s); 0 never reconnects.", valueName: "n"))
    var reconnectAttempts = 5

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
        guard !family.isEmpty else { throw ValidationError("--family must name a family or be auto") }
        for item in setting where !item.contains("=") || item.hasPrefix("=") {
            throw ValidationError("--setting '\(item)': expected KEY=VALUE")
        }
    }

    /// `--setting KEY=VALUE` items, then the options a family maps to its settings (`--confirm`, `--service-uuid`).
    /// The values are checked by the package's family when it plans the update.
    var familySettings: [String: String] {
        var settings: [String: String] = [:]
        for item in setting {
            guard let equals = item.firstIndex(of: "=") else { continue }
            settings[String(item[..<equals])] = String(item[item.index(after: equals)...])
        }
        settings.merge(DefaultFamilies.settings(forOptions: ["confirm": confirm, "service-uuid": serviceUUID])) { $1 }
        return settings
    }

    var stateDirectory: URL { stateDir.map { URL(fileURLWithPath: $0) } ?? JournalFileStore.defaultDirectory() }

    func settings(package: String, keys: [String], scope: FlashScope, target: FlashSettings.Target, global: GlobalOptions)
        -> FlashSettings
    {
        var name = bootloaderName
        if name == nil, uniqueName, case .address(let address) = target {
            name = "Dfu" + address.description.filter { $0.isHexDigit }.suffix(6)
        }
        return FlashSettings(
            packagePath: package, keyPaths: keys, pacing: mode, scope: scope, family: family, stateDirectory: stateDirectory,
            abortOnCancel: abortOnCancel, bootloaderName: name, scanTimeout: scanTimeout, rebootDelay: rebootDelay,
            reconnectAttempts: reconnectAttempts, target: target, addressType: addressType, security: security,
            adapter: global.adapter, json: global.json, verbose: global.verbose, timeout: global.timeout,
            capture: global.capture, settings: familySettings)
    }
}

extension FlashScope: ExpressibleByArgument {}

/// `bledfu flash PKG --device ADDR`: send a DFU package to a device (anchors 2.7, 2.8, 3.7, 3.8).
struct FlashCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flash",
        abstract: "Update a device's firmware: a Secure DFU zip, or an MCUboot image / NCS zip over MCUmgr SMP.",
        discussion: """
            Verifies the package first (with --key, its signatures), connects, jumps from the application to the \
            bootloader when needed, and sends the parts in order (system first). A lost link is resumed \
            automatically; the journal in the state directory lets `bledfu resume` (or the same command again) \
            continue later. The first Ctrl-C stops after the current object; a second one quits at once.

            \(FlashExit.helpText)
            """)

    @Argument(help: "The package: a Secure DFU .zip, an MCUboot .bin/.hex or an NCS dfu_application.zip.") var package: String
    @OptionGroup var options: GlobalOptions
    @Option(name: .long, help: ArgumentHelp("The device address (C0:FF:EE:00:00:01).", valueName: "address"))
    var device: String?
    @Option(name: .long, help: ArgumentHelp("Find the device by advertised name (prefix).", valueName: "name"))
    var name: String?
    @Option(
        name: .long,
        help: "A PEM public (or private) key the package's signatures (init packets, MCUboot images) must verify with (repeatable).")
    var key: [String] = []
    @Option(name: .long, help: "Which parts to send: system, application or all.") var scope: FlashScope = .all
    @OptionGroup var flash: FlashOptions

    func validate() throws {
        switch (device, name) {
        case (nil, nil): throw ValidationError("give --device ADDRESS or --name NAME")
        case (.some, .some): throw ValidationError("give either --device or --name, not both")
        case (.some(let device), nil):
            guard BluetoothAddress(device) != nil else {
                throw ValidationError("bad device address '\(device)': expected six hex bytes like C0:FF:EE:00:00:01")
            }
        case (nil, .some): break
        }
    }

    func run() async throws {
        let target: FlashSettings.Target
        if let device { target = .address(try parseAddress(device)) } else { target = .name(name ?? "") }
        try await runFlash(flash.settings(package: package, keys: key, scope: scope, target: target, global: options))
    }
}

func makeFlashAdapter(_ adapter: String) throws -> any BLEAdapter {
    var options = GlobalOptions()
    options.adapter = adapter
    return try makeAdapter(options)
}

/// SIGINT: the first calls `onFirst`, the second exits with 130 at once.
final class InterruptHandler: Sendable {
    private let watch: SignalWatch

    init(onFirst: @escaping @Sendable () -> Void) {
        let count = Mutex(0)
        watch = SignalWatch(signals: [SIGINT]) { _ in
            let seen = count.withLock { value in
                value += 1
                return value
            }
            if seen >= 2 {
                Console.errorRaw("bledfu: interrupted")
                exit(BledfuExit.interrupted)
            }
            onFirst()
        }
    }

    func cancel() { watch.cancel() }
}
