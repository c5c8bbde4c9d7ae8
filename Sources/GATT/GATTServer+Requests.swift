import ATT
import BLECore
import Logging

/// A read of one attribute: its value or the ATT error the read gets.
enum GATTReadOutcome {
    case success([UInt8])
    case failure(ATTErrorCode)
}

/// The server's answers to client PDUs (Core v5.4 Vol 3 Part F §3.4, Vol 3 Part G §4).
extension GATTServer {
    /// Largest attribute value (Core v5.4 Vol 3 Part F §3.2.9: 512 octets).
    static let maximumValueLength = 512

    func handle(_ bytes: [UInt8]) async {
        let pdu: ATTPDU
        do {
            pdu = try ATTPDU(decoding: bytes)
        } catch {
            logger.debug("GATT server cannot decode a PDU", metadata: ["att.error": "\(error)"])
            // Core v5.4 Vol 3 Part F §3.4.1.1: a malformed request is answered with Invalid PDU; a malformed command
            // (bit 6 set) or anything else without a response is dropped.
            if let first = bytes.first, ATTOpcode(first).kind == .request {
                try? await send(.errorResponse(requestOpcode: ATTOpcode(first), handle: 0, error: .invalidPDU))
            }
            return
        }
        await delegate?.beforeHandling(pdu, server: self)
        if let response = await response(to: pdu) {
            // A failed send has already ended the link (`send` records why); nothing more to do for this PDU.
            try? await send(response)
        }
        await delegate?.afterResponding(to: pdu, server: self)
    }

    /// The response to one PDU, or nil when none is due (commands, confirmations).
    private func response(to pdu: ATTPDU) async -> ATTPDU? {
        switch pdu {
        case .exchangeMTURequest(let clientRxMTU):
            exchangedMTU(clientRxMTU: clientRxMTU)
            return .exchangeMTUResponse(serverRxMTU: maximumMTU)
        case .findInformationRequest(let start, let end):
            return checkRange(pdu.opcode, start, end) ?? findInformation(start, end)
        case .findByTypeValueRequest(let start, let end, let type, let value):
            return checkRange(pdu.opcode, start, end) ?? findByTypeValue(start, end, type, value)
        case .readByTypeRequest(let start, let end, let type):
            if let invalid = checkRange(pdu.opcode, start, end) { return invalid }
            return await readByType(start, end, type)
        case .readByGroupTypeRequest(let start, let end, let type):
            if let invalid = checkRange(pdu.opcode, start, end) { return invalid }
            return readByGroupType(start, end, type)
        case .readRequest(let handle):
            switch await readValue(handle, offset: 0) {
            case .success(let value): return .readResponse(value: Array(value.prefix(mtu - 1)))
            case .failure(let error): return .errorResponse(requestOpcode: pdu.opcode, handle: handle, error: error)
            }
        case .readBlobRequest(let handle, let offset):
            switch await readValue(handle, offset: Int(offset)) {
            case .success(let value):
                // Core v5.4 Vol 3 Part F §3.4.4.5: an offset past the end of the value is an Invalid Offset.
                guard Int(offset) <= value.count else {
                    return .errorResponse(requestOpcode: pdu.opcode, handle: handle, error: .invalidOffset)
                }
                return .readBlobResponse(value: Array(value[Int(offset)...].prefix(mtu - 1)))
            case .failure(let error): return .errorResponse(requestOpcode: pdu.opcode, handle: handle, error: error)
            }
        case .writeRequest(let handle, let value):
            if let error = await write(handle, value, withResponse: true) {
                return .errorResponse(requestOpcode: pdu.opcode, handle: handle, error: error)
            }
            return .writeResponse
        case .writeCommand(let handle, let value):
            // Core v5.4 Vol 3 Part F §3.4.5.3: no response, not even an error, to a Write Command.
            _ = await write(handle, value, withResponse: false)
            return nil
        case .handleValueConfirmation:
            confirmationReceived()
            return nil
        default:
            // Core v5.4 Vol 3 Part F §3.4.1.1 / §3.3: unsupported requests get Request Not Supported (handle 0);
            // unsupported commands and anything that is not a request are ignored.
            guard pdu.opcode.kind == .request || (pdu.opcode.kind == .unknown && !pdu.opcode.isCommand) else {
                return nil
            }
            return .errorResponse(requestOpcode: pdu.opcode, handle: 0, error: .requestNotSupported)
        }
    }

