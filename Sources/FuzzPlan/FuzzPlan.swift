import Batch
import Foundation
import FuzzSupport

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
/// SwiftPM links executables with `main` aliased to `<Target>_main`: hand over to libFuzzer.
@_cdecl("FuzzPlan_main")
public func fuzzPlanMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzDriver.run(argc, argv, fuzzPlan)
}
#else
/// An ordinary build replays the files given as arguments (crash reproducers).
@main enum FuzzPlanMain { static func main() { FuzzDriver.replay(fuzzPlan) } }
#endif
