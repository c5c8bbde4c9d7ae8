import ATT
import BLECore
import GATT
import Synchronization
import Testing

/// GATT client against GATT server on an in-memory pair, comparing the exact PDU sequence
/// (">" client to server, "<" server to client). ATT_MTU stays 23 unless a test exchanges it.
@Suite(.timeLimit(.minutes(3))) struct GATTConversationTests {
    @Test func discoverAllPrimaryServices() async throws {
        let link = Link()
        let services = try await link.client.discoverPrimaryServices()
        #expect(
            link.recorder.trace == [
                // Read By Group Type Request 0x0001-0xFFFF, type 0x2800 (Primary Service).
                "> 10 01 00 FF FF 00 28",
                // Length 6: 0001-0005 1800, 0006-0008 180A, 0009-000E FE59.
                "< 11 06 01 00 05 00 00 18 06 00 08 00 0A 18 09 00 0E 00 59 FE",
                "> 10 0F 00 FF FF 00 28",
                // Error Response: request 0x10, handle 0x000F, Attribute Not Found.
                "< 01 10 0F 00 0A",
            ])
        #expect(services.map(\.uuid) == [TestUUIDs.gap, TestUUIDs.deviceInformation, TestUUIDs.dfu])
        #expect(services.map(\.handleRange) == [
            ATTHandleRange(start: 1, end: 5), ATTHandleRange(start: 6, end: 8), ATTHandleRange(start: 9, end: 14),
        ])
    }

    @Test func discoverPrimaryServiceByUUID() async throws {
        let link = Link()
        let services = try await link.client.discoverPrimaryServices(uuid: TestUUIDs.dfu)
        #expect(
            link.recorder.trace == [
                // Find By Type Value Request 0x0001-0xFFFF, type 0x2800, value FE59.
                "> 06 01 00 FF FF 00 28 59 FE",
                "< 07 09 00 0E 00",  // found 0x0009, group end 0x000E
                "> 06 0F 00 FF FF 00 28 59 FE",
                "< 01 06 0F 00 0A",
            ])
        #expect(services == [GATTService(uuid: TestUUIDs.dfu, handleRange: ATTHandleRange(start: 9, end: 14))])
    }

    @Test func discoverCharacteristicsAndDescriptorsWith128BitUUIDs() async throws {
        let link = Link()
        let dfu = GATTService(uuid: TestUUIDs.dfu, handleRange: ATTHandleRange(start: 9, end: 14))
        let characteristics = try await link.client.discoverCharacteristics(of: dfu)
        let uuidTail = "50 EA DA 30 88 83 B8 9F 60 4F 15 F3"
        #expect(
            link.recorder.trace == [
                // Read By Type 0x0009-0x000E, type 0x2803; one 21-octet declaration fits a 23-octet MTU.
                "> 08 09 00 0E 00 03 28",
                "< 09 15 0A 00 18 0B 00 \(uuidTail) 01 00 C9 8E",  // props write|notify, value 0x000B
                "> 08 0B 00 0E 00 03 28",
                "< 09 15 0D 00 04 0E 00 \(uuidTail) 02 00 C9 8E",  // props write without response, value 0x000E
                "> 08 0E 00 0E 00 03 28",
                "< 01 08 0E 00 0A",
            ])
        #expect(characteristics.map(\.uuid) == [TestUUIDs.controlPoint, TestUUIDs.packet])
        #expect(characteristics.map(\.valueHandle) == [0x0B, 0x0E])
        #expect(characteristics.map(\.endHandle) == [0x0C, 0x0E])
        #expect(characteristics.map(\.properties) == [[.write, .notify], [.writeWithoutResponse]])

        link.recorder.reset()
        let descriptors = try await link.client.discoverDescriptors(of: characteristics[0])
        #expect(
            link.recorder.trace == [
                "> 04 0C 00 0C 00",  // Find Information 0x000C-0x000C
                "< 05 01 0C 00 02 29",  // format 1: 0x000C 2902
            ])
        #expect(descriptors == [GATTDescriptor(handle: 0x0C, uuid: GATTAttributeType.clientCharacteristicConfiguration)])
    }

    @Test func discoverAllBuildsTheWholeTree() async throws {
        let link = Link()
        let services = try await link.client.discoverAll()
        #expect(services.count == 3)
        #expect(services[0].characteristics.map(\.valueHandle) == [3, 5])
        #expect(services[1].characteristic(TestUUIDs.manufacturer)?.valueHandle == 8)
        let controlPoint = services[2].characteristic(TestUUIDs.controlPoint)
        #expect(controlPoint?.cccdHandle == 0x0C)
        #expect(services[2].characteristic(TestUUIDs.packet)?.descriptors == [])
        let database = threeServiceDatabase()
        #expect(database.handle(of: TestUUIDs.controlPoint, in: TestUUIDs.dfu) == 0x0B)
        #expect(database.cccdHandle(of: TestUUIDs.controlPoint, in: TestUUIDs.dfu) == 0x0C)
    }

    @Test func longReadUsesReadBlobUntilAShortAnswer() async throws {
        let link = Link()
        let value = try await link.client.readLong(handle: 8)
        #expect(value == (0..<60).map { UInt8($0) })
        let requests = link.recorder.trace.filter { $0.hasPrefix(">") }
        #expect(requests == ["> 0A 08 00", "> 0C 08 00 16 00", "> 0C 08 00 2C 00"])  // offsets 0, 22, 44
        #expect(link.recorder.trace[5] == "< 0D 2C 2D 2E 2F 30 31 32 33 34 35 36 37 38 39 3A 3B")  // 16 octets: done
    }

    @Test func longReadAfterMTUExchange() async throws {
        let link = Link(maximumMTU: 40)
        #expect(try await link.client.att.exchangeMTU() == 40)
        #expect(try await link.client.readLong(handle: 8) == (0..<60).map { UInt8($0) })
        #expect(link.recorder.trace.filter { $0.hasPrefix(">") } == ["> 02 05 02", "> 0A 08 00", "> 0C 08 00 27 00"])
    }

    @Test func writeWithResponseAndWithout() async throws {
        let delegate = RecordingDelegate()
        let link = Link(delegate: delegate)
        try await link.client.write(handle: 0x0B, value: [0x06, 0x01])
        try await link.client.writeWithoutResponse(handle: 0x0E, value: [0xAA, 0xBB])
        try await link.client.write(handle: 0x0B, value: [0x03])  // a request after the command: both arrived
        #expect(
            link.recorder.trace == [
                "> 12 0B 00 06 01", "< 13", "> 52 0E 00 AA BB", "> 12 0B 00 03", "< 13",
            ])
        #expect(delegate.writes == ["0B 06 01 rsp", "0E AA BB cmd", "0B 03 rsp"])
        #expect(await link.server.value(handle: 0x0E) == [0xAA, 0xBB])
    }

    /// A burst of Write Commands (what a DFU transport streams with): one command per value, in order, nothing
    /// between them; a value over ATT_MTU − 3 sends nothing.
    @Test func burstWriteWithoutResponse() async throws {
        let delegate = RecordingDelegate()
        let link = Link(delegate: delegate)
        let values: [ArraySlice<UInt8>] = [[0x01, 0x02][...], [0x03][...], [0x04, 0x05, 0x06][...]]
        try await link.client.writeWithoutResponse(handle: 0x0E, values: values)
        try await link.client.write(handle: 0x0B, value: [0x03])  // a request after the burst: all of it arrived
        #expect(
            link.recorder.trace == [
                // 52 = Write Command, handle 0x000E (LE), then the value.
                "> 52 0E 00 01 02", "> 52 0E 00 03", "> 52 0E 00 04 05 06", "> 12 0B 00 03", "< 13",
            ])
        #expect(delegate.writes == ["0E 01 02 cmd", "0E 03 cmd", "0E 04 05 06 cmd", "0B 03 rsp"])
        link.recorder.reset()
        let tooLong = [UInt8](repeating: 0xEE, count: 21)[...]  // ATT_MTU 23: at most 20 octets of value
        await #expect(throws: ATTClientError(.invalidArgument, "")) {
            try await link.client.writeWithoutResponse(handle: 0x0E, values: [[0x07][...], tooLong])
        }
        try await link.client.write(handle: 0x0B, value: [0x04])
        #expect(link.recorder.trace == ["> 12 0B 00 04", "< 13"])
    }

    @Test func notifySubscriptionDeliversNotifications() async throws {
        let delegate = RecordingDelegate()
        let link = Link(delegate: delegate)
        let services = try await link.client.discoverAll()
        let controlPoint = try #require(services[2].characteristic(TestUUIDs.controlPoint))
        var notifications = link.client.notifications.makeAsyncIterator()
        #expect(await link.server.isNotifying(valueHandle: 0x0B) == false)
        link.recorder.reset()
        try await link.client.setNotifications(true, of: controlPoint)
        #expect(link.recorder.trace == ["> 12 0C 00 01 00", "< 13"])
        #expect(await link.server.isNotifying(valueHandle: 0x0B))
        #expect(delegate.configurations == ["0B 0001"])
        try await link.server.notify(handle: 0x0B, value: [0x60, 0x01, 0x01])
        #expect(await notifications.next() == ATTNotification(handle: 0x0B, value: [0x60, 0x01, 0x01], isIndication: false))
        #expect(try await link.client.read(handle: 0x0C) == [0x01, 0x00])
        try await link.client.setNotifications(false, of: controlPoint)
        #expect(await link.server.isNotifying(valueHandle: 0x0B) == false)
    }

    @Test func indicationWaitsForTheClientsConfirmation() async throws {
        let link = Link()
        var notifications = link.client.notifications.makeAsyncIterator()
        try await link.server.indicate(handle: 0x0B, value: [0x01])
        #expect(await notifications.next()?.isIndication == true)
        #expect(link.recorder.trace == ["< 1D 0B 00 01", "> 1E"])
    }

    @Test func delegateRefusalReachesTheClient() async throws {
        let delegate = RecordingDelegate()
        delegate.refusal = .cccdImproperlyConfigured
        let link = Link(delegate: delegate)
        let refusal = await #expect(throws: ATTClientError.self) {
            try await link.client.write(handle: 0x0B, value: [0x01])
        }
        #expect(refusal?.code == .remote && refusal?.attError == .cccdImproperlyConfigured && refusal?.handle == 0x0B)
        #expect(link.recorder.trace == ["> 12 0B 00 01", "< 01 12 0B 00 FD"])
    }
}

