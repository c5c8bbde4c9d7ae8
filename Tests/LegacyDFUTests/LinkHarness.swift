import BLECore
import DFUPackage
import DFUSimulator
import GATT
import LegacyDFU
import Testing
import VirtualRadio

/// Updates a `VirtualLegacyDevice` over real SEQPACKET socket pairs (`SeqPacketBearer.makePair()`), as the updater
/// does it with the library's pieces: connect, open the Legacy transport, detect the mode from the services and the
/// DFU Version, jump from the application (and check the device then advertises where ``LegacyBootloaderLocation``
/// says), run each part with ``LegacyDFUDriver``, and start a part again from zero after a lost link or a reset, as
/// the journal and the restart policy allow.
struct LegacyHarness {
    let device: VirtualLegacyDevice
    var configuration = LegacyDFUConfiguration()
    var journal = LegacyJournal()
    var policy = LegacyRestartPolicy()
    /// Where the host expects the device next (nil: anywhere, the first connection).
    var expected: LegacyBootloaderLocation?
    var connections = 0
    var jumps = 0
    var modes: [LegacyDeviceMode] = []
    /// Advertisements that were not where the host expected them.
    var misplaced: [String] = []

    init(device: VirtualLegacyDevice, configuration: LegacyDFUConfiguration = LegacyDFUConfiguration()) {
        self.device = device
        self.configuration = configuration
    }

    /// One connection: the device serves one end, the host gets a GATT client on the other.
    func connect() async throws -> (GATTClient, Task<Void, Never>) {
        let (client, server) = try SeqPacketBearer.makePair()
        let device = self.device
        let serving = Task { await device.serve(server) }
        let att = ATTClient(bearer: client)
        _ = try await att.exchangeMTU()
        return (GATTClient(att: att), serving)
    }

    /// Runs `parts` from the journal's part on; throws the update's final error. Every connection ends with the host
    /// closing its side (a killed host's socket is closed by the kernel) and the device done with the link.
    mutating func update(_ parts: [LegacyPart], connectionLimit: Int = 40) async throws {
        while journal.partIndex < parts.count {
            connections += 1
            guard connections <= connectionLimit else { throw LegacyDFUError(.gaveUp, "more than \(connectionLimit) connections") }
            let advertisement = await device.currentAdvertisement
            if let expected, !expected.addresses.contains(advertisement.peer.address) {
                misplaced.append("\(advertisement.peer.address) not in \(expected)")
            }
            let (gatt, serving) = try await connect()
            do {
                try await connection(parts, gatt: gatt, serving: serving, address: advertisement.peer.address)
            } catch {
                await gatt.att.close()
                await serving.value
                throw error
            }
            await gatt.att.close()
            await serving.value
        }
    }

    /// One connection: detect, then jump or run the journal's part.
    mutating func connection(_ parts: [LegacyPart], gatt: GATTClient, serving: Task<Void, Never>, address: BluetoothAddress) async throws {
        let transport = try await GATTLegacyTransport.open(client: gatt)
        guard
            let mode = LegacyDetection.mode(
                services: transport.services.map(\.uuid), version: transport.version, hasPacket: transport.packet != nil)
        else { throw LegacyDFUError(.incompatible, "no Legacy DFU service") }
        modes.append(mode)
        if case .application(let version) = mode {
            jumps += 1
            let outcome = try await LegacyButtonless.enterBootloader(over: transport, address: address, version: version)
            expected = outcome.location
            await serving.value  // the device drops the link and jumps
            return
        }
        var settings = configuration
        LegacyDetection.configure(&settings, for: mode)
        let driver = LegacyDFUDriver(transport: transport, clock: ContinuousClock(), configuration: settings)
        let index = journal.partIndex
        do {
            try await driver.run(part: parts[index], partIndex: index, partCount: parts.count)
            journal.partInstalled(index)
            expected = LegacyBootloaderLocation.afterReset(of: device.profile.address)
        } catch {
            configuration.pacing = await driver.pacing
            let sent = await driver.bytesSent
            if error.restartsFromZero { journal.recordRestart(part: index, error: error, bytesSent: sent) }
            if let final = policy.verdict(journal, part: index, after: error) { throw final }
            expected = error.code == .disconnected ? nil : LegacyBootloaderLocation.afterReset(of: device.profile.address)
        }
    }
}

enum LegacyEndToEnd {
    /// The device's installed image of `part` (SHA-256 hex), per slot.
    static func installed(_ state: LegacyDeviceState, _ part: LegacyPart) -> [String?] {
        if part.imageType.contains(.softdevice) {
            let sd = Int(part.sizes.softdevice)
            var images = [state.installed.softdevice?.sha256 == LegacyFixture.sha(Array(part.image.prefix(sd)))]
            if part.sizes.bootloader > 0 {
                images.append(state.installed.bootloader.sha256 == LegacyFixture.sha(Array(part.image.dropFirst(sd))))
            }
            return images.map { $0 ? "ok" : nil }
        }
        if part.imageType.contains(.bootloader) {
            return [state.installed.bootloader.sha256 == LegacyFixture.sha(part.image) ? "ok" : nil]
        }
        return [state.installed.application?.sha256 == LegacyFixture.sha(part.image) ? "ok" : nil]
    }

    static func holds(_ state: LegacyDeviceState, _ part: LegacyPart) -> Bool { installed(state, part).allSatisfy { $0 != nil } }
}
