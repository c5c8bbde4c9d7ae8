import Batch
import BledfuKit
import Foundation
import Yams

/// Defaults for options a user sets once: the adapter, the verification keys and the state directory, from the
/// environment and a config file (README.md, "Defaults"). A command-line option wins over the
/// environment, which wins over the file, which wins over the built-in default.
///
///     # $XDG_CONFIG_HOME/bledfu/config.yaml (default ~/.config/bledfu/config.yaml; BLEDFU_CONFIG names another)
///     adapter: hci1
///     keys: [/etc/bledfu/release.pub.pem]
///     state_dir: /var/lib/bledfu
///
/// Environment: `BLEDFU_ADAPTER`, `BLEDFU_KEYS` (paths separated by `:`), `BLEDFU_STATE_DIR`.
struct ConfigDefaults: Sendable, Equatable {
    var adapter: String?
    var keys: [String] = []
    var stateDirectory: String?

    /// The defaults of this process (read once).
    static let current: Result<ConfigDefaults, CLIError> = Result(catching: { () throws(CLIError) -> ConfigDefaults in try load() })

    /// The defaults of this process, or none when the config is broken (``GlobalOptions/validate()`` reports it).
    static var currentOrNone: ConfigDefaults { (try? current.get()) ?? ConfigDefaults() }

    /// The config file's path: `$BLEDFU_CONFIG`, else `$XDG_CONFIG_HOME/bledfu/config.yaml`, else
    /// `$HOME/.config/bledfu/config.yaml`.
    static func configPath(_ environment: [String: String]) -> String {
        if let explicit = environment["BLEDFU_CONFIG"], !explicit.isEmpty { return explicit }
        if let xdg = environment["XDG_CONFIG_HOME"], !xdg.isEmpty { return xdg + "/bledfu/config.yaml" }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return home + "/.config/bledfu/config.yaml"
    }

    /// The defaults in force. A config file that exists but does not parse, or has an unknown key, is an error
    /// naming the file (a typo must not silently flash through the wrong adapter); a missing file is no error
    /// unless BLEDFU_CONFIG names it.
    static func load(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(CLIError) -> ConfigDefaults {
        let path = configPath(environment)
        var defaults = ConfigDefaults()
        if let data = FileManager.default.contents(atPath: path) {
            defaults = try parse(String(decoding: data, as: UTF8.self), path: path)
        } else if environment["BLEDFU_CONFIG"].map({ !$0.isEmpty }) == true {
            throw CLIError("BLEDFU_CONFIG names \(path), which cannot be read", exitCode: BledfuExit.usage)
        }
        if let adapter = environment["BLEDFU_ADAPTER"], !adapter.isEmpty { defaults.adapter = adapter }
        if let keys = environment["BLEDFU_KEYS"], !keys.isEmpty {
            defaults.keys = keys.split(separator: ":").map(String.init)
        }
        if let state = environment["BLEDFU_STATE_DIR"], !state.isEmpty { defaults.stateDirectory = state }
        return defaults
    }

    static func parse(_ text: String, path: String) throws(CLIError) -> ConfigDefaults {
        let node: Any?
        do {
            node = try Yams.load(yaml: text)
        } catch {
            throw CLIError("config file \(path) is not YAML: \(error)", exitCode: BledfuExit.usage)
        }
        guard let node else { return ConfigDefaults() }
        guard let map = node as? [String: Any] else {
            throw CLIError("config file \(path): expected keys adapter, keys, state_dir", exitCode: BledfuExit.usage)
        }
        var defaults = ConfigDefaults()
        for (key, value) in map {
            switch key {
            case "adapter":
                guard let text = value as? String else { throw bad(path, key, "a string like hci0") }
                defaults.adapter = text
            case "keys":
                if let one = value as? String {
                    defaults.keys = [one]
                } else if let list = value as? [Any], let paths = list as? [String] {
                    defaults.keys = paths
                } else {
                    throw bad(path, key, "a list of key file paths")
                }
            case "state_dir":
                guard let text = value as? String else { throw bad(path, key, "a directory path") }
                defaults.stateDirectory = text
            default:
                throw CLIError("config file \(path): unknown key '\(key)' (adapter, keys, state_dir)", exitCode: BledfuExit.usage)
            }
        }
        return defaults
    }

    private static func bad(_ path: String, _ key: String, _ expected: String) -> CLIError {
        CLIError("config file \(path): '\(key)' must be \(expected)", exitCode: BledfuExit.usage)
    }

    /// The state directory in force: the option, else this default, else $XDG_STATE_HOME/bledfu.
    func stateDirectory(option: String?) -> URL {
        (option ?? stateDirectory).map { URL(fileURLWithPath: $0) } ?? JournalFileStore.defaultDirectory()
    }
}
