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

/// What ``SMPFamily`` does after the uploads (smp-mcuboot.md §6.3, its ``DFUFamily/finish(_:on:location:context:)``):
/// mark the images for test (or permanent), reset, reconnect, check that the running images are the package's and
/// confirm them, per the mode. The updater owns the rest of the flow (connections, the uploads, lost links and
/// resumes); `reconnect` is its connection to the device after the reset (it waits for the device's advertisement
/// on the update's clock, with the update's deadlines: no polling here).
struct SMPActivation {
    let mode: SMPUpgradeMode
    let reconnect: @Sendable () async throws(SMPError) -> SMPClient

    /// Marks `marking` for test (or permanent), resets, reconnects, checks that the running images are `images`
    /// and confirms them (per the mode). With nothing to mark, resets into what is pending (a rerun after a kill
    /// between marking and reset). Closes `client`. Returns the final image state.
    func activate(_ images: [SMPUpdateImage], marking: [SMPUpdateImage], client: SMPClient) async throws(SMPError)
        -> SMPImageState
    {
        var client = client
        var state: SMPImageState
        let permanent = mode == .confirmOnly
        for image in marking {
            state = try SMPImageState(body: try await client.send(.setImageState(hash: image.hash, confirm: permanent)))
            // Re-read the flags after every state write (Android PR #306: no change means refused).
            guard let slot = state.slot(withHash: image.hash, image: image.imageIndex), slot.pending else {
                await client.close()
                throw SMPError(.remote, "the device did not mark image \(image.imageIndex) pending")
            }
        }
        do {
            try await client.send(.reset())
        } catch where error.code == .disconnected || error.code == .timeout {
            // The device may reset before its answer is out.
        }
        await client.close()
        (client, state) = try await reconnected()
        for image in images {
            guard let active = state.active(image: image.imageIndex), active.hash == image.hash else {
                let running = state.active(image: image.imageIndex)
                await client.close()
                throw SMPError(
                    .reverted,
                    "image \(image.imageIndex): the device runs \(running.map { "\($0.version) (\(Self.hex($0.hash).prefix(16))…)" } ?? "no image"), not \(image.version): MCUboot refused or reverted the new image")
            }
            if mode == .testAndConfirm, !active.confirmed {
                state = try await confirm(client, image)
            }
        }
        await client.close()
        return state
    }

    /// Links tried after the reset: the device may reset only after the first new link came up (it answered the
    /// reset request first), which drops that link; the next attempt waits on the adapter for the device again.
    /// `reconnect` throws `.closed` for such a link and `.disconnected` when the device was not found (no retry).
    static let reconnectAttempts = 3

    /// The device after its reset: a new link and its image state. Each attempt waits on the updater's connection
    /// (its scan and connect, on the update's clock), never on a timer of its own.
    func reconnected() async throws(SMPError) -> (SMPClient, SMPImageState) {
        var attempt = 1
        while true {
            let client: SMPClient
            do {
                client = try await reconnect()
            } catch where error.code == .closed && attempt < Self.reconnectAttempts {
                attempt += 1  // found, then dropped: the reset came after the link
                continue
            }
            do {
                return (client, try await readState(client))
            } catch where [.disconnected, .closed].contains(error.code) && attempt < Self.reconnectAttempts {
                await client.close()
                attempt += 1
            } catch {
                await client.close()
                throw error
            }
        }
    }

    /// Confirms the running images that are not confirmed yet (a rerun after the reset). Closes `client`.
    func confirmRunning(_ images: [SMPUpdateImage], client: SMPClient) async throws(SMPError) -> SMPImageState {
        var state = try await readState(client)
        if mode == .testAndConfirm {
            for image in images where state.active(image: image.imageIndex)?.confirmed == false {
                state = try await confirm(client, image)
            }
        }
        await client.close()
        return state
    }

    /// The images to mark after their upload: in the secondary slot and not pending yet (`state` read after the
    /// uploads).
    static func toMark(_ images: [SMPUpdateImage], in state: SMPImageState) -> [SMPUpdateImage] {
        images.filter { image in
            guard let slot = state.slot(withHash: image.hash, image: image.imageIndex) else { return false }
            return slot.slot != 0 && !slot.pending
        }
    }

    func readState(_ client: SMPClient) async throws(SMPError) -> SMPImageState {
        try SMPImageState(body: try await client.send(.imageState))
    }

    func confirm(_ client: SMPClient, _ image: SMPUpdateImage) async throws(SMPError) -> SMPImageState {
        let state = try SMPImageState(body: try await client.send(.setImageState(hash: image.hash, confirm: true)))
        guard let active = state.active(image: image.imageIndex), active.hash == image.hash, active.confirmed else {
            await client.close()
            throw SMPError(.remote, "the device did not confirm image \(image.imageIndex)")
        }
        return state
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format2: $0) }.joined() }
}

extension String {
    init(format2 byte: UInt8) {
        let digits = Array("0123456789abcdef")
        self = String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }
}
