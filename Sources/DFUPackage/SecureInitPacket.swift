import Foundation

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
    ///
    /// The envelope is read with the generated views of `dfu-cc-views.proto`, which see `Command` and `InitCommand`
    /// as `bytes`: ``initCommandBytes`` are the stored bytes, never a re-serialization. The InitCommand itself is
    /// decoded by the generated `Dfu_InitCommand`.
    public init(decoding bytes: [UInt8]) throws(PackageError) {
        guard !bytes.isEmpty else { throw PackageError(.invalidInitPacket, "init packet is empty") }
        let packet = try Protobuf.decode(Dfu_PacketView.self, bytes, "Packet")
        let commandBytes: Data
        if packet.hasSignedCommand {
            let signed = packet.signedCommand
            guard signed.hasCommand else { throw PackageError(.invalidInitPacket, "signed init packet has no command") }
            guard signed.hasSignature else { throw PackageError(.invalidInitPacket, "signed init packet has no signature") }
            commandBytes = signed.command
            signature = Array(signed.signature)
            signatureType = signed.hasSignatureType ? signed.signatureType : Self.ecdsaP256Sha256
        } else if packet.hasCommand {
            commandBytes = packet.command
        } else {
            throw PackageError(.invalidInitPacket, "init packet has no command (not a dfu.Packet)")
        }
        let command = try Protobuf.decode(Dfu_CommandView.self, commandBytes, "Command")
        guard command.hasOpCode, command.opCode == 1 else {
            throw PackageError(
                .invalidInitPacket, "init packet command is not INIT (op_code \(command.hasOpCode ? String(command.opCode) : "missing"))")
        }
        guard command.hasInit_p else { throw PackageError(.invalidInitPacket, "init packet has no InitCommand") }
        self.initCommandBytes = Array(command.init_p)
        self.command = try InitCommand(decoding: initCommandBytes)
    }

    /// Builds a packet from a command; `signature` (64 bytes, stored order) makes it signed.
    public init(command: InitCommand, signature: [UInt8]? = nil) {
        self.command = command
        self.initCommandBytes = command.encode()
        self.signature = signature
        self.signatureType = signature == nil ? nil : Self.ecdsaP256Sha256
    }

    /// Serializes the `dfu.Packet` around ``initCommandBytes`` (nrfutil's layout: op_code, init; then
    /// signature_type, signature).
    public func encode() -> [UInt8] {
        var command = Dfu_CommandView()
        command.opCode = 1
        command.init_p = Data(initCommandBytes)
        var packet = Dfu_PacketView()
        if let signature {
            var signed = Dfu_SignedCommandView()
            signed.command = Data(Protobuf.encode(command))
            signed.signatureType = signatureType ?? Self.ecdsaP256Sha256
            signed.signature = Data(signature)
            packet.signedCommand = signed
        } else {
            packet.command = Data(Protobuf.encode(command))
        }
        return Protobuf.encode(packet)
    }
}