/// Records what the server tells its application; optionally refuses writes.
final class RecordingDelegate: GATTServerDelegate {
    private struct State {
        var writes: [String] = []
        var configurations: [String] = []
        var handled: [ATTOpcode] = []
        var refusal: ATTErrorCode?
    }
    private let state = Mutex(State())

    var writes: [String] { state.withLock { $0.writes } }
    var configurations: [String] { state.withLock { $0.configurations } }
    var handled: [ATTOpcode] { state.withLock { $0.handled } }
    var refusal: ATTErrorCode? {
        get { state.withLock { $0.refusal } }
        set { state.withLock { $0.refusal = newValue } }
    }

    func beforeHandling(_ pdu: ATTPDU, server: GATTServer) async {
        state.withLock { $0.handled.append(pdu.opcode) }
    }

    func write(_ attribute: GATTAttribute, value: [UInt8], withResponse: Bool, server: GATTServer) async
        -> ATTErrorCode?
    {
        state.withLock {
            $0.writes.append(([attribute.handle.low] + value).map(hex2).joined(separator: " ") + (withResponse ? " rsp" : " cmd"))
            return $0.refusal
        }
    }

    func clientConfigurationChanged(valueHandle: UInt16, configuration: GATTClientConfiguration, server: GATTServer)
        async
    {
        state.withLock {
            $0.configurations.append(hex2(UInt8(valueHandle)) + " " + hex2(UInt8(configuration.rawValue >> 8)) + hex2(UInt8(configuration.rawValue & 0xFF)))
        }
    }
}

extension UInt16 {
    var low: UInt8 { UInt8(self & 0xFF) }
}
