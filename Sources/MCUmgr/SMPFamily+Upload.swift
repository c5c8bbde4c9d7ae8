import BLECore
import DFUCore
import MCUbootImage
import Synchronization

/// One image of an SMP plan.
public struct SMPPart: UpdatePart, Sendable, Hashable {
    public var imageIndex: Int
    public var fileName: String
    public var bytes: [UInt8]
    /// The image's SHA-256 TLV: what the device lists for it.
    public var hash: [UInt8]
    public var version: String

    public init(_ part: MCUbootPackage.Part) {
        imageIndex = part.imageIndex
        fileName = part.name
        bytes = part.image.bytes
        hash = part.image.hashTLV ?? []
        version = part.image.header.version.smpString
    }

    public var name: String { "image \(imageIndex) (\(fileName), \(version))" }
    public var byteCount: Int { bytes.count }
    var updateImage: SMPUpdateImage { SMPUpdateImage(imageIndex: imageIndex, bytes: bytes, hash: hash, version: version) }
}

/// The journal state of an SMP part: the offset the device confirmed. The device itself keeps the upload for the
/// same `sha`, so this is for progress and reports; a resume always asks the device.
public struct SMPResume: Codable, Sendable, Hashable {
    public var offset: Int
    public init(offset: Int) { self.offset = offset }
}

/// `--mode` for SMP: how the upload paces itself.
public enum SMPPacing {
    /// The modes, for messages and help.
    public static let modes = "adaptive, window:N (1-32), one-at-a-time, mcumgr-cli, nordic, nordic:N (1-32)"

    /// bledfu's own modes send a minimal first chunk (``SMPUploadConfiguration/firstChunkBytes``): at most one window
    /// is sent twice on a resume. The emulations send theirs as the hosts do (as much as fits).
    ///
    /// - `adaptive` (default): the device's buf_count − 1 in flight, halved on losses, grown back.
    /// - `window:N`: N in flight, fixed. `one-at-a-time`: one.
    /// - `mcumgr-cli`: newtmgr's `image upload` (smp-mcuboot.md §11): packets of at most min(ATT_MTU − 3, 512) bytes
    ///   (findChunkLen, MtuOut), a window that starts at 1 and grows by one per answer to 5 (`-w` default), one less
    ///   on a failed chunk.
    /// - `nordic`: the defaults of Nordic's McuManager libraries (§9, §10): packets of buf_size (the reassembly
    ///   buffer), one chunk at a time (iOS `pipelineDepth` 1, Android `windowCapacity` 1). `nordic:N`: the same with
    ///   the pipelining set to N, as the nRF Connect Device Manager apps let one choose.
    public static func configuration(_ mode: String, parameters: SMPParameters?, mtu: Int)
        -> (upload: SMPUploadConfiguration, packetLimit: Int)?
    {
        let deviceWindow = max(1, (parameters?.bufferCount ?? 2) - 1)
        let limit = SMPUploader.packetLimit(mtu: mtu, parameters: parameters)
        let minimal = SMPUploadConfiguration.minimalFirstChunk
        switch mode {
        case "adaptive", "": return (SMPUploadConfiguration(window: deviceWindow, policy: .adaptive, firstChunkBytes: minimal), limit)
        case "one-at-a-time": return (SMPUploadConfiguration(window: 1, policy: .fixed, firstChunkBytes: minimal), limit)
        case "mcumgr-cli": return (SMPUploadConfiguration(window: 5, policy: .newtmgr), min(mtu - 3, 512))
        case "nordic": return (SMPUploadConfiguration(window: 1, policy: .fixed), limit)
        default:
            if let n = Self.count(mode, "nordic:") { return (SMPUploadConfiguration(window: n, policy: .fixed), limit) }
            if let n = Self.count(mode, "window:") {
                return (SMPUploadConfiguration(window: n, policy: .fixed, firstChunkBytes: minimal), limit)
            }
            return nil
        }
    }

    /// N of "prefixN", 1 to 32.
    static func count(_ mode: String, _ prefix: String) -> Int? {
        guard mode.hasPrefix(prefix), let n = Int(mode.dropFirst(prefix.count)), (1...32).contains(n) else { return nil }
        return n
    }
}

