import Foundation
import LinuxIO
import Testing

/// `bledfu` against tools/example-virtual-device.py: the virtual radio spec (docs/virtual-radio.md) proven by a
/// device written from the document alone, in another language.
@Suite(.serialized, .timeLimit(.minutes(5))) struct CLIPythonDeviceTests {
    static let address = "C0:FF:EE:00:00:42"
    static let characteristic = "8E7F0002-4B5D-4E2A-9C3B-1D0F6A2B3C4D"

    final class Device {
        let radio: URL
        let process: Process

        init() throws {
            radio = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-py-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: radio, withIntermediateDirectories: true)
            process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                "python3", CLIRunner.repositoryRoot.appendingPathComponent("tools/example-virtual-device.py").path,
                "--radio", radio.path, "--address", CLIPythonDeviceTests.address, "--name", "Example",
            ]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Wait (bounded) for the advertisement file: the device is up.
            let adv = radio.appendingPathComponent("C0-FF-EE-00-00-42.adv")
            for _ in 0..<500 where !FileManager.default.fileExists(atPath: adv.path) { usleep(10_000) }
            guard FileManager.default.fileExists(atPath: adv.path) else {
                process.terminate()
                throw CLIError("the example device did not start")
            }
        }

        var adapter: String { "virtual:\(radio.path)" }

        deinit {
            process.terminate()
            process.waitUntilExit()
            try? FileManager.default.removeItem(at: radio)
        }
    }

    struct CLIError: Error, CustomStringConvertible {
        var description: String
        init(_ text: String) { description = text }
    }

    @Test func scanFindsTheDevice() async throws {
        let device = try Device()
        let result = try await CLIRunner.run(["scan", "--adapter", device.adapter, "--json", "--duration", "0.5"])
        #expect(result.status == 0, "\(result.stderr)")
        let events = result.lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let found = events.first { $0["address"] as? String == Self.address }
        #expect(found?["name"] as? String == "Example")
        #expect(found?["addressType"] as? String == "random")
        let filtered = try await CLIRunner.run(["scan", "--adapter", device.adapter, "--name", "Nope", "--duration", "0.3"])
        #expect(filtered.status == 0)
        #expect(filtered.stdout.isEmpty)
    }

    @Test func listReadWriteSubscribe() async throws {
        let device = try Device()
        let list = try await CLIRunner.run(["gatt", "list", "--adapter", device.adapter, "--device", Self.address, "--values"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.contains("service 8E7F0001-4B5D-4E2A-9C3B-1D0F6A2B3C4D handles 0x0001-0x0004"))
        #expect(list.stdout.contains("characteristic \(Self.characteristic) value 0x0003"))
        #expect(list.stdout.contains("\"Example\""))

        let write = try await CLIRunner.run(["gatt", "write", "--adapter", device.adapter, "--device", Self.address, "0x0003", "68656c6c6f"])
        #expect(write.status == 0, "\(write.stderr)")
        let read = try await CLIRunner.run(["gatt", "read", "--adapter", device.adapter, "--device", Self.address, Self.characteristic])
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stdout == "0x0003: 68656c6c6f \"hello\"\n")

        let subscribe = try await CLIRunner.run([
            "gatt", "subscribe", "--adapter", device.adapter, "--device", Self.address, Self.characteristic,
            "--then-write", "6869", "--count", "1", "--json",
        ])
        #expect(subscribe.status == 0, "\(subscribe.stderr)")
        #expect(subscribe.stdout.contains("\"event\":\"notification\""))
        #expect(subscribe.stdout.contains("\"value\":\"6869\""))
    }

    @Test func captureDecodesInTshark() async throws {
        let tshark = "/usr/bin/tshark"
        guard FileManager.default.isExecutableFile(atPath: tshark) else {
            if ProcessInfo.processInfo.environment["CI"] == "true" { Issue.record("tshark is missing in CI (tools/setup installs it)") }
            return
        }
        let device = try Device()
        let capture = device.radio.appendingPathComponent("trace.btsnoop").path
        let read = try await CLIRunner.run([
            "gatt", "read", "--adapter", device.adapter, "--device", Self.address, "0x0003", "--capture", capture, "--trace",
        ])
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stderr.contains("ATT > Read Request handle=0x0003"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tshark)
        // ATT records only: the link's Connection Complete and Disconnection Complete events come first and last.
        process.arguments = ["-r", capture, "-Y", "btatt", "-T", "fields", "-e", "btatt.opcode", "-e", "btatt.handle"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.environment = ["HOME": NSTemporaryDirectory()]
        try process.run()
        let text = String(decoding: Data((try? BlockingRead.toEnd(fd: out.fileHandleForReading.fileDescriptor)) ?? []), as: UTF8.self)
        process.waitUntilExit()
        let rows = text.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        // Exchange MTU request and response, then Read Request on 0x0003 and its response.
        #expect(rows.first?.first == "0x02")
        #expect(rows.contains { $0.first == "0x0a" && $0.count > 1 && $0[1] == "0x0003" })
        #expect(rows.contains { $0.first == "0x0b" })
    }
}
