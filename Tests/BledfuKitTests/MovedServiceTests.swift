import BLECore
import BledfuTestSupport
import DFUCore
import DFUProtocol
import DFUSimulator
import SecureDFU
import Testing

@testable import BledfuKit

/// Issue 20 point 4: a Secure DFU device whose vendor moved the service and characteristic UUIDs. The family's
/// UUIDs are options (`secure.service`, `secure.control-point`, `secure.packet`, `secure.buttonless`,
/// `secure.buttonless-bonded`; the standard ones by default, `flash --service-uuid` sets the service): with them the
/// update goes through, without them the device has no DFU service the updater knows.
@Suite(.timeLimit(.minutes(5))) struct MovedServiceTests {
    static func moved(_ short: UInt8) -> BluetoothUUID {
        BluetoothUUID(bigEndianBytes: [
            0x12, 0x34, 0x00, short, 0x56, 0x78, 0x9A, 0xBC, 0xDE, 0xF0, 0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC,
        ]) ?? BluetoothUUID(0xFFFF)
    }

    static let uuids = SecureDFUUUIDs(
        service: moved(0x00), controlPoint: moved(0x01), packet: moved(0x02), buttonlessWithoutBonds: moved(0x03),
        buttonlessWithBonds: moved(0x04))

    static let settings = [
        "secure.service": uuids.service.description, "secure.control-point": uuids.controlPoint.description,
        "secure.packet": uuids.packet.description, "secure.buttonless": uuids.buttonlessWithoutBonds.description,
    ]

    static func device() -> VirtualDevice {
        var profile = KitFixture.profile()
        profile.uuids = uuids
        return VirtualDevice(profile: profile, clock: ContinuousClock())
    }

    static func request(settings: [String: String]) throws -> UpdateRequest {
        var request = KitFixture.request(try KitFixture.package(), reconnect: ReconnectPolicy(initialDelay: .zero))
        request.options.settings = settings
        return request
    }

    @Test func theFamilysUUIDsAreOptions() async throws {
        let device = Self.device()
        let updater = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
        let result = try await updater.update(try Self.request(settings: Self.settings))
        #expect(result.family == .secure)
        let state = await device.state()
        #expect(state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(KitFixture.image))
        // The moved device advertises its own service, not FE59.
        let advertised = await device.currentAdvertisement.parsed.serviceUUIDs
        #expect(advertised.contains(Self.uuids.service) && !advertised.contains(SecureDFUUUID.service))
    }

    @Test func withoutThemTheDeviceHasNoKnownService() async throws {
        let device = Self.device()
        let updater = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
        await #expect(throws: DFUError(.noUpdateService, "")) { try await updater.update(try Self.request(settings: [:])) }
        #expect(await device.state().counters.packetsReceived == 0)
    }

    /// A setting that is no UUID is refused when the package is planned, before anything connects.
    @Test func aBadUUIDIsAnInvalidOption() throws {
        let package = try KitFixture.package()
        #expect(throws: DFUError(.invalidOption, "")) {
            try Updater.plan(package, options: UpdateOptions(settings: ["secure.service": "FE5G"]))
        }
        let options = UpdateOptions(settings: ["secure.service": "1234"])
        #expect(try SecureDFUFamily.uuids(options).service == BluetoothUUID(0x1234))
        #expect(try SecureDFUFamily.uuids(UpdateOptions()) == .standard)
        #expect(DefaultFamilies.settings(forOptions: ["service-uuid": "1234"]) == ["secure.service": "1234"])
    }
}
