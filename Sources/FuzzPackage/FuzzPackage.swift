import DFUPackage
import Foundation

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
/// libFuzzer's driver (`-sanitize=fuzzer` links it in).
@_silgen_name("LLVMFuzzerRunDriver")
func llvmFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// SwiftPM links executables with `main` aliased to `<Target>_main`, so the entry point hands over to libFuzzer.
@_cdecl("FuzzPackage_main")
public func fuzzPackageMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return llvmFuzzerRunDriver(&count, &arguments, fuzzPackage)
}
#else
/// Without `-sanitize=fuzzer` (an ordinary `swift build`), run each file given as an argument once: a crash
/// reproducer.
@main
struct FuzzPackageMain {
    static func main() {
        for path in CommandLine.arguments.dropFirst() {
            guard let contents = FileManager.default.contents(atPath: path) else {
                print("cannot read \(path)")
                continue
            }
            let bytes = [UInt8](contents)
            _ = bytes.withUnsafeBufferPointer { fuzzPackage($0.baseAddress, $0.count) }
            print("ok \(path)")
        }
    }
}
#endif
