import BLECore
import LegacyDFU
import Testing

/// One request vector: the bytes written to the Control Point and the decoded value.
struct LegacyRequestVector: Sendable, CustomStringConvertible {
    var bytes: [UInt8]
    var request: LegacyRequest
    var description: String { bytes.hexString }
}

let legacyRequestVectors: [LegacyRequestVector] = [
    // Start DFU, image type application (0x04)
    LegacyRequestVector(bytes: [0x01, 0x04], request: .startDFU(.application)),
    // Start DFU, SoftDevice + bootloader (0x01 | 0x02)
    LegacyRequestVector(bytes: [0x01, 0x03], request: .startDFU([.softdevice, .bootloader])),
    // Start DFU, SoftDevice only
    LegacyRequestVector(bytes: [0x01, 0x01], request: .startDFU(.softdevice)),
    // Start DFU, bootloader only
    LegacyRequestVector(bytes: [0x01, 0x02], request: .startDFU(.bootloader)),
    // Start DFU without a type (SDK <= 6.0)
    LegacyRequestVector(bytes: [0x01], request: .startDFUWithoutType),
    // Initialize DFU Parameters, receive (the init packet follows)
    LegacyRequestVector(bytes: [0x02, 0x00], request: .initialize(.receive)),
    // Initialize DFU Parameters, complete
    LegacyRequestVector(bytes: [0x02, 0x01], request: .initialize(.complete)),
    // Initialize DFU Parameters without a step (SDK <= 6.1)
    LegacyRequestVector(bytes: [0x02], request: .initializeWithoutStep),
    // Receive Firmware Image
    LegacyRequestVector(bytes: [0x03], request: .receiveFirmwareImage),
    // Validate
    LegacyRequestVector(bytes: [0x04], request: .validate),
    // Activate and Reset
    LegacyRequestVector(bytes: [0x05], request: .activateAndReset),
    // Reset
    LegacyRequestVector(bytes: [0x06], request: .reset),
    // Report Received Image Size
    LegacyRequestVector(bytes: [0x07], request: .reportReceivedImageSize),
    // PRN Request, every 10 packets (nrfutil 0.5: 08 0a 00)
    LegacyRequestVector(bytes: [0x08, 0x0A, 0x00], request: .packetReceiptRequest(10)),
    // PRN Request, every 0x0102 = 258 packets
    LegacyRequestVector(bytes: [0x08, 0x02, 0x01], request: .packetReceiptRequest(258)),
    // PRN Request 0: off
    LegacyRequestVector(bytes: [0x08, 0x00, 0x00], request: .packetReceiptRequest(0)),
    // Unknown opcode 0x09 with parameters AA BB
    LegacyRequestVector(
        bytes: [0x09, 0xAA, 0xBB], request: .unknown(opcode: LegacyOpcode(rawValue: 0x09), parameters: [0xAA, 0xBB])),
    // Unknown image type 0x10 survives
    LegacyRequestVector(bytes: [0x01, 0x10], request: .startDFU(LegacyImageType(rawValue: 0x10))),
    // Unknown init step 0x07 survives
    LegacyRequestVector(bytes: [0x02, 0x07], request: .initialize(LegacyInitStep(rawValue: 0x07))),
]

/// One notification vector: the bytes the device notifies and the decoded value.
struct LegacyNotificationVector: Sendable, CustomStringConvertible {
    var bytes: [UInt8]
    var notification: LegacyNotification
    var description: String { bytes.hexString }
}

let legacyNotificationVectors: [LegacyNotificationVector] = {
    var vectors: [LegacyNotificationVector] = []
    // Every request opcode with every status: 10 <op> <status>.
    let statuses: [LegacyStatus] = [.success, .invalidState, .notSupported, .dataSizeExceedsLimit, .crcError, .operationFailed]
    // (10 07 01 is the size report below; 09 is an unknown opcode: 10 09 03, "not supported", as ble_dfu.c answers.)
    for op: UInt8 in [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09] {
        for status in statuses where op != 0x07 || status != .success {
            vectors.append(
                LegacyNotificationVector(
                    bytes: [0x10, op, status.rawValue],
                    notification: .response(request: LegacyOpcode(rawValue: op), status: status)))
        }
    }
    // Report Received Image Size: 10 07 01, 0x0000563C = 22076 bytes
    vectors.append(LegacyNotificationVector(bytes: [0x10, 0x07, 0x01, 0x3C, 0x56, 0x00, 0x00], notification: .receivedImageSize(22076)))
    // (A failed Report Received Image Size, 10 07 02 above, never sent by the SDK, is a plain response.)
    // PRN: 11, 200 bytes (10 packets of 20)
    vectors.append(LegacyNotificationVector(bytes: [0x11, 0xC8, 0x00, 0x00, 0x00], notification: .packetReceipt(bytesReceived: 200)))
    // PRN: 0x01020304 bytes
    vectors.append(
        LegacyNotificationVector(bytes: [0x11, 0x04, 0x03, 0x02, 0x01], notification: .packetReceipt(bytesReceived: 0x0102_0304)))
    // Unknown status 0x7F survives
    vectors.append(
        LegacyNotificationVector(
            bytes: [0x10, 0x04, 0x7F], notification: .response(request: .validate, status: LegacyStatus(rawValue: 0x7F))))
    return vectors
}()

