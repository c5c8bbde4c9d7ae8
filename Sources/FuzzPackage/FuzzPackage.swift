import DFUPackage
import Foundation
import FuzzSupport

/// libFuzzer target for the package reader (tools/fuzz Package); the init-packet decoders have their own target,
/// FuzzInitPacket.
///
/// Every input goes through the zip/manifest/init-packet reader and, when a package reads, the verifier; the same
/// bytes also go to the manifest parser (seeds include bare `manifest.json` files). Any crash, trap or sanitizer
/// report is a bug: hostile input must end in a `PackageError`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPackage(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let package = try? FirmwarePackage(bytes: bytes) {
        _ = package.verify()
    }
    _ = try? Manifest(json: bytes)
    return 0
}

#if FUZZING
/// SwiftPM links executables with `main` aliased to `<Target>_main`: hand over to libFuzzer.
@_cdecl("FuzzPackage_main")
public func fuzzPackageMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzDriver.run(argc, argv, fuzzPackage)
}
#else
/// An ordinary build replays the files given as arguments (crash reproducers).
@main enum FuzzPackageMain { static func main() { FuzzDriver.replay(fuzzPackage) } }
#endif
