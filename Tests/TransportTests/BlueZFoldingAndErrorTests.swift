import BLECore
import BlueZTransport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite(.timeLimit(.minutes(5))) struct BlueZFoldingTests {
    static let device = PeerAddress(BluetoothAddress("C0:FF:EE:00:00:01")!, type: .random)

    static func report(scanResponse: Bool = false, rssi: Int8?, data: [UInt8]) -> HCIAdvertisingReport {
        HCIAdvertisingReport(
            eventType: scanResponse ? 4 : 0, addressType: 1, address: device.address, rssi: rssi, data: data,
            isScanResponse: scanResponse, connectable: !scanResponse)
    }

    static let flags: [UInt8] = [0x02, 0x01, 0x06]
    static let name: [UInt8] = [0x08, 0x09] + Array("DfuTarg".utf8)

    @Test func scanResponseIsMergedAndDuplicatesFolded() throws {
        var folder = AdvertisementFolder()
        let folded = folder.fold(Self.report(rssi: -61, data: Self.flags))
        let first = try #require(folded)
        #expect(first.data == Self.flags)
        #expect(first.connectable)
        let mergedReport = folder.fold(Self.report(scanResponse: true, rssi: -63, data: Self.name))
        let merged = try #require(mergedReport)
        #expect(merged.data == Self.flags + Self.name)
        #expect(merged.parsed.completeName == "DfuTarg")
        #expect(merged.connectable, "a scan response keeps the advertisement's connectability")
        // Same data, RSSI in the same 10 dB bucket (-61…-70): a duplicate.
        let duplicate = folder.fold(Self.report(rssi: -65, data: Self.flags))
        #expect(duplicate == nil)
        // RSSI moved to another bucket: reported again.
        let moved = folder.fold(Self.report(rssi: -75, data: Self.flags))
        #expect(moved?.rssi == -75)
        // Anonymous advertisers are skipped.
        var anonymous = Self.report(rssi: -40, data: Self.flags)
        anonymous.addressType = 0xFF
        let skipped = folder.fold(anonymous)
        #expect(skipped == nil)
    }

    @Test func filterAppliesToTheMergedAdvertisement() throws {
        var folder = AdvertisementFolder(filter: ScanFilter(namePrefix: "Dfu", minimumRSSI: -70))
        let unnamed = folder.fold(Self.report(rssi: -50, data: Self.flags))
        #expect(unnamed == nil, "no name yet")
        let namedReport = folder.fold(Self.report(scanResponse: true, rssi: -50, data: Self.name))
        let named = try #require(namedReport)
        #expect(named.parsed.name == "DfuTarg")
        let weak = folder.fold(Self.report(rssi: -90, data: Self.flags))
        #expect(weak == nil, "below the RSSI floor")
    }
}

@Suite(.timeLimit(.minutes(5))) struct BlueZErrorTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var errno: Int32
        var operation: BlueZOperation
        var code: AdapterError.Code
        var testDescription: String { "errno \(errno) in \(operation.rawValue) → \(code)" }
    }

    static let table: [Case] = [
        Case(errno: EAFNOSUPPORT, operation: .socket, code: .noBluetoothInKernel),
        Case(errno: ENODEV, operation: .scan, code: .noAdapter),
        Case(errno: EHOSTUNREACH, operation: .connect, code: .adapterDown),
        Case(errno: EHOSTDOWN, operation: .connect, code: .adapterDown),
        Case(errno: ENETDOWN, operation: .scan, code: .adapterDown),
        Case(errno: EACCES, operation: .connect, code: .permissionDenied),
        Case(errno: EPERM, operation: .scan, code: .permissionDenied),
        Case(errno: EBUSY, operation: .connect, code: .busy),
        Case(errno: ETIMEDOUT, operation: .connect, code: .connectionTimeout),
        Case(errno: ENOSYS, operation: .connect, code: .connectionTimeout),
        Case(errno: ECONNREFUSED, operation: .connect, code: .connectionRefused),
        Case(errno: ECONNRESET, operation: .connect, code: .disconnected),
        Case(errno: EINVAL, operation: .bind, code: .badAddress),
        Case(errno: EMFILE, operation: .socket, code: .system),
    ]

    @Test(arguments: table) func errnoMapping(_ entry: Case) {
        let error = BlueZErrors.adapterError(errno: entry.errno, operation: entry.operation, adapter: "hci0")
        #expect(error.code == entry.code)
        #expect(error.errno == entry.errno)
        #expect(!error.reason.isEmpty && !error.reason.contains("\n"), "one line")
    }

    @Test func exactMessages() {
        #expect(
            BlueZErrors.adapterError(errno: EAFNOSUPPORT, operation: .socket).reason
                == "this kernel has no Bluetooth support (socket: Address family not supported)")
        #expect(
            BlueZErrors.adapterError(errno: EBUSY, operation: .connect).reason
                == "another program (usually bluetoothd) already holds the ATT channel of this link")
        #expect(
            BlueZErrors.adapterError(errno: EPERM, operation: .scan).reason
                == "scanning needs CAP_NET_RAW: run as root or grant it with: sudo setcap cap_net_raw,cap_net_admin+eip $(command -v bledfu)")
        #expect(BlueZErrors.adapterError(errno: EMFILE, operation: .socket, adapter: "hci0").reason.contains("Too many open files"))
    }
}
