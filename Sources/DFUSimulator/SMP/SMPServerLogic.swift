import CBOR
import Crypto
import MCUbootImage
import MCUmgr

/// The upload in progress (`g_img_mgmt_state`, RAM: lost on reset).
public struct SMPUploadState: Codable, Sendable, Hashable {
    public var image: Int
    public var offset: Int
    public var length: Int
    public var sha: [UInt8]
}

/// What handling one request produced.
struct SMPServerReply: Sendable {
    /// The response message (nil: none is sent).
    var response: SMPMessage?
    /// Flash time spent (erase and write), microseconds.
    var flashMicros: Double = 0
    /// Reset after the response was sent (`os_mgmt` reset).
    var reset = false
    /// Upload data bytes written by this request.
    var bytesWritten = 0
}

/// Zephyr's SMP server (`smp.c`) with the OS and image groups (`os_mgmt.c`, `img_mgmt.c`, `zephyr_img_mgmt.c`,
/// `img_mgmt_state.c`) over MCUboot's slots, as a value. Every rule cites smp-mcuboot.md.
struct SMPServerLogic: Sendable {
    let profile: SMPDeviceProfile
    var pairs: [MCUbootImagePair]
    var upload: SMPUploadState?

    init(profile: SMPDeviceProfile, pairs: [MCUbootImagePair]) {
        self.profile = profile
        self.pairs = pairs
    }

    /// A group error in the request's SMP version (§2.3): v2 `{"err": {group, rc}}`, v1 the translated `rc`.
    enum Failure: Error {
        case generic(SMPReturnCode)
        case image(ImageManagementCode)
    }

    mutating func handle(_ request: SMPMessage) -> SMPServerReply {
        let header = request.header
        // §2.1: a version above v2 is refused with UNSUPPORTED_TOO_NEW; the answer's version is min(request, v2).
        let version = min(header.version, profile.smp.smpV2 ? .v2 : .v1)
        guard let op = header.operation.response else { return SMPServerReply(response: nil) }
        func respond(_ body: CBOR) -> SMPMessage {
            SMPMessage(op, group: header.group, command: header.command, sequence: header.sequence, version: version, body: body)
        }
        if header.version > .v2 { return SMPServerReply(response: respond(.textMap(["rc": .int(SMPReturnCode.unsupportedTooNew.rawValue)]))) }
        let body = request.body ?? .map([])
        var reply = SMPServerReply()
        do throws(Failure) {
            let answer: CBOR
            switch (header.group, header.command, header.operation) {
            case (.os, SMPCommand.OS.echo, .write):
                guard let text = body["d"]?.textValue else { throw Failure.generic(.invalidValue) }
                answer = .textMap(["r": .text(text)])
            case (.os, SMPCommand.OS.reset, .write):
                reply.reset = true
                answer = .map([])
            case (.os, SMPCommand.OS.mcumgrParameters, .read) where profile.smp.mcumgrParameters:
                answer = .textMap(["buf_size": .int(profile.smp.bufferSize), "buf_count": .int(profile.smp.bufferCount)])
            case (.os, SMPCommand.OS.bootloaderInfo, .read) where profile.smp.bootloaderInfo:
                switch body["query"]?.textValue {
                case nil: answer = .textMap(["bootloader": .text("MCUboot")])
                case "mode":
                    // Swap without scratch (move). `no-downgrade` as an application built with
                    // CONFIG_MCUBOOT_BOOTLOADER_NO_DOWNGRADE sends it: here with MCUboot's downgrade prevention.
                    answer =
                        profile.mcuboot.downgradePrevention
                        ? .textMap(["mode": .int(profile.mcuboot.mode), "no-downgrade": .bool(true)]) : .textMap(["mode": .int(profile.mcuboot.mode)])
                default: throw Failure.generic(.invalidValue)
                }
            case (.image, SMPCommand.Image.state, .read):
                answer = stateList()
            case (.image, SMPCommand.Image.state, .write):
                try writeState(body)
                answer = stateList()
            case (.image, SMPCommand.Image.upload, .write):
                answer = try receiveChunk(body, reply: &reply)
            case (.image, SMPCommand.Image.erase, .write):
                answer = try erase(body, reply: &reply)
            default:
                // §2.1: unknown group/id, or no handler for the operation → ENOTSUP.
                throw Failure.generic(.notSupported)
            }
            reply.response = respond(answer)
        } catch {
            switch error {
            case .generic(let rc):
                reply.response = respond(.textMap(["rc": .int(rc.rawValue)]))
            case .image(let code) where version >= .v2:
                reply.response = respond(.textMap(["err": .textMap(["group": .int(1), "rc": .int(code.rawValue)])]))
            case .image(let code):
                reply.response = respond(.textMap(["rc": .int(code.smpV1Code.rawValue)]))
            }
        }
        return reply
    }

