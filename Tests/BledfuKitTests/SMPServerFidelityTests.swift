import ATT
import BLECore
import BledfuTestSupport
import CBOR
import Crypto
import DFUSimulator
import GATT
import MCUbootImage
import MCUmgr
import Testing
import VirtualRadio

/// The virtual SMP device where Zephyr's img_mgmt and smp_bt do something a host can see (smp-mcuboot.md §4.2,
/// §4.3, §5.2): the image check's answer for a slot that already holds the file, a resume only for the same `sha`
/// and `len`, a half-reassembled request dropped when notifications are turned off, and the bootloader mode the
/// profile declares. The device is ``SMPKitBench``'s; an upload that must be done first goes through the shipped
/// ``Updater`` (`smp.confirm=upload-only`).
@Suite(.timeLimit(.minutes(5))) struct SMPServerFidelityTests {
    /// A connection with its GATT transport exposed (for raw writes and the CCCD).
    /// Every host wait only bounds a hang (the suite runs beside CPU hogs).
    static let deadline: Duration = .seconds(120)

    /// A hash-only MCUboot image as SMP uploads it.
    static func image(size: Int) throws -> SMPUpdateImage {
        let image = try SMPKitBench.image(size: size)
        return SMPUpdateImage(imageIndex: 0, bytes: image.bytes, hash: image.hashTLV ?? [], version: "1.1.0")
    }

    static func open(_ bench: SMPKitBench) async throws -> (SMPClient, GATTSMPTransport) {
        let (host, device) = try SeqPacketBearer.makePair(linkInfo: LinkInfo(maximumPDUSize: 517))
        let virtual = bench.device
        Task { await virtual.serve(device) }
        let att = ATTClient(bearer: host, transactionTimeout: Self.deadline, clock: ContinuousClock())
        try await att.exchangeMTU()
        let transport = try await GATTSMPTransport.open(client: GATTClient(att: att))
        return (SMPClient(transport: transport, configuration: SMPClientConfiguration(timeout: Self.deadline, retries: 2), clock: ContinuousClock()), transport)
    }

    static func first(_ image: SMPUpdateImage, length: Int? = nil, sha: [UInt8]? = nil) -> SMPRequest {
        .upload(
            SMPUploadChunk(
                offset: 0, data: image.bytes[0..<512], length: length ?? image.bytes.count,
                sha: sha ?? Array(SHA256.hash(data: image.bytes))))
    }

    /// IMG_ENABLE_IMAGE_CHECK: an upload of the file the secondary slot already holds is answered `off` = `len`,
    /// `match: true` at once; nothing is erased or written.
    @Test func aSlotThatHoldsTheFileAnswersAtOnce() async throws {
        let bench = SMPKitBench()
        let file = try SMPKitBench.image(size: 30_000)
        let image = try Self.image(size: 30_000)
        let upload = await bench.update(SyntheticPackage.source(file.bytes, fileName: "app.bin"), confirm: "upload-only")
        _ = try upload.result.get()
        let written = await bench.device.state().counters.uploadBytesWritten
        let (client, _) = try await Self.open(bench)
        let answer = try SMPUploadResponse(body: try await client.send(Self.first(image)))
        #expect(answer.offset == image.bytes.count && answer.match == true, "\(answer)")
        let state = await bench.device.state()
        #expect(state.counters.uploadBytesWritten == written && state.upload == nil, "\(state.counters)")
        #expect(await bench.device.imageState().slot(withHash: image.hash, image: 0)?.slot == 1)
    }

    /// A first chunk with the `sha` of the upload in progress but another `len` is a new upload (erase, offset 512),
    /// not a resume; with the same `len` it resumes at the held offset.
    @Test func resumeNeedsTheSameLength() async throws {
        let bench = SMPKitBench()
        let image = try Self.image(size: 30_000)
        let (client, _) = try await Self.open(bench)
        _ = try await client.send(Self.first(image))
        _ = try await client.send(.upload(SMPUploadChunk(offset: 512, data: image.bytes[512..<2048])))
        let resumed = try SMPUploadResponse(body: try await client.send(Self.first(image)))
        #expect(resumed.offset == 2048)
        let other = try SMPUploadResponse(body: try await client.send(Self.first(image, length: image.bytes.count + 4)))
        #expect(other.offset == 512, "\(other)")
        #expect(await bench.device.state().upload?.length == image.bytes.count + 4)
    }

    /// The first fragment of a request, then notifications off and on again: the fragment is dropped
    /// (`smp_bt_ccc_changed`), so the next request is whole and answered. Kept, it would prefix the next one, whose
    /// length would then not match, and nothing would be answered.
    @Test func notificationsOffDropAHalfReassembledRequest() async throws {
        let bench = SMPKitBench()
        let (client, transport) = try await Self.open(bench)
        let message = SMPMessage(.write, group: .os, command: 0, sequence: 200, body: .textMap(["d": .text(String(repeating: "z", count: 600))]))
        let bytes = message.encoded()
        try await transport.client.writeWithoutResponse(handle: transport.characteristic.valueHandle, value: Array(bytes.prefix(200)))
        try await transport.client.setNotifications(false, of: transport.characteristic)
        try await transport.client.setNotifications(true, of: transport.characteristic)
        let echo = try SMPEchoResponse(body: try await client.send(.echo("after"), timeout: .seconds(30), retries: 0))
        #expect(echo.text == "after")
    }

    /// Bootloader information's mode is the profile's (`bootloader_mode`), swap without scratch (3) by default.
    @Test(arguments: [3, 5])
    func bootloaderModeComesFromTheProfile(mode: Int) async throws {
        var profile = SMPKitBench.profile()
        profile.mcuboot.mode = mode
        let bench = SMPKitBench(profile: profile)
        let (client, _) = try await Self.open(bench)
        let info = SMPBootloaderInfo(body: try await client.send(.bootloaderInfo(query: "mode")))
        #expect(info.mode == mode)
        #expect(SMPBootloaderInfo(body: try await client.send(.bootloaderInfo())).name == "MCUboot")
    }
}
