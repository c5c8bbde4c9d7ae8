import Batch
import Foundation

/// Where `bledfu` finds its device profiles (Firmware/NAME.json) and samples (Firmware/samples), wherever the
/// binary is (issue 19 point 5; docs/simulator.md, "Where profiles are found"):
///
/// 1. `$BLEDFU_FIRMWARE_DIR`;
/// 2. `./Firmware` (the current directory);
/// 3. `<bin>/../share/bledfu/Firmware` (an installed bledfu: `/usr/bin/bledfu` reads `/usr/share/bledfu/Firmware`);
/// 4. a `Firmware/` directory beside the executable or above it (a checkout's `.build/debug/bledfu`);
/// 5. the profiles built into the binary (``EmbeddedData/profiles``, from Firmware/*.json by
///    tools/generate-embedded): a lone copy of the binary still simulates every bundled device.
enum FirmwareLocator {
    /// The first Firmware directory of steps 1-4, or nil.
    static func directory(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        currentDirectory: String = FileManager.default.currentDirectoryPath, executable: URL = executableURL
    ) -> URL? {
        if let explicit = environment["BLEDFU_FIRMWARE_DIR"], !explicit.isEmpty { return URL(fileURLWithPath: explicit) }
        let local = URL(fileURLWithPath: currentDirectory).appendingPathComponent("Firmware")
        if isDirectory(local) { return local }
        let binDirectory = executable.deletingLastPathComponent()
        let installed = binDirectory.deletingLastPathComponent().appendingPathComponent("share/bledfu/Firmware")
        if isDirectory(installed) { return installed }
        var directory = binDirectory
        while directory.path != "/" && !directory.path.isEmpty {
            let candidate = directory.appendingPathComponent("Firmware")
            if isDirectory(candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }

    /// The running executable, symbolic links resolved.
    static var executableURL: URL {
        (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])).resolvingSymlinksInPath()
    }

    /// A bundled profile's JSON and where it came from (a file path, or "built-in NAME").
    static func profile(named name: String, directory: URL? = directory()) throws(CLIError) -> (data: Data, origin: String) {
        let key = name.lowercased()
        if let directory {
            let url = directory.appendingPathComponent(key + ".json")
            if let data = FileManager.default.contents(atPath: url.path) { return (data, url.path) }
        }
        if let text = EmbeddedData.profiles[key] { return (Data(text.utf8), "built-in \(key)") }
        let known = EmbeddedData.profiles.keys.sorted().joined(separator: ", ")
        let searched = directory.map { " (not in \($0.path) nor built in)" } ?? ""
        throw CLIError("no device profile '\(name)'\(searched); bundled profiles: \(known)", exitCode: BledfuExit.usage)
    }

    private static func isDirectory(_ url: URL) -> Bool {
        var directory: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &directory) && directory.boolValue
    }
}
