import BLECore
import Foundation
import LinuxIO
import Testing
import VirtualRadio

/// A fresh radio directory per test (short path: sockaddr_un holds 107 bytes).
func makeRadioDirectory() -> String {
    let path = "/tmp/vr-" + String(UUID().uuidString.prefix(8))
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

func collect(_ stream: AsyncThrowingStream<Advertisement, any Error>) async throws -> [Advertisement] {
    var out: [Advertisement] = []
    for try await advertisement in stream { out.append(advertisement) }
    return out
}

@Suite(.timeLimit(.minutes(5))) struct VirtualRadioTests {
    let alpha = PeerAddress(BluetoothAddress("C0:FF:EE:00:00:01")!, type: .random)
    let beta = PeerAddress(BluetoothAddress("C0:FF:EE:00:00:02")!, type: .public)
    let dfuService = BluetoothUUID(0xFE59)

    func advertisement(_ peer: PeerAddress, name: String, rssi: Int8, services: [BluetoothUUID] = []) -> Advertisement {
        Advertisement(peer: peer, rssi: rssi, data: AdvertisingData.build(name: name, services: services))
    }

    @Test func advertisementFileRoundTrip() throws {
        let ad = advertisement(alpha, name: "Alpha", rssi: -42, services: [dfuService])
        let text = AdvertisementFile.encode(ad)
        #expect(text.contains("address=C0:FF:EE:00:00:01\n"))
        #expect(text.contains("address_type=random\n"))
        #expect(text.contains("rssi=-42\n"))
        #expect(try AdvertisementFile.parse(text) == ad)
        #expect(AdvertisementFile.socketName(alpha.address) == "C0-FF-EE-00-00-01.sock")
        // Defaults, comments and unknown keys.
        let minimal = try AdvertisementFile.parse("# hello\naddress=c0:ff:ee:00:00:01\nfuture=1\n")
        #expect(minimal.peer == alpha && minimal.rssi == nil && minimal.data.isEmpty && minimal.connectable)
        #expect(throws: AdvertisementFile.ParseError.self) { try AdvertisementFile.parse("address_type=public\n") }
        #expect(throws: AdvertisementFile.ParseError.self) { try AdvertisementFile.parse("address=C0:FF\n") }
        #expect(throws: AdvertisementFile.ParseError.self) { try AdvertisementFile.parse("address=C0:FF:EE:00:00:01\ndata=0\n") }
    }

    @Test func scanAppliesFilters() async throws {
        let radio = makeRadioDirectory()
        defer { try? FileManager.default.removeItem(atPath: radio) }
        let a = try VirtualPeripheralEndpoint(radio: radio, advertisement: advertisement(alpha, name: "Alpha", rssi: -40, services: [dfuService]))
        let b = try VirtualPeripheralEndpoint(radio: radio, advertisement: advertisement(beta, name: "Beta", rssi: -80))
        defer {
            a.close()
            b.close()
        }
        let adapter = VirtualRadio(directory: radio)
        let all = try await collect(adapter.scan(filter: ScanFilter(), duration: .milliseconds(250)))
        // Folded: each device once, although the directory was read several times.
        #expect(all.map(\.peer) == [alpha, beta])
        #expect(all.first?.parsed.name == "Alpha" && all.first?.rssi == -40)
        let byName = try await collect(adapter.scan(filter: ScanFilter(namePrefix: "Be"), duration: .zero))
        #expect(byName.map(\.peer) == [beta])
        let byRSSI = try await collect(adapter.scan(filter: ScanFilter(minimumRSSI: -60), duration: .zero))
        #expect(byRSSI.map(\.peer) == [alpha])
        let byService = try await collect(adapter.scan(filter: ScanFilter(serviceUUID: dfuService), duration: .zero))
        #expect(byService.map(\.peer) == [alpha])
        let byAddress = try await collect(adapter.scan(filter: ScanFilter(address: beta.address), duration: .zero))
        #expect(byAddress.map(\.peer) == [beta])
        b.stopAdvertising()
        let afterStop = try await collect(adapter.scan(filter: ScanFilter(), duration: .zero))
        #expect(afterStop.map(\.peer) == [alpha])
    }

    @Test func staleSocketIsSkippedAndRefused() async throws {
        let radio = makeRadioDirectory()
        defer { try? FileManager.default.removeItem(atPath: radio) }
        // A device that died without cleaning up: its socket file stays, nobody listens.
        let dead = try SocketDescriptor.unixSeqPacket()
        try dead.bind(unixPath: radio + "/" + AdvertisementFile.socketName(alpha.address))
        try dead.close()
        let ad = advertisement(alpha, name: "Ghost", rssi: -30)
        try Data(AdvertisementFile.encode(ad).utf8).write(to: URL(fileURLWithPath: radio + "/C0-FF-EE-00-00-01.adv"))
        let adapter = VirtualRadio(directory: radio)
        let found = try await collect(adapter.scan(filter: ScanFilter(), duration: .zero))
        #expect(found.isEmpty)
        await #expect(throws: AdapterError(.connectionRefused, "")) {
            _ = try await adapter.connect(to: alpha, options: ConnectOptions(timeout: .seconds(1)))
        }
        // A new device at that address replaces the stale socket.
        let revived = try VirtualPeripheralEndpoint(radio: radio, advertisement: ad)
        defer { revived.close() }
        #expect(try await collect(adapter.scan(filter: ScanFilter(), duration: .zero)).map(\.peer) == [alpha])
    }

    @Test func connectErrors() async throws {
        let radio = makeRadioDirectory()
        defer { try? FileManager.default.removeItem(atPath: radio) }
        let adapter = VirtualRadio(directory: radio)
        await #expect(throws: AdapterError(.deviceNotFound, "")) {
            _ = try await adapter.connect(to: alpha, options: ConnectOptions())
        }
        let endpoint = try VirtualPeripheralEndpoint(radio: radio, advertisement: advertisement(alpha, name: "A", rssi: -1))
        defer { endpoint.close() }
        await #expect(throws: AdapterError(.badAddress, "")) {
            _ = try await adapter.connect(to: PeerAddress(alpha.address, type: .public), options: ConnectOptions())
        }
        #expect(throws: AdapterError(.busy, "")) {
            _ = try VirtualPeripheralEndpoint(radio: radio, advertisement: advertisement(alpha, name: "A", rssi: -1))
        }
        let missing = VirtualRadio(directory: radio + "/nope")
        await #expect(throws: AdapterError(.noAdapter, "")) {
            _ = try await collect(missing.scan(filter: ScanFilter(), duration: .zero))
        }
    }

    @Test func connectCarriesPDUsBothWaysAndDisconnects() async throws {
        let radio = makeRadioDirectory()
        defer { try? FileManager.default.removeItem(atPath: radio) }
        let endpoint = try VirtualPeripheralEndpoint(radio: radio, advertisement: advertisement(alpha, name: "A", rssi: -1))
        defer { endpoint.close() }
        let adapter = VirtualRadio(directory: radio)
        async let accepted = endpoint.accept()
        let central = try await adapter.connect(to: alpha, options: ConnectOptions(timeout: .seconds(2)))
        let peripheral = try await accepted
        #expect(central.linkInfo.peer == alpha)
        #expect(central.linkInfo.maximumPDUSize == 517)
        try await central.send([0x02, 0x05, 0x02])  // Exchange MTU Request, 517
        #expect(try await peripheral.receive() == [0x02, 0x05, 0x02])
        try await peripheral.send([0x03, 0xF7, 0x00])  // Exchange MTU Response, 247
        #expect(try await central.receive() == [0x03, 0xF7, 0x00])
        await central.close()
        await #expect(throws: BearerError(.disconnected)) { _ = try await peripheral.receive() }
    }

    @Test func closingTheEndpointEndsAcceptAndRemovesFiles() async throws {
        let radio = makeRadioDirectory()
        defer { try? FileManager.default.removeItem(atPath: radio) }
        let endpoint = try VirtualPeripheralEndpoint(radio: radio, advertisement: advertisement(alpha, name: "A", rssi: -1))
        #expect(FileManager.default.fileExists(atPath: endpoint.advertisementPath))
        let acceptor = Task { try await endpoint.accept() }
        endpoint.close()
        await #expect(throws: BearerError(.closed)) { _ = try await acceptor.value }
        #expect(!FileManager.default.fileExists(atPath: endpoint.advertisementPath))
        #expect(!FileManager.default.fileExists(atPath: endpoint.socketPath))
    }
}
