import CBOR
import MCUmgr

/// The most an SMP host can carry over a modelled SMP device: the *SMP bound* (the SMP counterpart of
/// ``ProtocolBound``), computed on the same model the virtual device runs (``VirtualSMPDevice``: its link pacer and
/// its flash times), so `bledfu bench` can say how close an upload came.
///
/// The ideal host sends requests of the device's `buf_size` (`mcumgr_params`; Zephyr reassembles the ATT_MTU − 3
/// fragments), with the largest `data` that fits (``SMPUploadChunk/maximumDataLength(packetLimit:totalLength:image:sha:upgrade:first:)``):
///
/// 1. The first chunk goes alone: its fragments over the link, then `img_mgmt_erase_image_data` erases the image's
///    pages (plus the trailer's) before the chunk is written (`erase_progressively` off), then the answer's
///    notification. Every later chunk waits for it (its `off` says where the device stands).
/// 2. Then the link and the flash work in parallel (requests pipelined, at most `buf_count` − 1 in flight): each
///    chunk costs the link its fragments plus its answer's notification, and the flash its word writes, one request
///    at a time on the "mcumgr smp" work queue. A chunk costs `max(link, flash)`.
/// 3. The last answer ends the upload.
///
/// One request at a time (the mcumgr CLI) costs `link + flash` per chunk on the same model. The model has no
/// turnaround latency between a notification and the next write (the virtual device's pacer books air time only),
/// so on real links one-at-a-time is slower than this figure, and the factor between the two larger.
public struct SMPBound: Sendable, Hashable, Codable {
    /// `data` bytes of a full chunk, and of the first one (which also carries `len` and `sha`).
    public var chunkBytes: Int
    public var firstChunkBytes: Int
    /// Write Commands per request.
    public var writesPerChunk: Int
    /// Link time of one full chunk (its fragments and its answer), µs.
    public var chunkLinkMicros: Double
    /// Flash time of one full chunk, µs.
    public var chunkFlashMicros: Double
    /// The first chunk with the erase, µs.
    public var firstChunkMicros: Double
    /// The whole upload, pipelined, µs.
    public var uploadMicros: Double
    /// Image bytes per second, pipelined: the bound.
    public var bytesPerSecond: Double
    /// Image bytes per second with one request at a time on the same model.
    public var oneAtATimeBytesPerSecond: Double
}

extension SMPDeviceProfile {
    /// The SMP bound of an upload of `imageBytes` at ATT_MTU `mtu` (default: the profile's largest), with requests
    /// of at most `packetLimit` bytes (default: `buf_size` when the device tells it, else one write).
    public func smpBound(imageBytes: Int, mtu: Int? = nil, packetLimit: Int? = nil) -> SMPBound {
        let model = LinkModel(link: link, flash: FlashParameters())
        let mtu = min(max(mtu ?? link.maxMTU, 23), max(link.maxMTU, 23))
        let fragment = max(mtu - 3, 20)
        let limit = packetLimit ?? (smp.mcumgrParameters && smp.reassembly ? smp.bufferSize : min(fragment, smp.bufferSize))
        let sha = [UInt8](repeating: 0xA5, count: 32)
        let first =
            SMPUploadChunk.maximumDataLength(
                packetLimit: limit, totalLength: imageBytes, image: nil, sha: sha, upgrade: nil, first: true) ?? 1
        let later =
            SMPUploadChunk.maximumDataLength(
                packetLimit: limit, totalLength: imageBytes, image: nil, sha: nil, upgrade: nil, first: false) ?? 1
        func linkMicros(data: Int, firstChunk: Bool) -> (Double, Int) {
            let chunk = SMPUploadChunk(
                image: nil, offset: firstChunk ? 0 : imageBytes, data: [UInt8](repeating: 0, count: data)[...],
                length: firstChunk ? imageBytes : nil, sha: firstChunk ? sha : nil, upgrade: nil)
            let request = SMPHeader.size + chunk.body.encoded().count
            var micros = 0.0
            var writes = 0
            for start in stride(from: 0, to: request, by: fragment) {
                micros += model.writeCommandMicros(attBytes: min(fragment, request - start) + 3)
                writes += 1
            }
            // The answer: {"rc": 0, "off": n} in one notification.
            let answer = SMPHeader.size + CBOR.textMap(["rc": .int(0), "off": .int(imageBytes)]).encoded().count
            micros += model.writeCommandMicros(attBytes: min(answer, fragment) + 3)
            return (micros, writes)
        }
        let (firstLink, _) = linkMicros(data: first, firstChunk: true)
        let (chunkLink, writes) = linkMicros(data: later, firstChunk: false)
        let chunkFlash = mcuboot.writeMicros(bytes: later)
        let erase = smp.eraseProgressively ? 0 : mcuboot.eraseMicros(bytes: imageBytes) + mcuboot.pageEraseMicros
        let firstChunk = firstLink + erase + mcuboot.writeMicros(bytes: min(first, imageBytes))
        let rest = max(imageBytes - first, 0)
        let fullChunks = rest / max(later, 1)
        let tail = rest - fullChunks * later
        var pipelined = firstChunk + Double(fullChunks) * max(chunkLink, chunkFlash)
        var serial = firstChunk + Double(fullChunks) * (chunkLink + chunkFlash)
        if tail > 0 {
            let (tailLink, _) = linkMicros(data: tail, firstChunk: false)
            let tailFlash = mcuboot.writeMicros(bytes: tail)
            pipelined += max(tailLink, tailFlash)
            serial += tailLink + tailFlash
        }
        func rate(_ micros: Double) -> Double { micros > 0 ? Double(imageBytes) * 1_000_000 / micros : 0 }
        return SMPBound(
            chunkBytes: later, firstChunkBytes: first, writesPerChunk: writes, chunkLinkMicros: chunkLink,
            chunkFlashMicros: chunkFlash, firstChunkMicros: firstChunk, uploadMicros: pipelined,
            bytesPerSecond: rate(pipelined), oneAtATimeBytesPerSecond: rate(serial))
    }
}
