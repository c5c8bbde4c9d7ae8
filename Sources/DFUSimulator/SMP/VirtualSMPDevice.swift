import ATT
import BLECore
import CBOR
import GATT
import Logging
import MCUbootImage
import MCUmgr
import Synchronization

/// A virtual Zephyr/NCS device with MCUmgr's SMP server over BLE (`smp_bt.c`) and MCUboot (smp-mcuboot.md §5, §6).
///
/// Like ``VirtualDevice`` it lives across connections and resets: `serve(_:)` runs one connection; after an SMP
/// reset the link drops, MCUboot boots (swapping, reverting or refusing the secondary image, which takes the
/// modelled swap time), and the next `serve` waits until the device is up again. Requests are Write Commands on the
/// SMP characteristic; each complete request takes one of the transport's `buf_count` buffers until it is handled,
/// its response takes another until its notifications are out; a request that finds no buffer is dropped without
/// an answer (Zephyr #44536), a response that finds none is not sent (#44898). Requests are handled one at a time
/// on the "mcumgr smp" work queue, with the flash time of erases and writes; responses go out as notifications of
/// ATT_MTU − 3 bytes, only with notifications enabled.
public actor VirtualSMPDevice {
    public nonisolated let profile: SMPDeviceProfile
    var logic: SMPServerLogic
    let faults: SMPFaults
    var counters = SMPDeviceCounters()
    var random: SplitMix64
    var connected = false
    var lastBoot: String?
    /// Device time when it is up again after a reset.
    var availableAt: Duration = .zero
    var freeBuffers: Int
    /// Requests waiting for the work queue, each with the connection it came in on.
    var queue: [(packet: [UInt8], server: GATTServer)] = []
    var worker: Task<Void, Never>?
    var reassembly: [UInt8] = []
    var server: GATTServer?
    var smpHandle: UInt16?
    var stalled = false
    var firedTriggers: Set<Int> = []
    let now: @Sendable () -> Duration
    let sleep: @Sendable (Duration) async -> Void
    let makeServer: @Sendable (GATTDatabase, any ATTBearer, UInt16) -> GATTServer
    let statusSink: (@Sendable (SMPDeviceState) async -> Void)?
    let persistentSink: (@Sendable (SMPDevicePersistentState) async -> Void)?
    let logger: Logger
    nonisolated let pacer: LinkPacer

    public init<C: Clock<Duration>>(
        profile: SMPDeviceProfile, faults: SMPFaults = .none, clock: C, restoring: SMPDevicePersistentState? = nil,
        statusSink: (@Sendable (SMPDeviceState) async -> Void)? = nil,
        persistentSink: (@Sendable (SMPDevicePersistentState) async -> Void)? = nil,
        logger: Logger = Logger(label: "bledfu.simulator.smp"), sharedAir: SharedAir? = nil
    ) {
        self.profile = profile
        let pairs =
            restoring?.pairs
            ?? profile.images.enumerated().map { MCUbootImagePair.factory($0.element, seed: "\(profile.name):\($0.offset)") }
        self.logic = SMPServerLogic(profile: profile, pairs: pairs)
        self.faults = faults
        self.random = SplitMix64(seed: faults.plan.seed)
        self.freeBuffers = max(1, profile.smp.bufferCount)
        let start = clock.now
        let now: @Sendable () -> Duration = { start.duration(to: clock.now) }
        self.now = now
        let sleep: @Sendable (Duration) async -> Void = { duration in
            guard duration > .zero else { return }
            // Cancellation ends the wait early; the device then goes on (the link is closing anyway).
            try? await clock.sleep(for: duration)
        }
        self.sleep = sleep
        self.makeServer = { database, bearer, mtu in
            GATTServer(database: database, bearer: bearer, maximumMTU: mtu, clock: clock)
        }
        self.statusSink = statusSink
        self.persistentSink = persistentSink
        self.logger = logger
        self.pacer = LinkPacer(
            model: LinkModel(link: profile.link, flash: FlashParameters()), speedup: profile.speedup, sharedAir: sharedAir)
    }

    // MARK: - Observation

    /// The advertisement: flags, the SMP service UUID (as smp_svr advertises it), the name.
    public var currentAdvertisement: Advertisement {
        Advertisement(
            peer: PeerAddress(profile.address, type: profile.addressType), rssi: -50,
            data: AdvertisingData.build(flags: 0x06, name: profile.name, services: [SMPUUID.service]))
    }

    public var isAvailable: Bool { now() >= availableAt }

    public func state() -> SMPDeviceState {
        let list = (try? SMPImageState(body: logic.stateList()))?.images ?? []
        return SMPDeviceState(
            name: profile.name, address: profile.address.description, connected: connected, available: isAvailable,
            images: list, upload: logic.upload, lastBoot: lastBoot, counters: counters)
    }

    public func persistentState() -> SMPDevicePersistentState { SMPDevicePersistentState(pairs: logic.pairs) }

    /// The image state as the device would report it (for tests: the confirmed image's hash).
    public func imageState() -> SMPImageState { (try? SMPImageState(body: logic.stateList())) ?? SMPImageState(images: []) }

    func publish() async {
        await statusSink?(state())
        if let persistentSink { await persistentSink(persistentState()) }
    }

    // MARK: - Connections

    /// Serves one connection until the link ends. While the device resets or boots, the connection only comes
    /// up once it advertises again.
    public func serve(_ bearer: any ATTBearer) async {
        let wait = availableAt - now()
        if wait > .zero { await sleep(wait) }
        connected = true
        stalled = false
        reassembly = []
        // A link from a named central adapter shares that adapter's air with its other links.
        let seat = pacer.connected(bearer.linkInfo, at: now())
        defer { pacer.disconnected(seat) }
        let database = Self.database(profile: profile, firmware: logic.pairs.first?.primary.image?.header.version.description ?? "")
        let server = makeServer(database, bearer, UInt16(clamping: max(profile.link.maxMTU, 23)))
        self.server = server
        smpHandle = database.handle(of: SMPUUID.characteristic, in: SMPUUID.service)
        let delegate = SMPDeviceDelegate(device: self, characteristic: smpHandle)
        await server.setDelegate(delegate)
        await publish()
        let reason = await server.run()
        logger.debug("virtual SMP device link ended", metadata: ["sim.reason": "\(reason)"])
        // smp_bt.c disconnected(): queued requests of the connection are dropped (a newer connection, which only a
        // host-side harness can open before this one's end is seen, keeps its own).
        if self.server === server || self.server == nil {
            self.server = nil
            connected = false
            queue.removeAll()
            freeBuffers = max(1, profile.smp.bufferCount)
        } else {
            let before = queue.count
            queue.removeAll { $0.server === server }
            freeBuffers += before - queue.count
        }
        await publish()
    }

    static func database(profile: SMPDeviceProfile, firmware: String) -> GATTDatabase {
        var services = DeviceDatabases.common(name: profile.name)
        services.append(
            GATTServiceDefinition(
                uuid: SimulatorUUID.deviceInformation,
                characteristics: [
                    GATTCharacteristicDefinition(uuid: SimulatorUUID.modelNumber, properties: [.read], value: Array(profile.chip.utf8)),
                    GATTCharacteristicDefinition(uuid: SimulatorUUID.firmwareRevision, properties: [.read], value: Array(firmware.utf8)),
                ]))
        services.append(
            GATTServiceDefinition(
                uuid: SMPUUID.service,
                characteristics: [
                    GATTCharacteristicDefinition(
                        uuid: SMPUUID.characteristic, properties: [.writeWithoutResponse, .notify], permissions: [.write])
                ]))
        return GATTDatabase(services: services)
    }

    // MARK: - Requests (smp_bt_chr_write)

    /// One Write (Command or Request) on the SMP characteristic.
    func written(_ value: [UInt8], server: GATTServer) {
        guard !stalled else { return }
        if faults.plan.dropRate > 0, random.unit() < faults.plan.dropRate {
            counters.faults.append("drop")
            return
        }
        if faults.plan.disconnectRate > 0, random.unit() < faults.plan.disconnectRate {
            counters.faults.append("disconnect-rate")
            Task { await server.close() }
            return
        }
        var packet: [UInt8]
        if profile.smp.reassembly {
            if reassembly.isEmpty {
                // The first fragment must hold the header; header length + 8 beyond NETBUF_SIZE is refused (-ENOSR).
                guard let length = SMPMessage.frameLength(value[...]), length <= profile.smp.bufferSize else { return }
                guard freeBuffers > 0 else {
                    counters.requestsDropped += 1
                    return
                }
            }
            reassembly += value
            guard let length = SMPMessage.frameLength(reassembly[...]) else { return }
            guard reassembly.count >= length else { return }
            guard reassembly.count == length else {
                reassembly = []  // more bytes than announced: -EOVERFLOW, the packet is dropped
                return
            }
            packet = reassembly
            reassembly = []
        } else {
            guard value.count <= profile.smp.bufferSize, freeBuffers > 0 else {
                counters.requestsDropped += 1
                return
            }
            packet = value
        }
        guard freeBuffers > 0 else {
            counters.requestsDropped += 1
            return
        }
        freeBuffers -= 1
        counters.requests += 1
        queue.append((packet, server))
        if worker == nil { worker = Task { await self.work() } }
    }

    /// Drops a request whose fragments have not all arrived (the CCCD was turned off).
    func dropReassembly() { reassembly = [] }

    /// The "mcumgr smp" work queue: one request at a time.
    func work() async {
        while !queue.isEmpty {
            let (packet, server) = queue.removeFirst()
            await handle(packet, from: server)
            if stalled { break }
        }
        worker = nil
    }

    /// Runs one request; its response goes out only on the connection it came in on (a response of a link that
    /// ended is dropped, as bt_gatt_notify on a disconnected conn fails).
    func handle(_ packet: [UInt8], from connection: GATTServer) async {
        // The response needs a buffer of its own while the request still holds one.
        let responseBuffer = freeBuffers > 0
        if responseBuffer { freeBuffers -= 1 }
        var reply: SMPServerReply
        do {
            let request = try SMPMessage(decoding: packet)
            reply = logic.handle(request)
            countUpload(request, reply)
        } catch {
            // A body shorter than the header says (no reassembly) is ECORRUPT; an undecodable body EINVAL.
            reply = SMPServerReply()
            if let header = try? SMPHeader(decoding: packet[...]), let op = header.operation.response {
                let rc: SMPReturnCode = error.code == .truncated ? .corrupt : .invalidValue
                reply.response = SMPMessage(
                    op, group: header.group, command: header.command, sequence: header.sequence,
                    version: min(header.version, .v2), body: .textMap(["rc": .int(rc.rawValue)]))
            }
        }
        if reply.flashMicros > 0 { await sleep(profile.scaled(micros: reply.flashMicros)) }
        freeBuffers += 1  // the request's buffer
        if var response = reply.response {
            if responseBuffer, connection === server {
                applyLie(&response)
                await send(response)
            } else {
                counters.responsesDropped += 1
            }
        }
        if responseBuffer { freeBuffers += 1 }
        await checkTriggers()
        if reply.reset {
            await sleep(profile.scaled(micros: profile.smp.resetDelayMs * 1000))
            await reboot(reason: "reset")
        }
    }

    func countUpload(_ request: SMPMessage, _ reply: SMPServerReply) {
        guard request.header.group == .image, request.header.command == SMPCommand.Image.upload else { return }
        counters.uploadBytesReceived += request.body?["data"]?.bytesValue?.count ?? 0
        counters.uploadBytesWritten += reply.bytesWritten
    }

    func send(_ response: SMPMessage) async {
        guard let server, let handle = smpHandle else { return }
        guard await server.isNotifying(valueHandle: handle) else { return }  // BT_GATT_ENFORCE_SUBSCRIPTION
        let bytes = response.encoded(indefiniteContainers: profile.smp.indefiniteCBOR)
        let fragment = max(await server.mtu - 3, 20)
        for start in stride(from: 0, to: bytes.count, by: fragment) {
            let piece = Array(bytes[start..<min(start + fragment, bytes.count)])
            await pacer.pace(attBytes: piece.count + 3, request: false, now: now(), sleep: sleep)
            do {
                try await server.notify(handle: handle, value: piece)
            } catch {
                return  // the link is gone: the response is abandoned (smp_bt.c)
            }
        }
    }

    // MARK: - Faults and lies

    func applyLie(_ response: inout SMPMessage) {
        guard let lie = faults.lie, counters.uploadBytesWritten >= faults.lieAfterBytes,
            response.header.group == .image, response.header.command == SMPCommand.Image.upload,
            let offset = response.body?["off"]?.intValue
        else { return }
        counters.faults.append("lie:\(lie.rawValue)")
        switch lie {
        case .offsetBackwards: response.body = .textMap(["off": .int(max(1, offset / 2))])
        case .offsetPastEnd: response.body = .textMap(["off": .int(offset + 10 * profile.mcuboot.slotSize)])
        case .wrongSequence: response.header.sequence &+= 17
        case .wrongReturnCode: response.body = .textMap(["rc": .int(SMPReturnCode.unknown.rawValue)])
        case .wrongCommand: response.header.command = SMPCommand.Image.erase
        case .corruptImage:
            if response.body?["match"] != nil, let index = logic.pairs.indices.first(where: { logic.pairs[$0].secondary.bytes != nil }),
                var bytes = logic.pairs[index].secondary.bytes, bytes.count > 600
            {
                bytes[600] ^= 0x01
                logic.pairs[index].secondary.bytes = bytes
            }
        }
    }

    func checkTriggers() async {
        for (index, trigger) in faults.plan.triggers.enumerated() where !firedTriggers.contains(index) {
            guard let after = trigger.afterBytes, counters.uploadBytesWritten >= Int(after) else { continue }
            firedTriggers.insert(index)
            counters.faults.append("\(trigger.action.rawValue) after \(after) bytes")
            switch trigger.action {
            case .disconnect: await server?.close()
            case .powerLoss: await reboot(reason: "power loss")
            case .stall: stalled = true
            case .reject: break
            case .flashBusy: break  // img_mgmt writes synchronously through flash_img: no queue to fill.
            }
        }
    }

    /// Power loss now: RAM (the upload in progress) is lost; MCUboot boots.
    public func powerLoss() async { await reboot(reason: "power loss") }

    /// The link drops, RAM is lost, MCUboot runs (smp-mcuboot.md §6.2) and the application starts.
    func reboot(reason: String) async {
        counters.resets += 1
        logic.upload = nil
        queue.removeAll()
        reassembly = []
        let closing = server
        server = nil
        await closing?.close()
        var micros = profile.mcuboot.bootMs * 1000
        var outcomes: [String] = []
        for index in logic.pairs.indices {
            var (outcome, bytes) = logic.pairs[index].boot(options: profile.mcuboot)
            micros += profile.mcuboot.swapMicros(bytes: bytes)
            if case .swapped(.test) = outcome, faults.crashNewImage {
                // The new image crashes before it confirms itself: the watchdog resets and MCUboot reverts.
                let (revert, more) = logic.pairs[index].boot(options: profile.mcuboot)
                micros += profile.mcuboot.bootMs * 1000 + profile.mcuboot.swapMicros(bytes: more)
                outcome = revert
                counters.faults.append("crash-new-image")
            }
            if case .swapped = outcome { counters.swaps += 1 }
            if profile.mcuboot.selfConfirm { logic.pairs[index].confirmPrimary() }
            outcomes.append("image \(index): \(outcome)")
        }
        lastBoot = "\(reason): " + outcomes.joined(separator: "; ")
        availableAt = now() + profile.scaled(micros: micros)
        logger.debug("virtual SMP device rebooted", metadata: ["sim.boot": "\(lastBoot ?? "")"])
        await publish()
    }
}