    // MARK: - Image state (§3)

    func stateList() -> CBOR {
        let entries = pairs.enumerated().flatMap { $0.element.stateEntries(image: $0.offset) }
        let several = pairs.count > 1
        return .textMap(["images": .array(entries.map { $0.body(includeImage: several) }), "splitStatus": .int(0)])
    }

    /// `img_mgmt_state_write` (§3.2).
    mutating func writeState(_ body: CBOR) throws(Failure) {
        let confirm = body["confirm"]?.boolValue ?? false
        guard let hash = body["hash"]?.bytesValue else {
            guard confirm else { throw .image(.invalidHash) }
            for index in pairs.indices { pairs[index].confirmPrimary() }  // confirm the running image(s)
            return
        }
        guard hash.count == 32 else { throw .image(.invalidHash) }
        for index in pairs.indices {
            if pairs[index].primary.image?.hashTLV == hash {
                guard confirm else { throw .image(.imageSettingTestToActiveDenied) }
                pairs[index].confirmPrimary()
                return
            }
            if pairs[index].secondary.image?.hashTLV == hash {
                switch pairs[index].swapType {
                case .permanent, .revert: throw .image(.imageAlreadyPending)
                case .test:
                    if confirm { pairs[index].secondary.trailer.imageOK = true }
                case .none:
                    // boot_set_next: magic, swap_info, and image_ok for a permanent request.
                    pairs[index].secondary.trailer = MCUbootTrailer(magic: true, imageOK: confirm)
                }
                return
            }
        }
        throw .image(.hashNotFound)
    }

    // MARK: - Upload (§4)

    /// `img_mgmt_upload` + `img_mgmt_upload_inspect`.
    mutating func receiveChunk(_ body: CBOR, reply: inout SMPServerReply) throws(Failure) -> CBOR {
        guard let offset = body["off"]?.intValue, offset >= 0 else { throw .image(.invalidOffset) }
        let data = body["data"]?.bytesValue ?? []
        if offset == 0 {
            if let present = try startUpload(body, data: data, reply: &reply) { return present }
        } else {
            // Continuation: another offset than expected is not an error; the answer names the expected one (and
            // with no upload in progress the expected offset is 0).
            guard let state = upload, offset == state.offset else {
                return .textMap(["off": .int(upload?.offset ?? 0)])
            }
            guard offset + data.count <= state.length else { throw .image(.invalidImageDataOverrun) }
        }
        guard var state = upload else { throw .image(.flashContextNotSet) }
        if offset == 0, state.offset > 0 { return .textMap(["off": .int(state.offset)]) }  // resume (same sha)
        let slot = pairs[state.image].secondary
        var bytes = slot.bytes ?? []
        if bytes.count < state.offset + data.count { bytes += [UInt8](repeating: 0xFF, count: state.offset + data.count - bytes.count) }
        bytes.replaceSubrange(state.offset..<(state.offset + data.count), with: data)
        if profile.smp.eraseProgressively {
            let before = (state.offset + profile.mcuboot.pageSize - 1) / profile.mcuboot.pageSize
            let after = (state.offset + data.count + profile.mcuboot.pageSize - 1) / profile.mcuboot.pageSize
            reply.flashMicros += Double(after - before) * profile.mcuboot.pageEraseMicros
        }
        pairs[state.image].secondary.bytes = bytes
        reply.flashMicros += profile.mcuboot.writeMicros(bytes: data.count)
        reply.bytesWritten = data.count
        state.offset += data.count
        guard state.offset == state.length else {
            upload = state
            return .textMap(["off": .int(state.offset)])
        }
        // §4.3: the last chunk clears the upload state; `match` with IMG_ENABLE_IMAGE_CHECK.
        upload = nil
        var answer: [CBOR.Pair] = [CBOR.Pair(.text("off"), .int(state.offset))]
        if profile.smp.imageCheck, state.sha.count == 32 {
            answer.append(CBOR.Pair(.text("match"), .bool(Array(SHA256.hash(data: bytes.prefix(state.length))) == state.sha)))
        }
        return .map(answer)
    }