extension SMPFamily {
    // MARK: Upload

    public func upload(_ part: SMPPart, on link: DFULink, context: PartContext<SMPResume>) async throws(DFUError)
        -> PartOutcome
    {
        let update = context.update
        let client = try await Self.client(on: link, context: update)
        let parameters = await Self.parameters(client)
        let state: SMPImageState
        do {
            state = try SMPImageState(body: try await client.send(.imageState))
        } catch {
            throw Self.map(error)
        }
        if state.slot(withHash: part.hash, image: part.imageIndex) != nil {
            // Already in a slot (uploaded by an earlier run, or running): nothing to send.
            context.progress(PartProgress(bytesConfirmed: part.byteCount, totalBytes: part.byteCount))
            return .staysConnected
        }
        guard var (configuration, limit) = SMPPacing.configuration(update.options.pacing, parameters: parameters, mtu: await link.mtu)
        else {
            throw DFUError(.invalidOption, "--mode \(update.options.pacing) is not an SMP mode (\(SMPPacing.modes))", family: id)
        }
        configuration.image = part.imageIndex
        configuration.upgrade = try Self.upgrade(update.options)
        limit = max(limit, 64)
        let uploader = SMPUploader(client: client, clock: update.clock, logger: update.logger)
        let stop = update.stop.onRequest { uploader.requestStop() }
        let confirmed = ConfirmedOffset()
        let fellToOne = ConfirmedOffset()
        let total = part.byteCount
        let window = configuration.window
        let adaptive = configuration.adaptive
        let result: Result<SMPUploadResult, SMPError>
        do {
            result = .success(
                try await uploader.upload(part.bytes, configuration: configuration, packetLimit: limit) { progress in
                    confirmed.set(progress.offset)
                    context.progress(PartProgress(bytesConfirmed: progress.offset, totalBytes: total))
                    // The adaptive window halves on every loss: say so once when it is down to one request.
                    if adaptive, window > 1, progress.window == 1, fellToOne.value == 0 {
                        fellToOne.set(1)
                        update.emit(
                            .message(
                                "\(part.name): requests were lost at \(progress.offset) bytes; the window fell from \(window) to 1 chunk in flight (it grows back on clean answers)"))
                    }
                })
        } catch {
            result = .failure(error)
        }
        stop.cancel()
        let offset = confirmed.value
        switch result {
        case .success(let upload):
            await context.checkpoint(SMPResume(offset: total), confirmedBytes: total)
            context.progress(PartProgress(bytesConfirmed: total, totalBytes: total, retries: upload.chunksResent, bytesResent: upload.bytesResent))
            return .staysConnected
        case .failure(let error):
            await context.checkpoint(SMPResume(offset: offset), confirmedBytes: offset)
            throw Self.map(configuration.upgrade && offset == 0 ? Self.upgradeRefusal(error, version: part.version) : error)
        }
    }

    /// The device refused the first chunk of an upload sent with `upgrade`: img_mgmt compared the versions (rc 27
    /// CURRENT_VERSION_IS_NEWER in SMP v2; v1 translates it to rc 6 EBADSTATE, which other refusals share).
    static func upgradeRefusal(_ error: SMPError, version: String) -> SMPError {
        guard error.code == .remote else { return error }
        var said = error
        if error.groupError == SMPGroupError(.currentVersionIsNewer) {
            said.reason += ": the upload was sent with `upgrade` (--upgrade, smp.upgrade) and the device runs a version not older than \(version)"
        } else if error.returnCode == .badState {
            said.reason += ": the upload was sent with `upgrade` (--upgrade, smp.upgrade): an SMP v1 device says rc 6 when it runs a version not older than \(version) (or when another state forbids the upload)"
        }
        return said
    }

    // MARK: Finish

