import ATT
import BLECore

/// GATT client procedures (Core v5.4 Vol 3 Part G §4) on an `ATTClient`. Every discovery walks its handle range
/// request by request until the server answers Attribute Not Found or the range reaches its end (0xFFFF for
/// services).
public struct GATTClient: Sendable {
    public let att: ATTClient

    public init(att: ATTClient) {
        self.att = att
    }

    /// Notifications and indications from the server (the ATT client's stream).
    public var notifications: AsyncStream<ATTNotification> { att.notifications }

    // MARK: - Discovery

    /// Discover All Primary Services (§4.4.1): Read By Group Type of 0x2800 from 0x0001 to 0xFFFF, repeated from
    /// the handle after the last group end.
    public func discoverPrimaryServices() async throws(ATTClientError) -> [GATTService] {
        var services: [GATTService] = []
        var start: UInt16 = 0x0001
        while true {
            let response: ATTPDU
            do {
                response = try await att.request(
                    .readByGroupTypeRequest(startHandle: start, endHandle: 0xFFFF, type: GATTAttributeType.primaryService))
            } catch where error.attError == .attributeNotFound {
                return services
            }
            guard case .readByGroupTypeResponse(let groups) = response, let last = groups.last else {
                throw ATTClientError(.protocolViolation, "empty or wrong answer to Read By Group Type: \(response)")
            }
            for group in groups {
                guard let uuid = BluetoothUUID(littleEndianBytes: group.value), group.handle >= start,
                    group.endGroupHandle >= group.handle
                else {
                    throw ATTClientError(.protocolViolation, "malformed service group \(group)")
                }
                services.append(GATTService(uuid: uuid, handleRange: ATTHandleRange(start: group.handle, end: group.endGroupHandle)))
            }
            guard last.endGroupHandle < 0xFFFF else { return services }
            start = last.endGroupHandle + 1
        }
    }

    /// Discover Primary Service by Service UUID (§4.4.2): Find By Type Value of 0x2800 with the UUID.
    public func discoverPrimaryServices(uuid: BluetoothUUID) async throws(ATTClientError) -> [GATTService] {
        var services: [GATTService] = []
        var start: UInt16 = 0x0001
        while true {
            let response: ATTPDU
            do {
                response = try await att.request(
                    .findByTypeValueRequest(
                        startHandle: start, endHandle: 0xFFFF, type: 0x2800, value: uuid.shortestLittleEndianBytes))
            } catch where error.attError == .attributeNotFound {
                return services
            }
            guard case .findByTypeValueResponse(let ranges) = response, let last = ranges.last else {
                throw ATTClientError(.protocolViolation, "empty or wrong answer to Find By Type Value: \(response)")
            }
            for range in ranges {
                guard range.start >= start, range.end >= range.start else {
                    throw ATTClientError(.protocolViolation, "malformed service range \(range)")
                }
                services.append(GATTService(uuid: uuid, handleRange: range))
            }
            guard last.end < 0xFFFF else { return services }
            start = last.end + 1
        }
    }

    /// Discover All Characteristics of a Service (§4.6.1): Read By Type of 0x2803 over the service's range.
    /// Each declaration value is Properties (1) | Value Handle (2) | UUID (2 or 16).
    public func discoverCharacteristics(of service: GATTService) async throws(ATTClientError) -> [GATTCharacteristic] {
        var found: [GATTCharacteristic] = []
        var start = service.handleRange.start
        let end = service.handleRange.end
        while start <= end {
            let response: ATTPDU
            do {
                response = try await att.request(
                    .readByTypeRequest(startHandle: start, endHandle: end, type: GATTAttributeType.characteristic))
            } catch where error.attError == .attributeNotFound {
                break
            }
            guard case .readByTypeResponse(let entries) = response, let last = entries.last else {
                throw ATTClientError(.protocolViolation, "empty or wrong answer to Read By Type: \(response)")
            }
            for entry in entries {
                let v = entry.value
                guard entry.handle >= start, entry.handle <= end, v.count == 5 || v.count == 19,
                    let uuid = BluetoothUUID(littleEndianBytes: Array(v[3...]))
                else {
                    throw ATTClientError(.protocolViolation, "malformed characteristic declaration \(entry)")
                }
                found.append(
                    GATTCharacteristic(
                        uuid: uuid, declarationHandle: entry.handle, valueHandle: UInt16(v[1]) | UInt16(v[2]) << 8,
                        properties: GATTProperties(rawValue: v[0]), endHandle: end))
            }
            guard last.handle < end else { break }
            start = last.handle + 1
        }
        // A characteristic ends just before the next declaration, the last one at the service's end.
        for index in found.indices.dropLast() {
            found[index].endHandle = found[index + 1].declarationHandle - 1
        }
        return found
    }