/// The GATT side of one connection: paces PDUs and hands SMP writes to the device.
final class SMPDeviceDelegate: GATTServerDelegate {
    let device: VirtualSMPDevice
    let characteristic: UInt16?

    init(device: VirtualSMPDevice, characteristic: UInt16?) {
        self.device = device
        self.characteristic = characteristic
    }

    func beforeHandling(_ pdu: ATTPDU, server: GATTServer) async {
        switch pdu {
        case .writeCommand(_, let value):
            await device.pacer.pace(attBytes: 3 + value.count, request: false, now: device.now(), sleep: device.sleep)
        default: await device.pacer.pace(attBytes: pdu.encoded.count, request: true, now: device.now(), sleep: device.sleep)
        }
    }

    func write(_ attribute: GATTAttribute, value: [UInt8], withResponse: Bool, server: GATTServer) async -> ATTErrorCode? {
        guard attribute.handle == characteristic else { return nil }
        await device.written(value, server: server)
        return nil
    }

    /// `smp_bt_ccc_changed`: notifications turned off drop a request half reassembled (`smp_reassembly_drop`).
    func clientConfigurationChanged(valueHandle: UInt16, configuration: GATTClientConfiguration, server: GATTServer) async {
        guard valueHandle == characteristic, !configuration.contains(.notification) else { return }
        await device.dropReassembly()
    }
}
