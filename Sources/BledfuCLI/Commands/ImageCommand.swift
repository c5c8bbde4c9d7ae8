import ArgumentParser
import Batch
import BLECore
import DFUCore
import GATT
import MCUmgr

/// `bledfu image`: MCUmgr image management on an SMP device (Zephyr's img_mgmt, smp-mcuboot.md §3, §4): the slots
/// and their flags, marking an image for test or confirming one, erasing the secondary slot, resetting.
struct ImageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image",
        abstract: "Read and change the image state of an MCUmgr SMP device (Zephyr, nRF Connect SDK, MCUboot).",
        discussion: """
            `bledfu flash` does all of this for an update; these commands are for looking and for what flash's \
            --confirm upload-only leaves to you. Exit codes as for bledfu flash (40 the device refused, 45 no SMP \
            service, 42 no answer).
            """,
        subcommands: [ImageList.self, ImageTest.self, ImageConfirm.self, ImageErase.self, ImageReset.self],
        defaultSubcommand: ImageList.self)
}

/// `bledfu image list`: the image state (mcumgr's `image list`).
struct ImageList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "Show every image slot: version, hash and flags (active, confirmed, pending).")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let state = try await withSMPClient(options, device) { client throws(SMPError) in
            try SMPImageState(body: try await client.send(.imageState))
        }
        printImageState(state, json: options.json)
    }
}

/// `bledfu image test HASH`: mark the image with this hash for a test boot at the next reset.
struct ImageTest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test", abstract: "Mark an image (by its SHA-256) to be tried at the next reset; MCUboot reverts it unless confirmed.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var device: DeviceOptions
    @Argument(help: "The image's SHA-256 (64 hex digits; bledfu package inspect shows it).") var hash: String

    func validate() throws { _ = try parseImageHash(hash) }

    func run() async throws {
        let digest = try parseImageHash(hash)
        let state = try await withSMPClient(options, device) { client throws(SMPError) in
            try SMPImageState(body: try await client.send(.setImageState(hash: digest, confirm: false)))
        }
        printImageState(state, json: options.json)
    }
}

/// `bledfu image confirm [HASH]`: make an image permanent (without a hash: the running one).
struct ImageConfirm: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "confirm", abstract: "Confirm the running image (or, with a hash, make that image permanent).")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var device: DeviceOptions
    @Argument(help: "The image's SHA-256 (default: the running image).") var hash: String?

    func validate() throws { if let hash { _ = try parseImageHash(hash) } }

    func run() async throws {
        let digest = try hash.map(parseImageHash)
        let state = try await withSMPClient(options, device) { client throws(SMPError) in
            try SMPImageState(body: try await client.send(.setImageState(hash: digest, confirm: true)))
        }
        printImageState(state, json: options.json)
    }
}

/// `bledfu image erase`: erase the secondary slot (an upload in progress is lost).
struct ImageErase: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "erase", abstract: "Erase the secondary slot (Zephyr refuses a pending or confirmed image there).")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var device: DeviceOptions
    @Option(name: .long, help: ArgumentHelp("The slot to erase (default: the device's choice, slot 1).", valueName: "n"))
    var slot: Int?

    func run() async throws {
        let slot = self.slot
        try await withSMPClient(options, device) { client throws(SMPError) in
            _ = try await client.send(.erase(slot: slot))
        }
        if options.json { Console.json(["event": "erased", "slot": slot ?? 1]) } else { print("erased slot \(slot ?? 1)") }
    }
}

/// `bledfu image reset`: OS reset; MCUboot then swaps, reverts or boots.
struct ImageReset: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset", abstract: "Reset the device (MCUboot swaps in a pending image, or reverts an unconfirmed one).")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var device: DeviceOptions

    func run() async throws {
        try await withSMPClient(options, device) { client throws(SMPError) in
            _ = try await client.send(.reset())
        }
        if options.json { Console.json(["event": "reset"]) } else { print("reset") }
    }
}

/// The image state, one line per slot (text) or one JSON object per slot.
func printImageState(_ state: SMPImageState, json: Bool) {
    for slot in state.images {
        if json {
            Console.json([
                "image": slot.image, "slot": slot.slot, "version": slot.version, "hash": slot.hashHex,
                "bootable": slot.bootable, "pending": slot.pending, "confirmed": slot.confirmed, "active": slot.active,
                "permanent": slot.permanent,
            ])
        } else {
            let flags = [
                slot.active ? "active" : nil, slot.confirmed ? "confirmed" : nil, slot.pending ? "pending" : nil,
                slot.permanent ? "permanent" : nil, slot.bootable ? "bootable" : nil,
            ].compactMap { $0 }
            print("image \(slot.image) slot \(slot.slot): \(slot.version)  \(flags.joined(separator: " "))")
            print("  hash \(slot.hashHex)")
        }
    }
    if state.images.isEmpty, !json { print("no images") }
}

func parseImageHash(_ text: String) throws -> [UInt8] {
    guard let bytes = [UInt8](hexString: text), bytes.count == 32 else {
        throw ValidationError("bad image hash '\(text)': expected the SHA-256 as 64 hex digits")
    }
    return bytes
}

/// Connects, opens the SMP transport and runs `body` with an SMP client; SMP errors end as `bledfu flash`'s do.
func withSMPClient<T: Sendable>(
    _ options: GlobalOptions, _ device: DeviceOptions, _ body: @Sendable (SMPClient) async throws(SMPError) -> T
) async throws -> T {
    try await withConnection(options, device) { connection in
        let transport: GATTSMPTransport
        do throws(SMPError) {
            transport = try await GATTSMPTransport.open(client: connection.gatt)
        } catch {
            throw smpFailure(error)
        }
        let client = SMPClient(
            transport: transport, configuration: SMPClientConfiguration(timeout: options.timeoutDuration),
            clock: ContinuousClock())
        do throws(SMPError) {
            return try await body(client)
        } catch {
            throw smpFailure(error)
        }
    }
}

/// An SMP error as the CLI's one line and exit code (the family's vocabulary, flash's codes).
func smpFailure(_ error: SMPError) -> CLIError {
    let mapped = error.code == .notSMP ? DFUError(.noUpdateService, "the device has no SMP service (\(SMPUUID.service))") : SMPFamily.map(error)
    return CLIError(mapped.message, exitCode: FlashExit.code(for: mapped))
}