    /// Discover All Characteristic Descriptors (§4.7.1): Find Information after the value handle up to the
    /// characteristic's end.
    public func discoverDescriptors(of characteristic: GATTCharacteristic) async throws(ATTClientError) -> [GATTDescriptor] {
        var descriptors: [GATTDescriptor] = []
        guard characteristic.valueHandle < characteristic.endHandle else { return [] }
        var start = characteristic.valueHandle + 1
        let end = characteristic.endHandle
        while start <= end {
            let response: ATTPDU
            do {
                response = try await att.request(.findInformationRequest(startHandle: start, endHandle: end))
            } catch where error.attError == .attributeNotFound {
                break
            }
            guard case .findInformationResponse(let entries) = response, let last = entries.last else {
                throw ATTClientError(.protocolViolation, "empty or wrong answer to Find Information: \(response)")
            }
            for entry in entries {
                guard entry.handle >= start, entry.handle <= end else {
                    throw ATTClientError(.protocolViolation, "descriptor handle out of range \(entry)")
                }
                descriptors.append(GATTDescriptor(handle: entry.handle, uuid: entry.uuid))
            }
            guard last.handle < end else { break }
            start = last.handle + 1
        }
        return descriptors
    }

    /// All primary services with their characteristics and descriptors.
    public func discoverAll() async throws(ATTClientError) -> [GATTService] {
        var services = try await discoverPrimaryServices()
        for serviceIndex in services.indices {
            var characteristics = try await discoverCharacteristics(of: services[serviceIndex])
            for index in characteristics.indices {
                characteristics[index].descriptors = try await discoverDescriptors(of: characteristics[index])
            }
            services[serviceIndex].characteristics = characteristics
        }
        return services
    }

    // MARK: - Reads and writes

    /// Read Characteristic Value (§4.8.1): one Read Request (at most ATT_MTU - 1 octets).
    public func read(handle: UInt16) async throws(ATTClientError) -> [UInt8] {
        let response = try await att.request(.readRequest(handle: handle))
        guard case .readResponse(let value) = response else {
            throw ATTClientError(.protocolViolation, "wrong answer to Read Request: \(response)")
        }
        return value
    }

    /// Read Long Characteristic Value (§4.8.3): a Read, then Read Blob at the next offset while the answers are
    /// full (ATT_MTU - 1 octets). Attribute Not Long or Invalid Offset at the end of the value ends the read.
    public func readLong(handle: UInt16) async throws(ATTClientError) -> [UInt8] {
        var value = try await read(handle: handle)
        var full = await att.mtu - 1
        var last = value.count
        while last == full {
            guard value.count <= Int(UInt16.max) else {
                throw ATTClientError(.protocolViolation, "long read beyond offset 0xFFFF")
            }
            let response: ATTPDU
            do {
                response = try await att.request(.readBlobRequest(handle: handle, offset: UInt16(value.count)))
            } catch where error.attError == .attributeNotLong || error.attError == .invalidOffset {
                break
            }
            guard case .readBlobResponse(let part) = response else {
                throw ATTClientError(.protocolViolation, "wrong answer to Read Blob Request: \(response)")
            }
            value += part
            last = part.count
            full = await att.mtu - 1
        }
        return value
    }

