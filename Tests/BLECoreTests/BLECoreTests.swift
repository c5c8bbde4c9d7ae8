import Testing

@testable import BLECore

@Suite(.timeLimit(.minutes(2))) struct ByteReaderTests {
    @Test func readsLittleEndianFields() throws {
        // 01 | 34 12 | 78 56 34 12 | AA BB
        var r = ByteReader([0x01, 0x34, 0x12, 0x78, 0x56, 0x34, 0x12, 0xAA, 0xBB])
        #expect(try r.readUInt8("a") == 0x01)
        #expect(try r.readUInt16("b") == 0x1234)
        #expect(try r.readUInt32("c") == 0x1234_5678)
        #expect(r.readRemaining() == [0xAA, 0xBB])
        #expect(r.isAtEnd)
    }

    @Test func truncationNamesTheField() {
        var r = ByteReader([0x01, 0x02, 0x03])
        let error = #expect(throws: ByteReader.Truncated.self) { try r.readUInt32("offset") }
        #expect(r.offset == 0, "a failed read consumes nothing")
        #expect(error?.code == .truncated)
        #expect(error?.field == "offset" && error?.needed == 4 && error?.available == 3)
        #expect(error?.message == "offset needs 4 byte(s), 3 left")
        #expect(error?.description == "truncated: offset needs 4 byte(s), 3 left")
    }

    @Test func writerIsTheInverseOfTheReader() throws {
        var w = ByteWriter()
        w.write(UInt8(0x60))
        w.write(UInt16(0xBEEF))
        w.write(UInt32(0xDEAD_BEEF))
        w.write(UInt64(0x0102_0304_0506_0708))
        #expect(w.bytes == [0x60, 0xEF, 0xBE, 0xEF, 0xBE, 0xAD, 0xDE, 8, 7, 6, 5, 4, 3, 2, 1])
        var r = ByteReader(w.bytes)
        #expect(try r.readUInt8("") == 0x60)
        #expect(try r.readUInt16("") == 0xBEEF)
        #expect(try r.readUInt32("") == 0xDEAD_BEEF)
        #expect(try r.readUInt64("") == 0x0102_0304_0506_0708)
    }

    @Test func hex() {
        #expect([UInt8]([0x0A, 0xFF, 0x00]).hexString == "0aff00")
        #expect([UInt8](hexString: "0A ff:00") == [0x0A, 0xFF, 0x00])
        #expect([UInt8](hexString: "0af") == nil)
        #expect([UInt8](hexString: "zz") == nil)
    }
}

@Suite(.timeLimit(.minutes(2))) struct AddressTests {
    @Test func parsesAndPrints() throws {
        let address = try #require(BluetoothAddress("c0:ff:ee:00:00:01"))
        #expect(address.description == "C0:FF:EE:00:00:01")
        #expect(address.littleEndianBytes == [0x01, 0x00, 0x00, 0xEE, 0xFF, 0xC0])
        #expect(BluetoothAddress(littleEndianBytes: address.littleEndianBytes) == address)
        #expect(BluetoothAddress("C0-FF-EE-00-00-01") == address)
    }

    @Test(arguments: ["", "C0:FF:EE:00:00", "C0:FF:EE:00:00:01:02", "C0:FF:EE:00:00:GG", "C0:FF:EE:00:00:1", "C0FFEE000001"])
    func rejectsBadText(_ text: String) {
        #expect(BluetoothAddress(text) == nil)
    }

    @Test func bootloaderAddressIncrementsTheLowByteWithoutCarry() throws {
        // nRF5 SDK gap_address_change: addr[0] += 1 (least significant byte), no carry into the next byte.
        #expect(try #require(BluetoothAddress("C0:FF:EE:00:00:01")).nordicBootloaderAddress.description == "C0:FF:EE:00:00:02")
        #expect(try #require(BluetoothAddress("C0:FF:EE:00:12:FF")).nordicBootloaderAddress.description == "C0:FF:EE:00:12:00")
    }
}

@Suite(.timeLimit(.minutes(2))) struct UUIDTests {
    @Test func shortAndLongFormsAreEqual() throws {
        let short = BluetoothUUID(0xFE59)
        let long = try #require(BluetoothUUID("0000FE59-0000-1000-8000-00805F9B34FB"))
        #expect(short == long)
        #expect(short.description == "FE59")
        #expect(short.shortestLittleEndianBytes == [0x59, 0xFE])
        #expect(BluetoothUUID(littleEndianBytes: [0x59, 0xFE]) == short)
    }

    @Test func vendorUUIDRoundTrips() throws {
        let uuid = try #require(BluetoothUUID("8EC90001-F315-4F60-9FB8-838830DAEA50"))
        #expect(uuid.uuid16 == nil)
        #expect(uuid.description == "8EC90001-F315-4F60-9FB8-838830DAEA50")
        #expect(uuid.shortestLittleEndianBytes.count == 16)
        #expect(uuid.shortestLittleEndianBytes.first == 0x50)
        #expect(BluetoothUUID(littleEndianBytes: uuid.shortestLittleEndianBytes) == uuid)
    }

    @Test(arguments: ["", "FE5", "FE59FE", "8EC90001-F315-4F60-9FB8-838830DAEA5", "zzzz"])
    func rejectsBadText(_ text: String) {
        #expect(BluetoothUUID(text) == nil)
    }

    @Test func rejectsWrongWireWidths() {
        for width in [0, 1, 3, 5, 15, 17] {
            #expect(BluetoothUUID(littleEndianBytes: [UInt8](repeating: 1, count: width)) == nil)
        }
    }
}

