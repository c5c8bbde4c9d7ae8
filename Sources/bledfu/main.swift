import BledfuCLI
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

// The libraries log at trace and debug level only (swift-log). BLEDFU_LOG=trace|debug|info|notice|warning|error
// sends their records to standard error, for finding where a run stopped (docs/development.md); unset, they stay
// silent and the command's own lines are all a user sees.
let level = ProcessInfo.processInfo.environment["BLEDFU_LOG"].flatMap(Logger.Level.init(rawValue:))
LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = level ?? .critical
    return handler
}
let code = await BledfuCommand.runMain()
exit(code)
