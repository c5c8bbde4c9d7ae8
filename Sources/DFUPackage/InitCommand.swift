import Foundation

/// `dfu.InitCommand` (pc-nrfutil `dfu-cc.proto`, proto2; the generated `Dfu_InitCommand` decodes and encodes it).
/// Every field is optional.
///
/// Wire layout (field number, wire type):
/// ```
/// 1  fw_version       varint
/// 2  hw_version       varint
/// 3  sd_req           packed varints (length-delimited); the unpacked form (varint, repeated) is accepted
/// 4  type             varint (FwType)
/// 5  sd_size          varint
/// 6  bl_size          varint
/// 7  app_size         varint
/// 8  hash             message { 1 hash_type varint, 2 hash bytes }
/// 9  is_debug         varint (bool)
/// 10 boot_validation  repeated message { 1 type varint, 2 bytes bytes }
/// ```
/// Example (nrfutil, unsigned application, 16-byte image shown shortened):
/// `08 01 10 34 1a 02 b7 01 20 00 28 00 30 00 38 90 94 03 42 24 08 03 12 20 <32 bytes> 48 00 52 04 08 01 12 00`
/// = fw 1, hw 52, sd_req [0xB7], APPLICATION, sd 0, bl 0, app 51728, SHA256, not debug, [CRC].
///
/// ``encode()`` writes every non-nil field in field-number order, as nrfutil does.
public struct InitCommand: Hashable, Sendable {
    public var fwVersion: UInt32?
    public var hwVersion: UInt32?
    public var sdReq: [UInt32]
    public var type: FirmwareType?
    public var sdSize: UInt32?
    public var blSize: UInt32?
    public var appSize: UInt32?
    public var hash: ImageHash?
    public var isDebug: Bool?
    public var bootValidation: [BootValidation]

    public init(
        fwVersion: UInt32? = nil, hwVersion: UInt32? = nil, sdReq: [UInt32] = [], type: FirmwareType? = nil,
        sdSize: UInt32? = nil, blSize: UInt32? = nil, appSize: UInt32? = nil, hash: ImageHash? = nil,
        isDebug: Bool? = nil, bootValidation: [BootValidation] = []
    ) {
        self.fwVersion = fwVersion
        self.hwVersion = hwVersion
        self.sdReq = sdReq
        self.type = type
        self.sdSize = sdSize
        self.blSize = blSize
        self.appSize = appSize
        self.hash = hash
        self.isDebug = isDebug
        self.bootValidation = bootValidation
    }

    /// Decodes serialized `InitCommand` bytes with the generated `Dfu_InitCommand`. Unknown fields are skipped; enum
    /// values newer than the schema are kept; `Hash` needs both fields and `BootValidation` its type.
    public init(decoding bytes: ArraySlice<UInt8>) throws(PackageError) {
        try self.init(decoding: Array(bytes))
    }

    public init(decoding bytes: [UInt8]) throws(PackageError) {
        let message = try Protobuf.decode(Dfu_InitCommand.self, bytes, "InitCommand")
        let unknown = try Protobuf.unknownEnums(message.unknownFields, "InitCommand")
        self.init(
            fwVersion: message.hasFwVersion ? message.fwVersion : nil,
            hwVersion: message.hasHwVersion ? message.hwVersion : nil,
            sdReq: message.sdReq,
            type: message.hasType ? FirmwareType(rawValue: UInt32(message.type.rawValue)) : unknown.hasField4 ? FirmwareType(rawValue: unknown.field4) : nil,
            sdSize: message.hasSdSize ? message.sdSize : nil,
            blSize: message.hasBlSize ? message.blSize : nil,
            appSize: message.hasAppSize ? message.appSize : nil,
            hash: message.hasHash ? try Self.hash(message.hash) : nil,
            isDebug: message.hasIsDebug ? message.isDebug : nil)
        for validation in message.bootValidation {
            bootValidation.append(try Self.bootValidation(validation))
        }
    }

    private static func hash(_ message: Dfu_Hash) throws(PackageError) -> ImageHash {
        let ctx = "InitCommand.hash"
        let unknown = try Protobuf.unknownEnums(message.unknownFields, ctx)
        let type: HashType? =
            message.hasHashType ? HashType(rawValue: UInt32(message.hashType.rawValue))
            : unknown.hasField1 ? HashType(rawValue: unknown.field1) : nil
        guard let type, message.hasHash else {
            throw PackageError(.invalidInitPacket, "\(ctx): required field \(type == nil ? "hash_type" : "hash") missing")
        }
        return ImageHash(type: type, bytes: Array(message.hash))
    }

    private static func bootValidation(_ message: Dfu_BootValidation) throws(PackageError) -> BootValidation {
        let ctx = "InitCommand.boot_validation"
        let unknown = try Protobuf.unknownEnums(message.unknownFields, ctx)
        let type: ValidationType? =
            message.hasType ? ValidationType(rawValue: UInt32(message.type.rawValue))
            : unknown.hasField1 ? ValidationType(rawValue: unknown.field1) : nil
        guard let type else { throw PackageError(.invalidInitPacket, "\(ctx): required field type missing") }
        return BootValidation(type: type, bytes: Array(message.bytes))
    }

    /// Serializes the command with the generated `Dfu_InitCommand`: every non-nil field in field-number order, zeros
    /// included, sd_req packed (nrfutil's bytes). An enum value the schema does not know is written after the known
    /// fields, as protobuf writes unknown fields.
    public func encode() -> [UInt8] {
        Protobuf.encode(message)
    }

    /// The generated message for this command.
    var message: Dfu_InitCommand {
        var m = Dfu_InitCommand()
        if let fwVersion { m.fwVersion = fwVersion }
        if let hwVersion { m.hwVersion = hwVersion }
        m.sdReq = sdReq
        if let type {
            if let known = Dfu_FwType(rawValue: Int(type.rawValue)) { m.type = known } else { Protobuf.setUnknownEnum(&m, field: 4, type.rawValue) }
        }
        if let sdSize { m.sdSize = sdSize }
        if let blSize { m.blSize = blSize }
        if let appSize { m.appSize = appSize }
        if let hash {
            var h = Dfu_Hash()
            if let known = Dfu_HashType(rawValue: Int(hash.type.rawValue)) { h.hashType = known } else { Protobuf.setUnknownEnum(&h, field: 1, hash.type.rawValue) }
            h.hash = Data(hash.bytes)
            m.hash = h
        }
        if let isDebug { m.isDebug = isDebug }
        m.bootValidation = bootValidation.map { validation in
            var v = Dfu_BootValidation()
            if let known = Dfu_ValidationType(rawValue: Int(validation.type.rawValue)) {
                v.type = known
            } else {
                Protobuf.setUnknownEnum(&v, field: 1, validation.type.rawValue)
            }
            v.bytes = Data(validation.bytes)
            return v
        }
        return m
    }
}