@Suite(.timeLimit(.minutes(2))) struct LegacyRequestCodecTests {
    @Test(arguments: legacyRequestVectors)
    func decodes(_ vector: LegacyRequestVector) throws {
        #expect(try LegacyRequest(decoding: vector.bytes) == vector.request)
    }

    @Test(arguments: legacyRequestVectors)
    func encodes(_ vector: LegacyRequestVector) {
        #expect(vector.request.encoded == vector.bytes)
        #expect(vector.request.opcode.rawValue == vector.bytes[0])
    }

    /// A prefix that cuts a fixed field is truncated; the empty input is `.empty`. `01` and `02` alone are the SDK 6
    /// forms of Start and Initialize, so the one-byte prefixes of `01 xx` and `02 xx` decode, differently.
    @Test(arguments: legacyRequestVectors)
    func truncatedPrefixes(_ vector: LegacyRequestVector) {
        for length in 0..<vector.bytes.count {
            let prefix = Array(vector.bytes[0..<length])
            switch Result(catching: { () throws(LegacyDecodingError) in try LegacyRequest(decoding: prefix) }) {
            case .success(let decoded):
                #expect(decoded != vector.request, "prefix \(prefix.hexString) decoded to the full request")
                #expect([LegacyRequest.startDFUWithoutType, .initializeWithoutStep].contains(decoded) || decoded.opcode.rawValue == 0x09)
            case .failure(let error):
                #expect(error.code == (length == 0 ? .empty : .truncated), "prefix \(prefix.hexString): \(error)")
            }
        }
    }

    @Test(arguments: [[0x03, 0x00], [0x04, 0x01], [0x01, 0x04, 0x00], [0x08, 0x0A, 0x00, 0x00], [0x07, 0x07]] as [[UInt8]])
    func trailingBytesAreMalformed(_ bytes: [UInt8]) {
        #expect(throws: LegacyDecodingError(.malformed, "")) { try LegacyRequest(decoding: bytes) }
    }

    @Test func descriptionsNameTheRequest() {
        #expect(LegacyRequest.startDFU([.softdevice, .bootloader]).description == "Start DFU (SoftDevice+bootloader)")
        #expect(LegacyRequest.packetReceiptRequest(12).description == "PRN every 12 packets")
        #expect(LegacyRequest.reportReceivedImageSize.description == "Report Received Image Size")
        #expect(LegacyOpcode(rawValue: 0x42).description == "Unknown (0x42)")
    }
}

@Suite(.timeLimit(.minutes(2))) struct LegacyNotificationCodecTests {
    @Test(arguments: legacyNotificationVectors)
    func decodes(_ vector: LegacyNotificationVector) throws {
        #expect(try LegacyNotification(decoding: vector.bytes) == vector.notification)
    }

    @Test(arguments: legacyNotificationVectors)
    func encodes(_ vector: LegacyNotificationVector) {
        #expect(vector.notification.encoded == vector.bytes)
    }

    /// Every proper prefix of a notification is truncated (the empty one `.empty`): none of them is a notification.
    @Test(arguments: legacyNotificationVectors)
    func truncatedPrefixes(_ vector: LegacyNotificationVector) {
        for length in 0..<vector.bytes.count {
            let prefix = Array(vector.bytes[0..<length])
            switch Result(catching: { () throws(LegacyDecodingError) in try LegacyNotification(decoding: prefix) }) {
            case .success(let decoded): Issue.record("prefix \(prefix.hexString) decoded to \(decoded)")
            case .failure(let error): #expect(error.code == (length == 0 ? .empty : .truncated), "\(prefix.hexString)")
            }
        }
    }

    @Test(arguments: [
        [0x10, 0x04, 0x01, 0x00],  // a response with a trailing byte (Android refuses it: not 3 bytes)
        [0x11, 0x01, 0x00, 0x00, 0x00, 0x00],  // a PRN with 5 count bytes
        [0x60, 0x01, 0x01],  // a Secure DFU response
        [0x20, 0x01, 0x01],  // a Secure buttonless response
        [0x01],
    ] as [[UInt8]])
    func malformed(_ bytes: [UInt8]) {
        #expect(throws: LegacyDecodingError(.malformed, "")) { try LegacyNotification(decoding: bytes) }
    }

    /// Every status has its name, as the SDK names it (`ble_dfu_resp_val_t`).
    @Test func statusNames() {
        let names = (1...6).map { LegacyStatus(rawValue: UInt8($0)).description }
        #expect(
            names == [
                "success (0x01)", "invalid state (0x02)", "not supported (0x03)", "data size exceeds limit (0x04)",
                "CRC error (0x05)", "operation failed (0x06)",
            ])
        #expect(LegacyStatus(rawValue: 0x09).description == "unknown status (0x09)")
        let response = LegacyNotification.response(request: .validate, status: .crcError)
        #expect(response.description == "Response to Validate (0x04): CRC error (0x05)")
    }
}