    /// Core v5.4 Vol 3 Part F §3.4.3.1 (and the other range requests): a starting handle of 0 or greater than the
    /// ending handle is an Invalid PDU, reported with the starting handle.
    private func checkRange(_ opcode: ATTOpcode, _ start: UInt16, _ end: UInt16) -> ATTPDU? {
        guard start == 0 || start > end else { return nil }
        return .errorResponse(requestOpcode: opcode, handle: start, error: .invalidPDU)
    }

    private func attributes(in start: UInt16, _ end: UInt16) -> ArraySlice<GATTAttribute> {
        let all = database.attributes
        let lower = min(Int(start) - 1, all.count)
        let upper = min(Int(end), all.count)
        guard lower < upper else { return [] }
        return all[lower..<upper]
    }

    private func findInformation(_ start: UInt16, _ end: UInt16) -> ATTPDU {
        var entries: [ATTHandleUUID] = []
        var is16Bit = true
        for attribute in attributes(in: start, end) {
            let short = attribute.type.uuid16 != nil
            if entries.isEmpty { is16Bit = short }
            // §3.4.3.2: one format per response; stop where the UUID size changes or the PDU would exceed ATT_MTU.
            guard short == is16Bit, 2 + (entries.count + 1) * (short ? 4 : 18) <= mtu else { break }
            entries.append(ATTHandleUUID(handle: attribute.handle, uuid: attribute.type))
        }
        guard !entries.isEmpty else { return notFound(.findInformationRequest, start) }
        return .findInformationResponse(entries)
    }

    private func findByTypeValue(_ start: UInt16, _ end: UInt16, _ type: UInt16, _ value: [UInt8]) -> ATTPDU {
        var ranges: [ATTHandleRange] = []
        let wanted = BluetoothUUID(type)
        for attribute in attributes(in: start, end) where attribute.type == wanted {
            guard values[Int(attribute.handle) - 1] == value else { continue }
            guard 1 + (ranges.count + 1) * 4 <= mtu else { break }
            // §3.4.3.4: the group end handle of a grouping attribute, else the found handle itself.
            var groupEnd = attribute.handle
            if case .serviceDeclaration(let endHandle) = attribute.role { groupEnd = endHandle }
            ranges.append(ATTHandleRange(start: attribute.handle, end: groupEnd))
        }
        guard !ranges.isEmpty else { return notFound(.findByTypeValueRequest, start) }
        return .findByTypeValueResponse(ranges)
    }

    private func readByType(_ start: UInt16, _ end: UInt16, _ type: BluetoothUUID) async -> ATTPDU {
        var entries: [ATTHandleValue] = []
        // §3.4.4.2: each value is at most min(ATT_MTU - 4, 253) octets, and all have the first one's length.
        let limit = min(mtu - 4, 253)
        for attribute in attributes(in: start, end) where attribute.type == type {
            let value: [UInt8]
            switch await readValue(attribute.handle, offset: 0) {
            case .success(let read): value = Array(read.prefix(limit))
            case .failure(let error):
                // §3.4.4.1: an error on the first attribute is reported; later ones end the list.
                if entries.isEmpty {
                    return .errorResponse(requestOpcode: .readByTypeRequest, handle: attribute.handle, error: error)
                }
                return .readByTypeResponse(entries)
            }
            if let first = entries.first, first.value.count != value.count { break }
            guard 2 + (entries.count + 1) * (2 + value.count) <= mtu else { break }
            entries.append(ATTHandleValue(handle: attribute.handle, value: value))
        }
        guard !entries.isEmpty else { return notFound(.readByTypeRequest, start) }
        return .readByTypeResponse(entries)
    }