    /// The first chunk: the checks of `img_mgmt_upload_inspect` in its order, then resume or erase. Returns the
    /// answer when the slot already holds exactly this file (`img_mgmt_upload` with IMG_ENABLE_IMAGE_CHECK:
    /// `off` = `len`, `match: true` at once, nothing erased or written; smp-mcuboot.md §4.3).
    mutating func startUpload(_ body: CBOR, data: [UInt8], reply: inout SMPServerReply) throws(Failure) -> CBOR? {
        guard data.count >= 32 else { throw .image(.invalidImageHeader) }
        guard let length = body["len"]?.intValue, length > 0 else { throw .image(.invalidLength) }
        guard data.prefix(4).elementsEqual([0x3D, 0xB8, 0xF3, 0x96]) else { throw .image(.invalidImageHeaderMagic) }
        let sha = body["sha"]?.bytesValue ?? []
        guard sha.count <= 32 else { throw .image(.invalidHash) }
        // Resume: the same `sha` and `len` as the upload in progress (§4.2).
        if !sha.isEmpty, let state = upload, state.sha == sha, state.length == length { return nil }
        let image = body["image"]?.intValue ?? 0
        guard pairs.indices.contains(image) else { throw .image(.invalidSlot) }
        // img_mgmt_get_unused_slot_area_id: the secondary holds the image needed for a revert.
        guard pairs[image].swapType != .revert else { throw .image(.noFreeSlot) }
        guard length <= profile.mcuboot.slotSize else { throw .image(.invalidImageTooLarge) }
        if body["upgrade"]?.boolValue == true, let running = pairs[image].primary.image,
            let header = try? MCUbootHeader(decoding: data[...]),
            MCUbootVersion.compare(running.header.version, header.version, useBuild: false) >= 0
        {
            throw .image(.currentVersionIsNewer)
        }
        if profile.smp.imageCheck, sha.count == 32, let held = pairs[image].secondary.bytes, held.count >= length,
            Array(SHA256.hash(data: held.prefix(length))) == sha
        {
            upload = nil
            return .map([CBOR.Pair(.text("off"), .int(length)), CBOR.Pair(.text("match"), .bool(true))])
        }
        if !profile.smp.eraseProgressively {
            // img_mgmt_erase_image_data: the image length rounded to pages plus the trailer's page.
            reply.flashMicros += profile.mcuboot.eraseMicros(bytes: length) + profile.mcuboot.pageEraseMicros
        }
        pairs[image].secondary = MCUbootSlot(bytes: [])
        upload = SMPUploadState(image: image, offset: 0, length: length, sha: sha)
        return nil
    }

    /// `img_mgmt_erase`: the other slot by default; a slot in use is refused; any upload is reset.
    mutating func erase(_ body: CBOR, reply: inout SMPServerReply) throws(Failure) -> CBOR {
        let slot = body["slot"]?.intValue ?? 1
        guard slot >= 0, slot < pairs.count * 2 else { throw .image(.invalidSlot) }
        guard slot % 2 == 1, pairs[slot / 2].swapType != .revert else { throw .image(.noFreeSlot) }
        upload = nil
        pairs[slot / 2].secondary = MCUbootSlot()
        reply.flashMicros += profile.mcuboot.eraseMicros(bytes: profile.mcuboot.slotSize)
        return .map([])
    }
}
