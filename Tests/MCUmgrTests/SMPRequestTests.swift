import BLECore
import CBOR
import MCUmgr
import Testing

/// Every command's request, byte for byte (header + CBOR body), as a Zephyr server reads it.
@Suite(.timeLimit(.minutes(2))) struct SMPRequestTests {
    func hex(_ request: SMPRequest, sequence: UInt8 = 0) -> String { request.message(sequence: sequence).encoded().hexString }

    @Test func osCommands() {
        // write v2 os seq 0 id 0 {"d": "hi"}
        #expect(hex(.echo("hi")) == "0a00000600000000a16164626869")
        // write v2 os seq 1 id 5 {}
        #expect(hex(.reset(), sequence: 1) == "0a00000100000105a0")
        // write v2 os id 5 {"force": 1}
        #expect(hex(.reset(force: true)) == "0a00000800000005a165666f72636501")
        // read v2 os id 6 {}
        #expect(hex(.mcumgrParameters) == "0800000100000006a0")
        // read v2 os id 8 {"query": "mode"}
        #expect(hex(.bootloaderInfo(query: "mode")) == "0800000c00000008a1657175657279646d6f6465")
    }

    @Test func imageCommands() {
        // read v2 image id 0 {}
        #expect(hex(.imageState) == "0800000100010000a0")
        // write v2 image id 0 {"hash": h'0102', "confirm": false}
        #expect(hex(.setImageState(hash: [1, 2], confirm: false)) == "0a00001200010000a26468617368420102676" + "36f6e6669726df4")
        // write v2 image id 0 {"confirm": true}
        #expect(hex(.setImageState(hash: nil, confirm: true)) == "0a00000a00010000a167636f6e6669726df5")
        // write v2 image id 5 {"slot": 1}
        #expect(hex(.erase(slot: 1)) == "0a00000700010005a164736c6f7401")
        // write v2 image id 5 {}
        #expect(hex(.erase()) == "0a00000100010005a0")
    }

    @Test func firstUploadChunkCarriesLenShaAndUpgrade() throws {
        let sha = [UInt8](repeating: 0xAB, count: 32)
        let chunk = SMPUploadChunk(offset: 0, data: [0x3D, 0xB8, 0xF3, 0x96][...], length: 1000, sha: sha, upgrade: true)
        let message = try SMPMessage(decoding: SMPRequest.upload(chunk).message(sequence: 4).encoded())
        #expect(message.header.group == .image && message.header.command == 1 && message.header.operation == .write)
        let body = try #require(message.body)
        #expect(body["len"]?.intValue == 1000)
        #expect(body["off"]?.intValue == 0)
        #expect(body["sha"]?.bytesValue == sha)
        #expect(body["data"]?.bytesValue == [0x3D, 0xB8, 0xF3, 0x96])
        #expect(body["upgrade"]?.boolValue == true)
        #expect(body["image"] == nil)
        // Later chunks: off and data only; image 1 is named on the first chunk only.
        let later = SMPUploadChunk(offset: 512, data: [1, 2][...]).body
        #expect(later.mapPairs?.map(\.key) == [.text("off"), .text("data")])
        #expect(SMPUploadChunk(image: 1, offset: 0, data: [][...], length: 1).body["image"]?.intValue == 1)
    }

    @Test func chunkSizeFillsThePacketExactly() {
        let sha = [UInt8](repeating: 0, count: 32)
        for limit in [20, 23, 40, 64, 244, 252, 495, 498, 2475] {
            for first in [true, false] {
                for total in [100, 70_000, 400_000] {
                    guard let n = SMPUploadChunk.maximumDataLength(
                        packetLimit: limit, totalLength: total, image: nil, sha: sha, upgrade: true, first: first)
                    else {
                        #expect(limit <= 64, "limit \(limit) must fit a chunk")
                        continue
                    }
                    let at = first ? 0 : total - 1
                    let data = [UInt8](repeating: 0, count: n)[...]
                    let fits = SMPUploadChunk(offset: at, data: data, length: first ? total : nil, sha: first ? sha : nil, upgrade: first ? true : nil)
                    let size = SMPRequest.upload(fits).message(sequence: 0).encoded().count
                    #expect(size <= limit, "limit \(limit) first \(first) total \(total): \(n) bytes give \(size)")
                    let more = [UInt8](repeating: 0, count: n + 1)[...]
                    let over = SMPUploadChunk(offset: at, data: more, length: first ? total : nil, sha: first ? sha : nil, upgrade: first ? true : nil)
                    #expect(SMPRequest.upload(over).message(sequence: 0).encoded().count > limit || n + 1 > limit)
                }
            }
        }
    }

    @Test func responsesDecode() throws {
        let state = try SMPImageState(body: .textMap([
            "images": .array([
                .textMap(["slot": .unsigned(0), "version": .text("1.0.0"), "hash": .bytes([1]), "bootable": .bool(true),
                          "confirmed": .bool(true), "active": .bool(true)]),
                // FRUGAL_LIST: false flags omitted
                .textMap(["slot": .unsigned(1), "version": .text("1.1.0.7"), "hash": .bytes([2]), "pending": .bool(true)]),
            ]),
            "splitStatus": .unsigned(0),
        ]))
        #expect(state.images.count == 2)
        #expect(state.active()?.version == "1.0.0")
        #expect(state.slot(withHash: [2])?.pending == true)
        #expect(state.slot(withHash: [2])?.confirmed == false)
        #expect(state.splitStatus == 0)
        #expect(throws: SMPError(.protocolViolation, "")) { try SMPImageState(body: .textMap(["images": .unsigned(1)])) }
        #expect(try SMPUploadResponse(body: .textMap(["off": .unsigned(512), "match": .bool(true)])) == SMPUploadResponse(offset: 512, match: true))
        #expect(throws: SMPError(.protocolViolation, "")) { try SMPUploadResponse(body: .textMap(["off": .int(-1)])) }
        #expect(try SMPParameters(body: .textMap(["buf_size": .unsigned(2475), "buf_count": .unsigned(4)])) == SMPParameters(bufferSize: 2475, bufferCount: 4))
    }
}