    private func readByGroupType(_ start: UInt16, _ end: UInt16, _ type: BluetoothUUID) -> ATTPDU {
        // Core v5.4 Vol 3 Part G §4.4.1: primary service discovery is the only grouping read this server supports.
        guard type == GATTAttributeType.primaryService else {
            return .errorResponse(requestOpcode: .readByGroupTypeRequest, handle: start, error: .unsupportedGroupType)
        }
        var entries: [ATTGroupValue] = []
        let limit = min(mtu - 6, 251)
        for attribute in attributes(in: start, end) where attribute.type == type {
            guard case .serviceDeclaration(let endHandle) = attribute.role else { continue }
            let value = Array(values[Int(attribute.handle) - 1].prefix(limit))
            if let first = entries.first, first.value.count != value.count { break }
            guard 2 + (entries.count + 1) * (4 + value.count) <= mtu else { break }
            entries.append(ATTGroupValue(handle: attribute.handle, endGroupHandle: endHandle, value: value))
        }
        guard !entries.isEmpty else { return notFound(.readByGroupTypeRequest, start) }
        return .readByGroupTypeResponse(entries)
    }

    /// §3.4.3.2 and friends: nothing in the range is Attribute Not Found, reported with the starting handle.
    private func notFound(_ opcode: ATTOpcode, _ start: UInt16) -> ATTPDU {
        .errorResponse(requestOpcode: opcode, handle: start, error: .attributeNotFound)
    }

    /// The full value of an attribute as this connection sees it, or the error a read of it gets.
    private func readValue(_ handle: UInt16, offset: Int) async -> GATTReadOutcome {
        guard var attribute = database[handle] else { return .failure(.invalidHandle) }
        guard attribute.permissions.contains(.read) else { return .failure(.readNotPermitted) }
        attribute.value = values[Int(handle) - 1]
        switch attribute.role {
        case .clientConfiguration(let valueHandle):
            return .success(clientConfiguration(valueHandle: valueHandle).encoded)
        case .serviceDeclaration, .characteristicDeclaration:
            return .success(attribute.value)
        case .characteristicValue, .descriptor:
            switch await delegate?.read(attribute, offset: offset, server: self) ?? .storedValue {
            case .storedValue: return .success(attribute.value)
            case .value(let value): return .success(value)
            case .error(let error): return .failure(error)
            }
        }
    }

    /// Applies a write; nil on success, else the ATT error (for a Write Request's Error Response).
    private func write(_ handle: UInt16, _ value: [UInt8], withResponse: Bool) async -> ATTErrorCode? {
        guard var attribute = database[handle] else { return .invalidHandle }
        guard attribute.permissions.contains(.write) else { return .writeNotPermitted }
        // Core v5.4 Vol 3 Part C §10.3.1: a write that needs an encrypted link, on one that is not, is refused.
        if attribute.permissions.contains(.encryptionRequired), await !bearer.securityLevel().isEncrypted {
            return .insufficientAuthentication
        }
        guard value.count <= Self.maximumValueLength else { return .invalidAttributeValueLength }
        attribute.value = values[Int(handle) - 1]
        switch attribute.role {
        case .serviceDeclaration, .characteristicDeclaration:
            return .writeNotPermitted
        case .clientConfiguration(let valueHandle):
            // Core v5.4 Vol 3 Part G §3.3.3.3: the CCCD value is two octets.
            guard value.count == 2 else { return .invalidAttributeValueLength }
            let configuration = GATTClientConfiguration(rawValue: UInt16(value[0]) | UInt16(value[1]) << 8)
            setConfiguration(configuration, valueHandle: valueHandle)
            await delegate?.clientConfigurationChanged(valueHandle: valueHandle, configuration: configuration, server: self)
            return nil
        case .characteristicValue(let properties):
            // Core v5.4 Vol 3 Part G §3.3.1.1: a Write Request needs the Write property, a Write Command the Write
            // Without Response property (a refused command is dropped silently by the caller).
            let needed: GATTProperties = withResponse ? .write : .writeWithoutResponse
            guard properties.contains(needed) else { return .writeNotPermitted }
        case .descriptor:
            break
        }
        if let refusal = await delegate?.write(attribute, value: value, withResponse: withResponse, server: self) {
            return refusal
        }
        values[Int(handle) - 1] = value
        return nil
    }
}
