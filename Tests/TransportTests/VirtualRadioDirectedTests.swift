import BLECore
import Foundation
import Testing
import VirtualRadio

/// Directed advertising on the virtual radio (docs/virtual-radio.md §2, `directed_to`): an advertisement addressed to
/// one central adapter is seen by that adapter's scans only; an undirected one by all.
@Suite(.timeLimit(.minutes(2))) struct VirtualRadioDirectedTests {
    @Test func onlyTheAddressedAdapterSeesIt() async throws {
        let radio = makeRadioDirectory()
        defer { try? FileManager.default.removeItem(atPath: radio) }
        let directed = PeerAddress(BluetoothAddress("E1:5D:11:51:00:01")!, type: .random)
        let open = PeerAddress(BluetoothAddress("C0:FF:EE:00:00:02")!, type: .random)
        let a = try VirtualPeripheralEndpoint(radio: radio, advertisement: Advertisement(peer: directed, rssi: -50, data: [], directedTo: "station-a"))
        let b = try VirtualPeripheralEndpoint(radio: radio, advertisement: Advertisement(peer: open, rssi: -50, data: AdvertisingData.build(name: "Open", services: [])))
        defer {
            a.close()
            b.close()
        }
        let seenByA = try await collect(VirtualRadio(directory: radio, adapterName: "station-a").scan(filter: ScanFilter(), duration: .milliseconds(250)))
        #expect(Set(seenByA.map(\.peer)) == [directed, open])
        #expect(seenByA.first { $0.peer == directed }?.directedTo == "station-a")
        let seenByB = try await collect(VirtualRadio(directory: radio, adapterName: "station-b").scan(filter: ScanFilter(), duration: .milliseconds(250)))
        #expect(seenByB.map(\.peer) == [open])
        let seenByDefault = try await collect(VirtualRadio(directory: radio).scan(filter: ScanFilter(), duration: .milliseconds(250)))
        #expect(seenByDefault.map(\.peer) == [open])
        #expect(throws: AdvertisementFile.ParseError.self) { try AdvertisementFile.parse("address=C0:FF:EE:00:00:01\ndirected_to=\n") }
    }
}
