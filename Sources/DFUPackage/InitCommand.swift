/// `dfu.InitCommand` (pc-nrfutil `dfu-cc.proto`, proto2). Every field is optional.
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
/// `08 01 10 34 1a 01 b7 20 00 28 00 30 00 38 90 94 03 42 24 08 03 12 20 <32 bytes> 48 00 52 04 08 01 12 00`
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

    /// Decodes serialized `InitCommand` bytes. Unknown fields are skipped.
    public init(decoding bytes: ArraySlice<UInt8>) throws(PackageError) {
        self.init()
        let ctx = "InitCommand"
        var reader = ProtobufReader(bytes, context: ctx)
        while let field = try reader.next() {
            switch field.number {
            case 1: fwVersion = try field.uint32(ctx)
            case 2: hwVersion = try field.uint32(ctx)
            case 3:
                if field.wireType == .lengthDelimited {
                    var packed = ProtobufReader(field.payload, context: "InitCommand.sd_req")
                    while !packed.isAtEnd { sdReq.append(UInt32(truncatingIfNeeded: try packed.readVarint())) }
                } else {
                    sdReq.append(try field.uint32(ctx))
                }
            case 4: type = FirmwareType(rawValue: try field.uint32(ctx))
            case 5: sdSize = try field.uint32(ctx)
            case 6: blSize = try field.uint32(ctx)
            case 7: appSize = try field.uint32(ctx)
            case 8: hash = try Self.decodeHash(try field.bytes(ctx))
            case 9: isDebug = try field.uint32(ctx) != 0
            case 10: bootValidation.append(try Self.decodeBootValidation(try field.bytes(ctx)))
            default: continue
            }
        }
    }

    public init(decoding bytes: [UInt8]) throws(PackageError) {
        try self.init(decoding: bytes[...])
    }

    private static func decodeHash(_ bytes: ArraySlice<UInt8>) throws(PackageError) -> ImageHash {
        let ctx = "InitCommand.hash"
        var reader = ProtobufReader(bytes, context: ctx)
        var type: HashType?
        var digest: [UInt8]?
        while let field = try reader.next() {
            switch field.number {
            case 1: type = HashType(rawValue: try field.uint32(ctx))
            case 2: digest = Array(try field.bytes(ctx))
            default: continue
            }
        }
        guard let type, let digest else {
            throw PackageError(.invalidInitPacket, "\(ctx): required field \(type == nil ? "hash_type" : "hash") missing")
        }
        return ImageHash(type: type, bytes: digest)
    }

    private static func decodeBootValidation(_ bytes: ArraySlice<UInt8>) throws(PackageError) -> BootValidation {
        let ctx = "InitCommand.boot_validation"
        var reader = ProtobufReader(bytes, context: ctx)
        var type: ValidationType?
        var payload: [UInt8] = []
        while let field = try reader.next() {
            switch field.number {
            case 1: type = ValidationType(rawValue: try field.uint32(ctx))
            case 2: payload = Array(try field.bytes(ctx))
            default: continue
            }
        }
        guard let type else { throw PackageError(.invalidInitPacket, "\(ctx): required field type missing") }
        return BootValidation(type: type, bytes: payload)
    }

    /// Serializes the command: every non-nil field, in field-number order, zeros included; sd_req packed.
    public func encode() -> [UInt8] {
        var w = ProtobufWriter()
        if let fwVersion { w.writeVarint(field: 1, UInt64(fwVersion)) }
        if let hwVersion { w.writeVarint(field: 2, UInt64(hwVersion)) }
        if !sdReq.isEmpty {
            var packed = ProtobufWriter()
            for value in sdReq { packed.writeVarint(UInt64(value)) }
            w.writeBytes(field: 3, packed.bytes)
        }
        if let type { w.writeVarint(field: 4, UInt64(type.rawValue)) }
        if let sdSize { w.writeVarint(field: 5, UInt64(sdSize)) }
        if let blSize { w.writeVarint(field: 6, UInt64(blSize)) }
        if let appSize { w.writeVarint(field: 7, UInt64(appSize)) }
        if let hash {
            var h = ProtobufWriter()
            h.writeVarint(field: 1, UInt64(hash.type.rawValue))
            h.writeBytes(field: 2, hash.bytes)
            w.writeBytes(field: 8, h.bytes)
        }
        if let isDebug { w.writeVarint(field: 9, isDebug ? 1 : 0) }
        for validation in bootValidation {
            var v = ProtobufWriter()
            v.writeVarint(field: 1, UInt64(validation.type.rawValue))
            v.writeBytes(field: 2, validation.bytes)
            w.writeBytes(field: 10, v.bytes)
        }
        return w.bytes
    }
}
