import Foundation
import Testing

@testable import BledfuCLI

/// Defaults for the adapter, the keys and the state directory from the environment and the config file
/// (issue 19 point 4): the option wins over the environment, which wins over the file.
@Suite(.timeLimit(.minutes(5))) struct ConfigDefaultsTests {
    static func scratch() throws -> URL {
        let url = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("bledfu-config-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test func parsesTheFileAndRefusesUnknownKeys() throws {
        let parsed = try ConfigDefaults.parse("adapter: hci1\nkeys: [/a.pem, /b.pem]\nstate_dir: /var/lib/bledfu\n", path: "c.yaml")
        #expect(parsed == ConfigDefaults(adapter: "hci1", keys: ["/a.pem", "/b.pem"], stateDirectory: "/var/lib/bledfu"))
        #expect(try ConfigDefaults.parse("keys: /one.pem\n", path: "c.yaml").keys == ["/one.pem"])
        #expect(try ConfigDefaults.parse("", path: "c.yaml") == ConfigDefaults())
        #expect(throws: CLIError.self) { try ConfigDefaults.parse("adaptor: hci1\n", path: "c.yaml") }
        #expect(throws: CLIError.self) { try ConfigDefaults.parse("adapter: [1, 2]\n", path: "c.yaml") }
        #expect(throws: CLIError.self) { try ConfigDefaults.parse("adapter: : :\n", path: "c.yaml") }
    }

    @Test func environmentWinsOverTheFile() throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("bledfu"), withIntermediateDirectories: true)
        try "adapter: hci1\nstate_dir: /from/file\n".write(
            to: directory.appendingPathComponent("bledfu/config.yaml"), atomically: true, encoding: .utf8)
        let file = try ConfigDefaults.load(["XDG_CONFIG_HOME": directory.path])
        #expect(file.adapter == "hci1" && file.stateDirectory == "/from/file")
        let both = try ConfigDefaults.load(["XDG_CONFIG_HOME": directory.path, "BLEDFU_ADAPTER": "hci2", "BLEDFU_KEYS": "/k1:/k2"])
        #expect(both.adapter == "hci2" && both.keys == ["/k1", "/k2"] && both.stateDirectory == "/from/file")
        #expect(ConfigDefaults.configPath(["HOME": "/home/x"]) == "/home/x/.config/bledfu/config.yaml")
        #expect(throws: CLIError.self) { try ConfigDefaults.load(["BLEDFU_CONFIG": directory.appendingPathComponent("absent.yaml").path]) }
    }

    /// The binary takes its adapter from BLEDFU_ADAPTER, then from the config file; `--adapter` wins over both.
    @Test func theBinaryUsesTheDefaults() async throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let fromEnvironment = directory.appendingPathComponent("env-radio").path
        let fromFile = directory.appendingPathComponent("file-radio").path
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("bledfu"), withIntermediateDirectories: true)
        try "adapter: virtual:\(fromFile)\nstate_dir: \(directory.appendingPathComponent("state").path)\n".write(
            to: directory.appendingPathComponent("bledfu/config.yaml"), atomically: true, encoding: .utf8)
        let list = ["gatt", "list", "--device", "C0:FF:EE:00:00:01"]
        let env = try await CLIRunner.run(list, environment: ["XDG_CONFIG_HOME": directory.path, "BLEDFU_ADAPTER": "virtual:\(fromEnvironment)"])
        #expect(env.status == 11 && env.stderr.contains("no virtual radio at \(fromEnvironment)"), "\(env.stderr)")
        let file = try await CLIRunner.run(list, environment: ["XDG_CONFIG_HOME": directory.path, "BLEDFU_ADAPTER": ""])
        #expect(file.status == 11 && file.stderr.contains("no virtual radio at \(fromFile)"), "\(file.stderr)")
        let option = try await CLIRunner.run(
            list + ["--adapter", "virtual:/nonexistent/opt"], environment: ["XDG_CONFIG_HOME": directory.path, "BLEDFU_ADAPTER": "virtual:\(fromEnvironment)"])
        #expect(option.status == 11 && option.stderr.contains("/nonexistent/opt"), "\(option.stderr)")
        // The state directory: resume looks for journals there.
        let resume = try await CLIRunner.run(["resume"], environment: ["XDG_CONFIG_HOME": directory.path, "BLEDFU_STATE_DIR": ""])
        #expect(resume.status == 1 && resume.stderr.contains(directory.appendingPathComponent("state").path), "\(resume.stderr)")
        // A broken config file: a usage error naming it.
        try "adaptor: hci0\n".write(to: directory.appendingPathComponent("bledfu/config.yaml"), atomically: true, encoding: .utf8)
        let broken = try await CLIRunner.run(list, environment: ["XDG_CONFIG_HOME": directory.path, "BLEDFU_ADAPTER": ""])
        #expect(broken.status == 64, "\(broken.stderr)")
        #expect(broken.stderr.hasPrefix("bledfu: error: config file \(directory.path)/bledfu/config.yaml: unknown key 'adaptor'"), "\(broken.stderr)")
    }
}
