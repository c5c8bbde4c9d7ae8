/// A Secure DFU init packet (`.dat`): a serialized `dfu.Packet` carrying an INIT command.
///
/// Wire layout:
/// ```
/// Packet        { 1 command Command | 2 signed_command SignedCommand }
/// SignedCommand { 1 command Command, 2 signature_type varint (0 = ECDSA_P256_SHA256), 3 signature bytes (64) }
/// Command       { 1 op_code varint (0 RESET, 1 INIT), 2 init InitCommand, 3 reset ResetCommand }
/// ```
/// Unsigned: `0a <len> 08 01 12 <len> <InitCommand>`. Signed: `12 <len> 0a <len> 08 01 12 <len> <InitCommand>
/// 10 00 1a 40 <r reversed ‖ s reversed>`.
///
/// ``initCommandBytes`` are the `Command.init` payload exactly as in the file: the signature covers them, so they
/// are never re-encoded.
public struct SecureInitPacket: Hashable, Sendable {
    /// The decoded init command.
    public var command: InitCommand
    /// The raw `InitCommand` bytes, exactly as in the file (what the signature covers).
    public var initCommandBytes: [UInt8]
    /// `SignedCommand.signature_type` (0 = ECDSA_P256_SHA256), nil when unsigned.
    public var signatureType: UInt32?
    /// `SignedCommand.signature` as stored (r and s each byte-reversed by nrfutil), nil when unsigned.
    public var signature: [UInt8]?

    public var isSigned: Bool { signature != nil }

    /// `SignatureType.ECDSA_P256_SHA256`.
    public static let ecdsaP256Sha256: UInt32 = 0

    /// Decodes a `.dat` file. Throws `.invalidInitPacket` when it is not a `dfu.Packet` with an INIT command.
    public init(decoding bytes: [UInt8]) throws(PackageError) {
        guard !bytes.isEmpty else { throw PackageError(.invalidInitPacket, "init packet is empty") }
        var packet = ProtobufReader(bytes[...], context: "Packet")
        var commandBytes: ArraySlice<UInt8>?
        var signatureType: UInt32?
        var signature: [UInt8]?
        var signedSeen = false
        while let field = try packet.next() {
            switch field.number {
            case 1: commandBytes = try field.bytes("Packet")
            case 2:
                signedSeen = true
                var signed = ProtobufReader(try field.bytes("Packet"), context: "SignedCommand")
                while let inner = try signed.next() {
                    switch inner.number {
                    case 1: commandBytes = try inner.bytes("SignedCommand")
                    case 2: signatureType = try inner.uint32("SignedCommand")
                    case 3: signature = Array(try inner.bytes("SignedCommand"))
                    default: continue
                    }
                }
            default: continue
            }
        }
        guard let commandBytes else {
            throw PackageError(.invalidInitPacket, "init packet has no command (not a dfu.Packet)")
        }
        if signedSeen {
            guard let signature else { throw PackageError(.invalidInitPacket, "signed init packet has no signature") }
            self.signature = signature
            self.signatureType = signatureType ?? Self.ecdsaP256Sha256
        }
        var command = ProtobufReader(commandBytes, context: "Command")
        var opCode: UInt32?
        var initBytes: ArraySlice<UInt8>?
        while let field = try command.next() {
            switch field.number {
            case 1: opCode = try field.uint32("Command")
            case 2: initBytes = try field.bytes("Command")
            default: continue
            }
        }
        guard opCode == 1 else {
            throw PackageError(.invalidInitPacket, "init packet command is not INIT (op_code \(opCode.map(String.init) ?? "missing"))")
        }
        guard let initBytes else { throw PackageError(.invalidInitPacket, "init packet has no InitCommand") }
        self.command = try InitCommand(decoding: initBytes)
        self.initCommandBytes = Array(initBytes)
    }

    /// Builds a packet from a command; `signature` (64 bytes, stored order) makes it signed.
    public init(command: InitCommand, signature: [UInt8]? = nil) {
        self.command = command
        self.initCommandBytes = command.encode()
        self.signature = signature
        self.signatureType = signature == nil ? nil : Self.ecdsaP256Sha256
    }

    /// Serializes the `dfu.Packet` (nrfutil's layout: op_code, init; signature_type, signature).
    public func encode() -> [UInt8] {
        var command = ProtobufWriter()
        command.writeVarint(field: 1, 1)
        command.writeBytes(field: 2, initCommandBytes)
        var packet = ProtobufWriter()
        if let signature {
            var signed = ProtobufWriter()
            signed.writeBytes(field: 1, command.bytes)
            signed.writeVarint(field: 2, UInt64(signatureType ?? Self.ecdsaP256Sha256))
            signed.writeBytes(field: 3, signature)
            packet.writeBytes(field: 2, signed.bytes)
        } else {
            packet.writeBytes(field: 1, command.bytes)
        }
        return packet.bytes
    }
}
