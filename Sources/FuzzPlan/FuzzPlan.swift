import Fleet
import Foundation

/// libFuzzer target for the batch plan parser (`PlanParser`, YAML through Yams) (tools/fuzz Plan).
///
/// Any input, UTF-8 or not, must end in a `BatchPlan` or a `PlanError` whose description prints on one line; no
/// crash, trap or sanitizer report. A plan that parses must parse again identically (the parser is deterministic).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPlan(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    do {
        let plan = try PlanParser.parse(text)
        precondition((try? PlanParser.parse(text)) == plan, "the same plan parsed twice differs")
    } catch {
        _ = error.description
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
@_cdecl("FuzzPlan_main")
public func fuzzPlanMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return llvmFuzzerRunDriver(&count, &arguments, fuzzPlan)
}
#else
/// Without `-sanitize=fuzzer` (an ordinary `swift build`), run each file given as an argument once: a crash
/// reproducer.
@main
struct FuzzPlanMain {
    static func main() {
        for path in CommandLine.arguments.dropFirst() {
            guard let contents = FileManager.default.contents(atPath: path) else {
                print("cannot read \(path)")
                continue
            }
            let bytes = [UInt8](contents)
            _ = bytes.withUnsafeBufferPointer { fuzzPlan($0.baseAddress, $0.count) }
            print("ok \(path)")
        }
    }
}
#endif
