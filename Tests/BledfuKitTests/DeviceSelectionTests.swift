import BLECore
import Testing

@testable import BledfuKit

/// Choosing the one device a name means (`flash --name`): none heard, several heard, or the strongest on request.
@Suite(.timeLimit(.minutes(1))) struct DeviceSelectionChoiceTests {
    static func candidate(_ address: String, rssi: Int8?) throws -> DeviceSelection.Candidate {
        DeviceSelection.Candidate(peer: PeerAddress(try #require(BluetoothAddress(address)), type: .random), name: "Bracelet", rssi: rssi)
    }

    @Test func noneHeardIsNotFoundWithTheFloor() {
        #expect(throws: DeviceSelectionError(.notFound, "")) {
            try DeviceSelection.choose([], wanted: "--name 'Bracelet'", minimumRSSI: -60, strongest: false)
        }
        do {
            _ = try DeviceSelection.choose([], wanted: "--name 'Bracelet'", minimumRSSI: -60, strongest: false)
        } catch {
            #expect(error.message == "no device --name 'Bracelet' was heard at -60 dBm or stronger")
        }
    }

    @Test func severalHeardAreAmbiguousUnlessTheStrongestIsAsked() throws {
        let heard = [try Self.candidate("C0:00:00:00:00:02", rssi: -40), try Self.candidate("C0:00:00:00:00:01", rssi: nil)]
        do {
            _ = try DeviceSelection.choose(heard, wanted: "--name 'Bracelet'", minimumRSSI: nil, strongest: false)
            Issue.record("two devices were taken as one")
        } catch {
            #expect(error.code == .ambiguous)
            #expect(error.message.contains("matches 2 devices: C0:00:00:00:00:02 'Bracelet' -40 dBm, C0:00:00:00:00:01 'Bracelet' ? dBm"))
        }
        #expect(try DeviceSelection.choose(heard, wanted: "x", minimumRSSI: nil, strongest: true) == heard[0])
        #expect(try DeviceSelection.choose([heard[1]], wanted: "x", minimumRSSI: nil, strongest: false) == heard[1])
    }
}
