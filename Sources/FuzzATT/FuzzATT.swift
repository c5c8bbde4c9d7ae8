import ATT
import Foundation

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
/// libFuzzer's driver (`-sanitize=fuzzer` links it in).
@_silgen_name("LLVMFuzzerRunDriver")
func llvmFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// SwiftPM links executables with `main` aliased to `<Target>_main`, so the entry point hands over to libFuzzer.
@_cdecl("FuzzATT_main")
public func fuzzATTMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return llvmFuzzerRunDriver(&count, &arguments, fuzzATT)
}
#else
/// Without `-sanitize=fuzzer` (an ordinary `swift build`), run each file given as an argument once: a crash
/// reproducer.
@main
struct FuzzATTMain {
    static func main() {
        for path in CommandLine.arguments.dropFirst() {
            guard let contents = FileManager.default.contents(atPath: path) else {
                print("cannot read \(path)")
                continue
            }
            let bytes = [UInt8](contents)
            _ = bytes.withUnsafeBufferPointer { fuzzATT($0.baseAddress, $0.count) }
            print("ok \(path)")
        }
    }
}
#endif