    public func finish(_ plan: FamilyPlan<SMPPart>, on link: DFULink?, location: DeviceLocation, context: UpdateContext)
        async throws(DFUError) -> FinishOutcome
    {
        let mode = try Self.confirmMode(context.options)
        let images = plan.parts.map(\.updateImage)
        // After the reset MCUboot swaps (seconds on a large image): the updater looks for the device that long.
        var rebooted = location
        rebooted.searchTime = max(context.options.responseTimeout * 12, .seconds(60))
        let activation = SMPActivation(mode: mode) { [rebooted] () async throws(SMPError) -> SMPClient in
            do throws(DFUError) {
                return try await Self.client(on: try await context.connect(to: rebooted), context: context)
            } catch where error.code == .notFound {
                // Not seen within the reboot timeout: no point in looking again.
                throw SMPError(.disconnected, "the device did not come back after the reset: \(error.message)")
            } catch {
                throw SMPError(.closed, "the device dropped the link after the reset: \(error.message)")
            }
        }
        do {
            let client: SMPClient
            if let link {
                client = try await Self.client(on: link, context: context)
            } else {
                client = try await Self.client(on: try await context.connect(to: location), context: context)
            }
            let state = try SMPImageState(body: try await client.send(.imageState))
            guard mode != .uploadOnly else {
                return FinishOutcome(summary: Self.summary(state))
            }
            let marking = SMPActivation.toMark(images, in: state)
            let running = images.allSatisfy { state.active(image: $0.imageIndex)?.hash == $0.hash }
            if marking.isEmpty, running {
                // A rerun after the reset: confirm what runs unconfirmed.
                let final = try await activation.confirmRunning(images, client: client)
                return FinishOutcome(summary: Self.summary(final))
            }
            let final = try await activation.activate(images, marking: marking, client: client)
            return FinishOutcome(summary: Self.summary(final))
        } catch let error as SMPError {
            throw Self.map(error)
        } catch let error as DFUError {
            throw error
        } catch {
            throw DFUError(.protocolViolation, "\(error)", family: id)
        }
    }

    static func summary(_ state: SMPImageState) -> String {
        state.images.map { "image \($0.image) slot \($0.slot): \($0.version)\($0.active ? ", active" : "")\($0.confirmed ? ", confirmed" : "")\($0.pending ? ", pending" : "")" }
            .joined(separator: "; ")
    }

    // MARK: Helpers

    static func client(on link: DFULink, context: UpdateContext) async throws(DFUError) -> SMPClient {
        let transport: GATTSMPTransport
        do {
            transport = try await GATTSMPTransport.open(client: link.gatt)
        } catch {
            throw error.code == .notSMP ? DFUError(.noUpdateService, error.reason, family: .smp) : map(error)
        }
        return SMPClient(
            transport: transport, configuration: SMPClientConfiguration(timeout: context.options.responseTimeout),
            clock: context.clock, logger: context.logger)
    }

    /// `mcumgr_params`, or nil when the device does not answer it (off by default: ENOTSUP).
    static func parameters(_ client: SMPClient) async -> SMPParameters? {
        guard let body = try? await client.send(.mcumgrParameters, timeout: .seconds(3), retries: 0) else { return nil }
        return try? SMPParameters(body: body)
    }

    /// SMP errors in the family vocabulary (the SMP error stays the cause).
    public static func map(_ error: SMPError) -> DFUError {
        let code: DFUError.Code
        switch error.code {
        case .timeout: code = .timeout
        case .disconnected, .closed: code = .linkLost
        case .remote:
            code = error.groupError == SMPGroupError(.currentVersionIsNewer) ? .alreadyPresent : .remoteRefusal
        case .imageMismatch: code = .verificationFailed
        case .reverted: code = .reverted
        case .notSMP: code = .noUpdateService
        case .stopped: code = .stopped
        case .cancelled: code = .cancelled
        case .invalidArgument: code = .incompatiblePackage
        default: code = .protocolViolation
        }
        return DFUError(code, error.reason, cause: error, family: .smp)
    }
}

/// The last offset the device confirmed, shared with the progress callback.
final class ConfirmedOffset: Sendable {
    private let offset = Mutex(0)
    func set(_ value: Int) { offset.withLock { $0 = value } }
    var value: Int { offset.withLock { $0 } }
}
