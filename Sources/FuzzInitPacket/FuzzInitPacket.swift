import DFUPackage
import Foundation
import FuzzSupport

/// libFuzzer target for the init-packet decoders (tools/fuzz InitPacket): Secure `.dat` (the `dfu.Packet`
/// protobuf), the bare `InitCommand`, and the Legacy layouts.
///
/// Beyond "no crash": hostile bytes must end in a `PackageError`, and an `InitCommand` that decodes re-encodes to
/// bytes that decode to the same command (the package creator writes what the reader reads). A Secure packet
/// re-encoded from its decoded command and signature decodes to the same command and signature.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzInitPacket(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? InitPacket(decoding: bytes)
    _ = try? LegacyInitPacket(decoding: bytes)
    if let command = try? InitCommand(decoding: bytes) {
        let encoded = command.encode()
        guard let again = try? InitCommand(decoding: encoded) else {
            preconditionFailure("\(command) encodes to bytes that do not decode")
        }
        precondition(again == command, "asymmetric InitCommand: \(command) -> \(again)")
    }
    if let packet = try? SecureInitPacket(decoding: bytes) {
        let rebuilt = SecureInitPacket(command: packet.command, signature: packet.signature).encode()
        guard let again = try? SecureInitPacket(decoding: rebuilt) else {
            preconditionFailure("\(packet.command) re-encodes to a packet that does not decode")
        }
        precondition(again.command == packet.command, "asymmetric packet: \(packet.command) -> \(again.command)")
        precondition(again.signature == packet.signature, "signature lost in re-encoding")
    }
    return 0
}

#if FUZZING
/// SwiftPM links executables with `main` aliased to `<Target>_main`: hand over to libFuzzer.
@_cdecl("FuzzInitPacket_main")
public func fuzzInitPacketMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzDriver.run(argc, argv, fuzzInitPacket)
}
#else
/// An ordinary build replays the files given as arguments (crash reproducers).
@main enum FuzzInitPacketMain { static func main() { FuzzDriver.replay(fuzzInitPacket) } }
#endif