@Suite(.timeLimit(.minutes(2))) struct ChecksumTests {
    @Test func crc32MatchesZlib() {
        // Check value of CRC-32/ISO-HDLC for "123456789".
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([UInt8]()) == 0)
    }

    @Test func crc32Chains() {
        let data = Array("The quick brown fox jumps over the lazy dog".utf8)
        var crc = CRC32()
        crc.update(data[..<10])
        var resumed = CRC32(continuing: crc.value)
        resumed.update(data[10...])
        #expect(resumed.value == CRC32.checksum(data))
        #expect(resumed.value == 0x414F_A339)
    }

    /// The slicing-by-8 path (contiguous input) and the byte-by-byte path (a lazy collection) agree with a
    /// bit-at-a-time reference for every length from 0 to 40 and every split point.
    @Test func crc32SlicingMatchesBitwiseReference() {
        func reference(_ bytes: [UInt8]) -> UInt32 {
            var c: UInt32 = 0xFFFF_FFFF
            for byte in bytes {
                c ^= UInt32(byte)
                for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            }
            return ~c
        }
        var seed: UInt32 = 0x1234_5678
        for length in 0...40 {
            let bytes = (0..<length).map { _ -> UInt8 in
                seed = seed &* 1_664_525 &+ 1_013_904_223
                return UInt8(truncatingIfNeeded: seed >> 24)
            }
            let expected = reference(bytes)
            #expect(CRC32.checksum(bytes) == expected)
            #expect(CRC32.checksum(bytes.lazy.map { $0 }) == expected)
            for split in 0...length {
                var crc = CRC32()
                crc.update(bytes[..<split])
                crc.update(bytes[split...])
                #expect(crc.value == expected)
            }
        }
    }

    @Test func crc16CCITTFalse() {
        // Check value of CRC-16/CCITT-FALSE for "123456789".
        #expect(CRC16.ccittFalse(Array("123456789".utf8)) == 0x29B1)
    }
}

@Suite(.timeLimit(.minutes(2))) struct AdvertisingDataTests {
    @Test func buildsAndParses() throws {
        let bytes = AdvertisingData.build(
            name: "DfuTarg", services: [BluetoothUUID(0xFE59), try #require(BluetoothUUID("8EC90001-F315-4F60-9FB8-838830DAEA50"))],
            manufacturer: .init(companyID: 0x0059, payload: [1, 2]))
        // 02 01 06 | 03 03 59 FE | 11 07 <16> | 05 FF 59 00 01 02 | 08 09 "DfuTarg"
        #expect(Array(bytes.prefix(7)) == [0x02, 0x01, 0x06, 0x03, 0x03, 0x59, 0xFE])
        let ad = AdvertisingData(parsing: bytes)
        #expect(ad.flags == 0x06)
        #expect(ad.name == "DfuTarg")
        #expect(ad.serviceUUIDs.count == 2)
        #expect(ad.manufacturerData == [.init(companyID: 0x0059, payload: [1, 2])])
        #expect(!ad.truncated)
    }

    @Test func truncatedStructureStopsParsing() {
        // 02 01 06 | 09 09 "Df" (claims 8 bytes, has 2)
        let ad = AdvertisingData(parsing: [0x02, 0x01, 0x06, 0x09, 0x09, 0x44, 0x66])
        #expect(ad.flags == 0x06)
        #expect(ad.name == nil)
        #expect(ad.truncated)
    }

    @Test func everyPrefixParsesWithoutCrashing() {
        let bytes = AdvertisingData.build(name: "bracelet", services: [BluetoothUUID(0xFE59)])
        for end in 0...bytes.count {
            _ = AdvertisingData(parsing: Array(bytes[..<end]))
        }
    }

    @Test func scanFilter() throws {
        let peer = PeerAddress(try #require(BluetoothAddress("C0:FF:EE:00:00:01")), type: .random)
        let advertisement = Advertisement(
            peer: peer, rssi: -60, data: AdvertisingData.build(name: "bracelet-1", services: [BluetoothUUID(0xFE59)]))
        #expect(ScanFilter().matches(advertisement))
        #expect(ScanFilter(namePrefix: "brace").matches(advertisement))
        #expect(!ScanFilter(namePrefix: "sensor").matches(advertisement))
        #expect(ScanFilter(serviceUUID: BluetoothUUID(0xFE59)).matches(advertisement))
        #expect(!ScanFilter(serviceUUID: BluetoothUUID(0x180D)).matches(advertisement))
        #expect(ScanFilter(minimumRSSI: -70).matches(advertisement))
        #expect(!ScanFilter(minimumRSSI: -50).matches(advertisement))
    }
}
