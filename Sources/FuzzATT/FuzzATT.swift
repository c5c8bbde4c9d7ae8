import ATT
import Foundation
import FuzzSupport

/// libFuzzer target for the ATT PDU codec (tools/fuzz ATT).
///
/// Input: one ATT PDU as it arrives on the bearer (opcode byte, then parameters). Checks, beyond "no crash":
/// - decoding a slice that does not start at index 0 gives the same result as decoding the array;
/// - the codec is symmetric on what it accepts: decode → encode → decode gives the same PDU, and its description
///   prints.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzATT(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let padded = [0xEE] + bytes
    let fromArray = Result { () throws(ATTDecodingError) in try ATTPDU(decoding: bytes) }
    let fromSlice = Result { () throws(ATTDecodingError) in try ATTPDU(decoding: padded[1...]) }
    switch (fromArray, fromSlice) {
    case (.success(let pdu), .success(let other)):
        precondition(pdu == other, "slice decode differs: \(pdu) vs \(other)")
        _ = pdu.description
        let encoded = pdu.encoded
        guard let again = try? ATTPDU(decoding: encoded) else {
            preconditionFailure("\(pdu) encodes to \(encoded) which does not decode")
        }
        precondition(again == pdu, "asymmetric codec: \(pdu) -> \(encoded) -> \(again)")
    case (.failure, .failure): break
    default: preconditionFailure("array and slice decoding disagree on \(bytes)")
    }
    return 0
}

#if FUZZING
/// SwiftPM links executables with `main` aliased to `<Target>_main`: hand over to libFuzzer.
@_cdecl("FuzzATT_main")
public func fuzzATTMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzDriver.run(argc, argv, fuzzATT)
}
#else
/// An ordinary build replays the files given as arguments (crash reproducers).
@main enum FuzzATTMain { static func main() { FuzzDriver.replay(fuzzATT) } }
#endif
