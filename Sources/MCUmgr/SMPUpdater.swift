import CBOR
import Logging

/// What happens after the upload (smp-mcuboot.md §6.3).
public enum SMPUpgradeMode: String, Sendable, Hashable, Codable, CaseIterable {
    /// Upload, mark for test, reset, reconnect, check the running image, confirm (Android's default; ours).
    case testAndConfirm = "test-and-confirm"
    /// Upload, mark confirmed (permanent, no rollback), reset, reconnect, check the running image (iOS's default).
    case confirmOnly = "confirm-only"
    /// Upload only: the image waits in the secondary slot.
    case uploadOnly = "upload-only"
}

/// One image to install: its bytes and the SHA-256 TLV value the device will report for it.
public struct SMPUpdateImage: Sendable, Hashable {
    public var imageIndex: Int
    public var bytes: [UInt8]
    /// The image's SHA-256 TLV (SMP `hash`).
    public var hash: [UInt8]
    public var version: String

    public init(imageIndex: Int, bytes: [UInt8], hash: [UInt8], version: String) {
        self.imageIndex = imageIndex
        self.bytes = bytes
        self.hash = hash
        self.version = version
    }
}

public struct SMPUpdateConfiguration: Sendable, Hashable {
    public var mode: SMPUpgradeMode
    public var upload: SMPUploadConfiguration
    /// Pipeline depth from the device's `buf_count` − 1 (Nordic); false keeps `upload.window`.
    public var windowFromDevice: Bool
    /// How long to keep trying to reconnect after the reset (swap time included).
    public var rebootTimeout: Duration
    /// Pause between reconnection attempts.
    public var reconnectInterval: Duration
    /// Reconnections allowed after a lost link during the upload (each resumes from the device's offset).
    public var maximumReconnects: Int

    public init(
        mode: SMPUpgradeMode = .testAndConfirm, upload: SMPUploadConfiguration = SMPUploadConfiguration(),
        windowFromDevice: Bool = true, rebootTimeout: Duration = .seconds(120), reconnectInterval: Duration = .seconds(1),
        maximumReconnects: Int = 3
    ) {
        self.mode = mode
        self.upload = upload
        self.windowFromDevice = windowFromDevice
        self.rebootTimeout = rebootTimeout
        self.reconnectInterval = reconnectInterval
        self.maximumReconnects = maximumReconnects
    }
}

/// Steps an update reports.
public enum SMPUpdateEvent: Sendable, Hashable {
    case connected(parameters: SMPParameters?)
    case state(SMPImageState)
    case uploading(image: Int, resumedAt: Int?)
    case progress(image: Int, SMPUploadProgress)
    case uploaded(image: Int, SMPUploadResult)
    case marked(image: Int, permanent: Bool)
    case resetting
    case reconnected
    case confirmed(image: Int)
    case linkLost(SMPError)
}

/// What an update did.
public struct SMPUpdateReport: Sendable, Hashable {
    public var uploads: [Int: SMPUploadResult] = [:]
    public var reconnects = 0
    /// The image state at the end (the running images' hashes are checked against the package).
    public var finalState: SMPImageState?
    public var alreadyInstalled = false
}

