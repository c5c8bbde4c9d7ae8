import DFUCore
import Foundation
import SimulatorHost

/// The simulator's profiles as bledfu ships them (SimulatorHost's ``ProfileCatalog``: the Firmware directory, then
/// the profiles built into the binary), for the commands that load profiles (`simulate`, `bench`).
enum SimulatorProfiles {
    /// Where the bundled profiles and samples live.
    static func firmwareDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        ProfileCatalog.firmwareDirectory(environment: environment)
    }

    /// The Firmware directory found now and the profiles this binary carries (tools/generate-embedded).
    static var catalog: ProfileCatalog {
        ProfileCatalog(directory: firmwareDirectory(), builtIn: BuiltInProfiles.all)
    }
}

extension Console {
    /// One Encodable value as one NDJSON line (sorted keys).
    static func jsonLine(_ value: some Encodable) {
        guard let line = JSONLine.text(value) else { return }
        FileHandle.standardOutput.write(Data(line.utf8))
    }
}
