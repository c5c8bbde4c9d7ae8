import BLECore
import DFUSimulator
import LegacyDFU
import Testing

/// What `bledfu scan` can tell of Legacy DFU from an advertisement (``LegacyAdvertisement``), against the virtual
/// devices' own advertisements: the bootloaders (UUID and name) and InfiniTime are Legacy; an SDK 11 or Bluefruit
/// application tells nothing of it before a connection; SDK 11's directed advertising carries nothing.
@Suite(.timeLimit(.minutes(2))) struct LegacyAdvertisementTests {
    static func isLegacy(_ advertisement: Advertisement) -> Bool {
        let parsed = advertisement.parsed
        return LegacyAdvertisement.isLegacy(services: parsed.serviceUUIDs, name: parsed.name)
    }

    @Test func whatTheAdvertisementsTell() async {
        let address = BluetoothAddress("E1:5D:11:51:00:01")!
        // Application modes: an SDK 11 application (HRS, BAS, DIS) and a Bluefruit one (name only) are not told apart.
        let sdk11 = VirtualLegacyDevice(profile: .sdk11NRF51(address: address), clock: ContinuousClock())
        #expect(!Self.isLegacy(await sdk11.currentAdvertisement))
        let adafruit = VirtualLegacyDevice(profile: .adafruitNRF52832(address: address), clock: ContinuousClock())
        #expect(!Self.isLegacy(await adafruit.currentAdvertisement))
        // InfiniTime advertises the DFU service.
        let watch = VirtualLegacyDevice(profile: .pineTime(address: address), clock: ContinuousClock())
        #expect(Self.isLegacy(await watch.currentAdvertisement))
        // A bootloader (no application: it stays in its bootloader, address + 1): the UUID and DfuTarg / AdaDFU.
        var empty = LegacyDeviceProfile.adafruitNRF52832(address: address)
        empty.installed.application = nil
        let bootloader = VirtualLegacyDevice(profile: empty, clock: ContinuousClock())
        #expect(await bootloader.mode == .bootloader)
        #expect(Self.isLegacy(await bootloader.currentAdvertisement))
        // The names alone are enough; other names and services are not.
        #expect(LegacyAdvertisement.isLegacy(services: [], name: "DfuTarg"))
        #expect(LegacyAdvertisement.isLegacy(services: [], name: "AdaDFU"))
        #expect(!LegacyAdvertisement.isLegacy(services: [BluetoothUUID(0x180D)], name: "Nordic_HRM"))
        #expect(!LegacyAdvertisement.isLegacy(services: [], name: nil))
    }
}