    /// Write Characteristic Value (§4.9.3): Write Request, awaiting the Write Response. The value must fit one PDU
    /// (ATT_MTU - 3 octets). A write refused for link security (Insufficient Authentication, Encryption or Key Size,
    /// Core v5.4 Vol 3 Part C §10.3.1) raises the link's security to encrypted and is sent once more, as a host's
    /// GATT client does; where the link cannot be raised the error says so.
    public func write(handle: UInt16, value: [UInt8]) async throws(ATTClientError) {
        try await checkLength(value)
        do {
            try await writeRequest(handle: handle, value: value)
        } catch where error.attError.map { LinkSecurityErrors.codes.contains($0.rawValue) } == true {
            try await raiseSecurity(after: error)
            try await writeRequest(handle: handle, value: value)
        }
    }

    private func writeRequest(handle: UInt16, value: [UInt8]) async throws(ATTClientError) {
        let response = try await att.request(.writeRequest(handle: handle, value: value))
        guard case .writeResponse = response else {
            throw ATTClientError(.protocolViolation, "wrong answer to Write Request: \(response)")
        }
    }

    /// Raises the link to at least `.medium` after `refusal`; throws `refusal`, explained, when that fails.
    private func raiseSecurity(after refusal: ATTClientError) async throws(ATTClientError) {
        let current = await att.bearer.securityLevel()
        let wanted = max(LinkSecurityLevel.medium, LinkSecurityLevel(rawValue: current.rawValue + 1))
        var explained = refusal
        do {
            let reached = try await att.bearer.raiseSecurity(to: wanted)
            if reached >= wanted { return }
            explained.reason += "; the device requires link security and the link stayed at \(reached)"
        } catch {
            explained.reason += "; the device requires link security and it could not be raised: \(error)"
        }
        throw explained
    }

    /// Write Without Response (§4.9.1): a Write Command; returns once the bearer took it.
    public func writeWithoutResponse(handle: UInt16, value: [UInt8]) async throws(ATTClientError) {
        try await checkLength(value)
        try await att.command(.writeCommand(handle: handle, value: value))
    }

    /// Write Without Response of every value of `values` to `handle` as one burst (§4.9.1, one Write Command each):
    /// in this order, nothing between them, in as few bearer calls as the bearer allows
    /// (``ATTClient/writeCommands(handle:values:)``: the values are not copied into PDUs on the way; a socket puts
    /// header and value together once, in its reused sendmmsg buffer). Returns once the bearer took them all. A
    /// value longer than ATT_MTU − 3 throws `.invalidArgument` and nothing is sent. What a DFU transport streams its
    /// packets with.
    public func writeWithoutResponse(handle: UInt16, values: [ArraySlice<UInt8>]) async throws(ATTClientError) {
        try await att.writeCommands(handle: handle, values: values)
    }

    /// Writes the CCCD (§4.12.3 / Vol 3 Part G §3.3.3.3) of a discovered characteristic: `[.notification]`,
    /// `[.indication]`, or `[]` to stop. Throws `.invalidArgument` when the characteristic has no CCCD.
    public func setConfiguration(_ configuration: GATTClientConfiguration, of characteristic: GATTCharacteristic)
        async throws(ATTClientError)
    {
        guard let cccd = characteristic.cccdHandle else {
            throw ATTClientError(.invalidArgument, "\(characteristic) has no Client Characteristic Configuration")
        }
        try await write(handle: cccd, value: configuration.encoded)
    }

    /// Enables or disables notifications on a discovered characteristic.
    public func setNotifications(_ enabled: Bool, of characteristic: GATTCharacteristic) async throws(ATTClientError) {
        try await setConfiguration(enabled ? .notification : [], of: characteristic)
    }

    /// Enables or disables indications on a discovered characteristic.
    public func setIndications(_ enabled: Bool, of characteristic: GATTCharacteristic) async throws(ATTClientError) {
        try await setConfiguration(enabled ? .indication : [], of: characteristic)
    }

    private func checkLength(_ value: [UInt8]) async throws(ATTClientError) {
        let limit = await att.mtu - 3
        guard value.count <= limit else {
            throw ATTClientError(.invalidArgument, "value of \(value.count) octets exceeds ATT_MTU - 3 = \(limit)")
        }
    }
}
