import Foundation

/// The entry point every libFuzzer target shares (tools/fuzz, docs/reliability.md).
///
/// A target defines its `LLVMFuzzerTestOneInput` callback and hands it to ``FuzzDriver``: built with
/// `-sanitize=fuzzer -DFUZZING`, ``run(_:_:_:)`` gives control to libFuzzer; in an ordinary build, ``replay(_:)``
/// runs the callback once on each file named on the command line, so a crash file reproduces without sanitizers.
public enum FuzzDriver {
    /// libFuzzer's callback: one input, returns 0.
    public typealias Callback = @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt

    #if FUZZING
    /// Hands the process to libFuzzer's driver (linked in by `-sanitize=fuzzer`). SwiftPM aliases an executable's
    /// `main` to `<Target>_main`, which each target defines with `@_cdecl` and forwards here.
    public static func run(
        _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ callback: Callback
    ) -> CInt {
        var count = argc
        var arguments = argv
        return llvmFuzzerRunDriver(&count, &arguments, callback)
    }
    #endif

    /// Runs `callback` once on the contents of each file given as an argument and prints `ok PATH` after each.
    public static func replay(_ callback: Callback) {
        for path in CommandLine.arguments.dropFirst() {
            guard let contents = FileManager.default.contents(atPath: path) else {
                print("cannot read \(path)")
                continue
            }
            let bytes = [UInt8](contents)
            _ = bytes.withUnsafeBufferPointer { callback($0.baseAddress, $0.count) }
            print("ok \(path)")
        }
    }
}

#if FUZZING
@_silgen_name("LLVMFuzzerRunDriver")
private func llvmFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: FuzzDriver.Callback
) -> CInt
#endif
