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
    public static let modes = "adaptive, window:N (1-32), one-at-a-time, mcumgr-cli, nordic"

    /// adaptive (default): the device's buf_count − 1 in flight, halved on losses; `window:N` fixed; `one-at-a-time`;
    /// `mcumgr-cli` (one at a time, 512-byte SMP packets at most, as newtmgr's findChunkLen); `nordic` (Nordic's
    /// pipelined settings: window 3, buf_size packets, fixed).
    public static func configuration(_ mode: String, parameters: SMPParameters?, mtu: Int)
        -> (upload: SMPUploadConfiguration, packetLimit: Int)?
    {
        let deviceWindow = max(1, (parameters?.bufferCount ?? 2) - 1)
        let limit = SMPUploader.packetLimit(mtu: mtu, parameters: parameters)
        switch mode {
        case "adaptive", "": return (SMPUploadConfiguration(window: deviceWindow, adaptive: true), limit)
        case "one-at-a-time": return (SMPUploadConfiguration(window: 1, adaptive: false), limit)
        case "mcumgr-cli": return (SMPUploadConfiguration(window: 1, adaptive: false), min(mtu - 3, 512))
        case "nordic": return (SMPUploadConfiguration(window: min(3, deviceWindow), adaptive: false), limit)
        default:
            guard mode.hasPrefix("window:"), let n = Int(mode.dropFirst(7)), (1...32).contains(n) else { return nil }
            return (SMPUploadConfiguration(window: n, adaptive: false), limit)
        }
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
        limit = max(limit, 64)
        let uploader = SMPUploader(client: client, clock: update.clock, logger: update.logger)
        let stop = update.stop.onRequest { uploader.requestStop() }
        let confirmed = ConfirmedOffset()
        let total = part.byteCount
        let result: Result<SMPUploadResult, SMPError>
        do {
            result = .success(
                try await uploader.upload(part.bytes, configuration: configuration, packetLimit: limit) { progress in
                    confirmed.set(progress.offset)
                    context.progress(PartProgress(bytesConfirmed: progress.offset, totalBytes: total))
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
            throw Self.map(error)
        }
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
