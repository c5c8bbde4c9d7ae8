import CBOR
import FuzzSupport
import MCUmgr

/// libFuzzer target for the CBOR decoder and the SMP message decoder (tools/fuzz CBOR).
///
/// Every input is decoded as one CBOR item and as one SMP message, and fed to the reassembler in two halves. What
/// decodes must re-encode to bytes that decode to the same item; any crash, trap or sanitizer report is a bug.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCBOR(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let item = try? CBOR(decoding: bytes) {
        let again = item.encoded()
        guard let reread = try? CBOR(decoding: again), reread.encoded() == again else {
            fatalError("CBOR round trip failed for \(bytes)")
        }
        _ = item.description
    }
    if let message = try? SMPMessage(decoding: bytes) {
        _ = SMPStatus(body: message.body)
        if let body = message.body {
            _ = try? SMPImageState(body: body)
            _ = try? SMPUploadResponse(body: body)
            _ = try? SMPParameters(body: body)
        }
    }
    var reassembler = SMPReassembler()
    _ = reassembler.append(Array(bytes.prefix(size / 2)))
    _ = reassembler.append(Array(bytes.dropFirst(size / 2)))
    return 0
}

#if FUZZING
/// SwiftPM links executables with `main` aliased to `<Target>_main`: hand over to libFuzzer.
@_cdecl("FuzzCBOR_main")
public func fuzzCBORMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzDriver.run(argc, argv, fuzzCBOR)
}
#else
/// An ordinary build replays the files given as arguments (crash reproducers).
@main enum FuzzCBORMain { static func main() { FuzzDriver.replay(fuzzCBOR) } }
#endif