@Suite(.timeLimit(.minutes(2))) struct LegacyValueCodecTests {
    /// Sizes packet: SoftDevice 0x0001F000, bootloader 0x4BBC (19388), application 0.
    @Test func startSizesBothDirections() throws {
        let bytes: [UInt8] = [0x00, 0xF0, 0x01, 0x00, 0xBC, 0x4B, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]
        let sizes = LegacyStartSizes(softdevice: 0x1F000, bootloader: 19388, application: 0)
        #expect(try LegacyStartSizes(decoding: bytes) == sizes)
        #expect(sizes.encoded == bytes)
        #expect(sizes.imageType == [.softdevice, .bootloader])
        #expect(LegacyStartSizes(application: 22076).encodedApplicationOnly == [0x3C, 0x56, 0x00, 0x00])
        for length in 0..<12 {
            let prefix = Array(bytes[0..<length])
            #expect(throws: LegacyDecodingError(length == 0 ? .empty : .truncated, "")) { try LegacyStartSizes(decoding: prefix) }
        }
        #expect(throws: LegacyDecodingError(.malformed, "")) { try LegacyStartSizes(decoding: bytes + [0]) }
    }

    /// DFU Version: 08 00 = 0.8 (SDK 11 bootloader), 01 00 = 0.1 (application), 05 00 = 0.5 (SDK 7).
    @Test func dfuVersionBothDirections() throws {
        let v08 = try LegacyDFUVersion(decoding: [0x08, 0x00])
        #expect(v08 == .sdk11 && v08.description == "0.8" && !v08.isApplication && v08.requiresExtendedInitPacket)
        let v01 = try LegacyDFUVersion(decoding: [0x01, 0x00])
        #expect(v01 == .application && v01.isApplication && v01.encoded == [0x01, 0x00])
        #expect(LegacyDFUVersion(major: 0, minor: 5).encoded == [0x05, 0x00])
        #expect(LegacyDFUVersion(major: 1, minor: 2).description == "1.2")
        #expect(throws: LegacyDecodingError(.empty, "")) { try LegacyDFUVersion(decoding: []) }
        #expect(throws: LegacyDecodingError(.truncated, "")) { try LegacyDFUVersion(decoding: [0x08]) }
        #expect(throws: LegacyDecodingError(.malformed, "")) { try LegacyDFUVersion(decoding: [0x08, 0x00, 0x00]) }
    }

    /// The service and its characteristics sit in the base 0000xxxx-1212-EFDE-1523-785FEABCD123.
    @Test func uuids() {
        #expect(LegacyDFUUUID.service.description.uppercased() == "00001530-1212-EFDE-1523-785FEABCD123")
        #expect(LegacyDFUUUID.controlPoint.description.uppercased() == "00001531-1212-EFDE-1523-785FEABCD123")
        #expect(LegacyDFUUUID.packet.description.uppercased() == "00001532-1212-EFDE-1523-785FEABCD123")
        #expect(LegacyDFUUUID.version.description.uppercased() == "00001534-1212-EFDE-1523-785FEABCD123")
    }

    @Test func imageTypeNames() {
        #expect(LegacyImageType.application.description == "application")
        #expect(LegacyImageType([.softdevice, .bootloader]).description == "SoftDevice+bootloader")
        #expect(LegacyImageType(rawValue: 0x84).description == "application+0x84")
    }
}
