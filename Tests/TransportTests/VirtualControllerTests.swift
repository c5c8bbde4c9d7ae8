import BLECore
import Foundation
import LinuxIO
import Testing
import VirtualRadio

/// A central adapter's controller on the virtual radio (docs/virtual-radio.md §4.2), over real sockets and files.
@Suite("Virtual radio: one controller per central adapter", .timeLimit(.minutes(2)))
struct VirtualControllerTests {
    let alpha = PeerAddress(BluetoothAddress("C0:FF:EE:00:01:01")!, type: .random)
    let beta = PeerAddress(BluetoothAddress("C0:FF:EE:00:01:02")!, type: .random)

    func endpoint(_ radio: String, _ peer: PeerAddress) throws -> VirtualPeripheralEndpoint {
        try VirtualPeripheralEndpoint(
            radio: radio, advertisement: Advertisement(peer: peer, rssi: -40, data: AdvertisingData.build(name: "D")))
    }

    @Test("The device sees which central adapter a link comes from; an unnamed central is no adapter")
    func deviceSeesTheCentralAdapter() async throws {
        let radio = makeRadioDirectory()
        defer { try? FileManager.default.removeItem(atPath: radio) }
        let device = try endpoint(radio, alpha)
        defer { device.close() }
        let accepting = Task { () throws(BearerError) -> LinkInfo in try await device.acceptSocket().linkInfo }
        let central = try await VirtualRadio(directory: radio, adapterName: "line-1")
            .connect(to: alpha, options: ConnectOptions(timeout: .seconds(60)))
        #expect(try await accepting.value.centralAdapter == "line-1")
        await central.close()
        // `vr-central:<ADAPTER>:<pid>:<n>`; anything else names no adapter.
        #expect(VirtualRadio.centralAdapter(fromSocketName: "vr-central:hciA:12:3") == "hciA")
        #expect(VirtualRadio.centralAdapter(fromSocketName: "vr-central::12:3") == nil)
        #expect(VirtualRadio.centralAdapter(fromSocketName: "something-else") == nil)
        #expect(VirtualRadio.parse("/tmp/r@line-1")! == ("/tmp/r", "line-1"))
        #expect(VirtualRadio.parse("/tmp/r")! == ("/tmp/r", "default"))
        #expect(VirtualRadio.parse("/tmp/r@bad name") == nil)
    }

    @Test("At its limit the controller refuses another link as 'no free link' with the profile's HCI status; a link that ends frees its place")
    func limitRefusesWithNoFreeLink() async throws {
        let radio = makeRadioDirectory()
        defer { try? FileManager.default.removeItem(atPath: radio) }
        try VirtualController(radio: radio, name: "dongle").write(try ControllerProfile(parsing: "zephyr-hci-usb"))
        let first = try endpoint(radio, alpha)
        let second = try endpoint(radio, beta)
        defer {
            first.close()
            second.close()
        }
        let adapter = VirtualRadio(directory: radio, adapterName: "dongle")
        let accepting = Task { () throws(BearerError) -> SocketBearer in try await first.acceptSocket() }
        let link = try await adapter.connect(to: alpha, options: ConnectOptions(timeout: .seconds(60)))
        let served = try await accepting.value
        #expect(VirtualController(radio: radio, name: "dongle").linkCount() == 1)
        do {
            _ = try await adapter.connect(to: beta, options: ConnectOptions(timeout: .seconds(60)))
            Issue.record("a second link on a one-link controller")
        } catch {
            #expect(error.code == .noFreeLink)
            // Zephyr's ll_create_connection: 0x07 Memory Capacity Exceeded, which the kernel reports as ENOMEM.
            #expect(error.reason.contains("0x07") && error.reason.contains("ENOMEM"), "\(error.reason)")
        }
        await link.close()
        await served.close()
        #expect(VirtualController(radio: radio, name: "dongle").linkCount() == 0)
        let acceptingAgain = Task { () throws(BearerError) -> SocketBearer in try await second.acceptSocket() }
        let again = try await adapter.connect(to: beta, options: ConnectOptions(timeout: .seconds(60)))
        await again.close()
        await try acceptingAgain.value.close()
    }

    @Test("One connection is created at a time per adapter: a second attempt waits, and fails at its deadline while the first is still being created")
    func oneCreationAtATime() async throws {
        let radio = makeRadioDirectory()
        defer { try? FileManager.default.removeItem(atPath: radio) }
        let controller = VirtualController(radio: radio, name: "hciA")
        let profile = ControllerProfile.generic
        let far = ContinuousClock.now.advanced(by: .seconds(60))
        let first = try await controller.reserve(peer: alpha, profile: profile, until: far)
        // The first is still being created: the second's deadline (already passed) ends its wait.
        do {
            _ = try await controller.reserve(peer: beta, profile: profile, until: ContinuousClock.now)
            Issue.record("two connections created at once")
        } catch {
            #expect(error.code == .connectionTimeout)
            #expect(error.reason.contains("still creating another connection"))
        }
        await controller.established(first)
        let second = try await controller.reserve(peer: beta, profile: profile, until: ContinuousClock.now)
        #expect(controller.linkCount() == 2)
        await controller.release(first)
        await controller.release(second)
        #expect(controller.linkCount() == 0)
        // Another adapter has its own controller.
        let other = VirtualController(radio: radio, name: "hciB")
        let third = try await other.reserve(peer: alpha, profile: profile, until: ContinuousClock.now)
        await other.release(third)
    }

    @Test("An adapter without a profile file has the default controller: its sixth link is refused as 'no free link'")
    func unnamedAdapterHasTheDefaultController() async throws {
        let radio = makeRadioDirectory()
        defer { try? FileManager.default.removeItem(atPath: radio) }
        #expect(VirtualController(radio: radio, name: "default").profile() == .generic)
        #expect(ControllerProfile.generic.maximumLinks == 5)
        let peers = (1...6).map { PeerAddress(BluetoothAddress("C0:FF:EE:00:02:0\($0)")!, type: .random) }
        let devices = try peers.map { try endpoint(radio, $0) }
        defer { for device in devices { device.close() } }
        let accepting = devices.map { device in
            Task { () throws(BearerError) -> SocketBearer in try await device.acceptSocket() }
        }
        let adapter = VirtualRadio(directory: radio, adapterName: "default")
        var links: [any ATTBearer] = []
        for peer in peers.prefix(5) {
            links.append(try await adapter.connect(to: peer, options: ConnectOptions(timeout: .seconds(60))))
        }
        #expect(VirtualController(radio: radio, name: "default").linkCount() == 5)
        do {
            _ = try await adapter.connect(to: peers[5], options: ConnectOptions(timeout: .seconds(60)))
            Issue.record("a sixth link on the default controller was carried")
        } catch {
            #expect(error.code == .noFreeLink, "\(error)")
            #expect(error.reason.contains("0x09"), "\(error.reason)")
        }
        for link in links { await link.close() }
        for task in accepting.prefix(5) { try await task.value.close() }
        accepting[5].cancel()
        #expect(VirtualController(radio: radio, name: "default").linkCount() == 0)
    }
}