/// The update flow over fresh connections (`connect` is called for the first connection, after a lost link and
/// after the reset). The flow is driven by the device's state, so a rerun after a killed tool continues where the
/// device stands: an image already in the secondary slot is not sent again, a half-sent one resumes from the
/// device's offset (same `sha`), a pending one is reset into, a running unconfirmed one is confirmed.
public actor SMPUpdater {
    public typealias Connect = @Sendable () async throws(SMPError) -> SMPClient
    let connect: Connect
    let configuration: SMPUpdateConfiguration
    let events: (@Sendable (SMPUpdateEvent) -> Void)?
    let logger: Logger
    let sleep: @Sendable (Duration) async throws -> Void
    let clock: any Clock<Duration>
    let now: @Sendable () -> Duration
    var uploader: SMPUploader?
    var stopRequested = false
    /// The client of the latest connection, closed when a run fails or stops.
    var latestClient: SMPClient?

    public init(
        configuration: SMPUpdateConfiguration = SMPUpdateConfiguration(), clock: some Clock<Duration> = ContinuousClock(),
        events: (@Sendable (SMPUpdateEvent) -> Void)? = nil, logger: Logger = Logger(label: "bledfu.smp.update"),
        connect: @escaping Connect
    ) {
        self.connect = connect
        self.configuration = configuration
        self.events = events
        self.logger = logger
        self.clock = clock
        self.sleep = { try await clock.sleep(for: $0) }
        let start = clock.now
        self.now = { start.duration(to: clock.now) }
    }

    /// Stops the upload in progress (the device keeps its offset).
    public func requestStop() {
        stopRequested = true
        uploader?.requestStop()
    }

    /// Uploads, marks, resets into and confirms `images` (per the mode). A run that fails or is stopped closes its
    /// link, as a killed tool's ends: the device (smp_bt.c `disconnected()`) drops the requests still queued, so
    /// none is answered on the next connection.
    public func run(_ images: [SMPUpdateImage]) async throws(SMPError) -> SMPUpdateReport {
        do throws(SMPError) {
            return try await steps(images)
        } catch {
            await latestClient?.close()
            throw error
        }
    }

    func steps(_ images: [SMPUpdateImage]) async throws(SMPError) -> SMPUpdateReport {
        var report = SMPUpdateReport()
        var (client, parameters) = try await open()
        var state = try await readState(client)
        var toMark: [SMPUpdateImage] = []
        for image in images {
            if let active = state.active(image: image.imageIndex), active.hash == image.hash {
                // Already running (a rerun after the reset, or nothing to do).
                if configuration.mode != .uploadOnly, !active.confirmed {
                    state = try await confirm(client, image)
                }
                continue
            }
            if let slot = state.slot(withHash: image.hash, image: image.imageIndex), slot.slot != 0 {
                if !slot.pending { toMark.append(image) }
                continue
            }
            var attempt = 0
            while true {
                do {
                    let result = try await upload(image, client: client, parameters: parameters)
                    report.uploads[image.imageIndex] = result
                    events?(.uploaded(image: image.imageIndex, result))
                    break
                } catch where error.code == .disconnected && attempt < configuration.maximumReconnects {
                    attempt += 1
                    report.reconnects += 1
                    events?(.linkLost(error))
                    await client.close()
                    (client, parameters) = try await reopen(within: configuration.rebootTimeout)
                }
            }
            state = try await readState(client)
            guard let slot = state.slot(withHash: image.hash, image: image.imageIndex), slot.slot != 0 else {
                throw SMPError(.imageMismatch, "after the upload the device does not list image \(image.imageIndex) with hash \(hex(image.hash))")
            }
            toMark.append(image)
        }
        if configuration.mode == .uploadOnly || (toMark.isEmpty && !state.images.contains(where: { $0.pending })) {
            report.alreadyInstalled = report.uploads.isEmpty && toMark.isEmpty
            report.finalState = state
            await client.close()
            return report
        }
        report.finalState = try await activate(images, marking: toMark, client: client)
        return report
    }

    /// After the uploads: mark `marking` for test (or permanent), reset, reconnect, check that the running images
    /// are the package's and confirm them (per the mode). With nothing to mark, resets into what is pending (a rerun
    /// after a kill between marking and reset). Closes `client`. Returns the final image state.
    public func activate(_ images: [SMPUpdateImage], marking: [SMPUpdateImage], client: SMPClient) async throws(SMPError)
        -> SMPImageState
    {
        var client = client
        var state: SMPImageState
        let permanent = configuration.mode == .confirmOnly
        for image in marking {
            state = try SMPImageState(body: try await client.send(.setImageState(hash: image.hash, confirm: permanent)))
            // Re-read the flags after every state write (Android PR #306: no change means refused).
            guard let slot = state.slot(withHash: image.hash, image: image.imageIndex), slot.pending else {
                throw SMPError(.remote, "the device did not mark image \(image.imageIndex) pending")
            }
            events?(.marked(image: image.imageIndex, permanent: permanent))
        }
        events?(.resetting)
        do {
            try await client.send(.reset())
        } catch where error.code == .disconnected || error.code == .timeout {
            // The device may reset before its answer is out.
        }
        await client.close()
        (client, _) = try await reopen(within: configuration.rebootTimeout)
        events?(.reconnected)
        state = try await readState(client)
        for image in images {
            guard let active = state.active(image: image.imageIndex), active.hash == image.hash else {
                let running = state.active(image: image.imageIndex)
                await client.close()
                throw SMPError(
                    .reverted,
                    "image \(image.imageIndex): the device runs \(running.map { "\($0.version) (\(hex($0.hash).prefix(16))…)" } ?? "no image"), not \(image.version): MCUboot refused or reverted the new image")
            }
            if configuration.mode == .testAndConfirm, !active.confirmed {
                state = try await confirm(client, image)
            }
        }
        await client.close()
        return state
    }

    /// Confirms the running images that are not confirmed yet (a rerun after the reset). Closes `client`.
    public func confirmRunning(_ images: [SMPUpdateImage], client: SMPClient) async throws(SMPError) -> SMPImageState {
        var state = try await readState(client)
        if configuration.mode == .testAndConfirm {
            for image in images where state.active(image: image.imageIndex)?.confirmed == false {
                state = try await confirm(client, image)
            }
        }
        await client.close()
        return state
    }

    /// The images to mark after their upload: in the secondary slot and not pending yet (`state` read after the
    /// uploads).
    public static func toMark(_ images: [SMPUpdateImage], in state: SMPImageState) -> [SMPUpdateImage] {
        images.filter { image in
            guard let slot = state.slot(withHash: image.hash, image: image.imageIndex) else { return false }
            return slot.slot != 0 && !slot.pending
        }
    }

    // MARK: - Steps

    func open() async throws(SMPError) -> (SMPClient, SMPParameters?) {
        let client = try await connect()
        latestClient = client
        var parameters: SMPParameters?
        do {
            parameters = try SMPParameters(body: try await client.send(.mcumgrParameters, timeout: .seconds(3), retries: 0))
        } catch where error.code == .remote || error.code == .timeout {
            parameters = nil  // MCUMGR_GRP_OS_MCUMGR_PARAMS is off by default: ENOTSUP (smp-mcuboot.md §2.2)
        }
        events?(.connected(parameters: parameters))
        return (client, parameters)
    }

    /// Reconnects until the device answers again (it resets, swaps and boots in between).
    func reopen(within limit: Duration) async throws(SMPError) -> (SMPClient, SMPParameters?) {
        let deadline = now() + limit
        var last = SMPError(.disconnected, "the device did not come back")
        while now() < deadline {
            do {
                return try await open()
            } catch where error.code == .disconnected || error.code == .timeout || error.code == .closed {
                last = error
            }
            do {
                try await sleep(configuration.reconnectInterval)
            } catch {
                throw SMPError(.cancelled, "cancelled while reconnecting")
            }
        }
        throw SMPError(.disconnected, "the device did not come back within \(limit): \(last.reason)")
    }

    func readState(_ client: SMPClient) async throws(SMPError) -> SMPImageState {
        let state = try SMPImageState(body: try await client.send(.imageState))
        events?(.state(state))
        return state
    }

    func confirm(_ client: SMPClient, _ image: SMPUpdateImage) async throws(SMPError) -> SMPImageState {
        let state = try SMPImageState(body: try await client.send(.setImageState(hash: image.hash, confirm: true)))
        guard let active = state.active(image: image.imageIndex), active.hash == image.hash, active.confirmed else {
            throw SMPError(.remote, "the device did not confirm image \(image.imageIndex)")
        }
        events?(.confirmed(image: image.imageIndex))
        return state
    }

    func upload(_ image: SMPUpdateImage, client: SMPClient, parameters: SMPParameters?) async throws(SMPError) -> SMPUploadResult {
        if stopRequested { throw SMPError(.stopped, "stopped before the upload (resumable)") }
        var upload = configuration.upload
        upload.image = image.imageIndex
        if configuration.windowFromDevice, let parameters {
            upload.window = max(1, min(upload.window, parameters.bufferCount - 1))
        }
        let uploader = SMPUploader(client: client, clock: clock, logger: logger)
        self.uploader = uploader
        defer { self.uploader = nil }
        let limit = SMPUploader.packetLimit(mtu: await client.mtu, parameters: parameters)
        events?(.uploading(image: image.imageIndex, resumedAt: nil))
        let events = self.events
        let index = image.imageIndex
        return try await uploader.upload(image.bytes, configuration: upload, packetLimit: limit) { progress in
            events?(.progress(image: index, progress))
        }
    }

    func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format2: $0) }.joined() }
}

extension String {
    init(format2 byte: UInt8) {
        let digits = Array("0123456789abcdef")
        self = String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }
}
