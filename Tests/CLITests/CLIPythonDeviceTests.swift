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
        let process: SpawnedProcess

        init() async throws {
            radio = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-py-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: radio, withIntermediateDirectories: true)
            process = try SpawnedProcess(
                URL(fileURLWithPath: "/usr/bin/env"),
                [
                    "python3", CLIRunner.repositoryRoot.appendingPathComponent("tools/example-virtual-device.py").path,
                    "--radio", radio.path, "--address", CLIPythonDeviceTests.address, "--name", "Example",
                ])
            // Wait (bounded, without holding a thread) for the advertisement file: the device is up.
            let adv = radio.appendingPathComponent("C0-FF-EE-00-00-42.adv")
            guard await OffPool.poll(timeout: .seconds(5), { FileManager.default.fileExists(atPath: adv.path) }) else {
                process.terminate()
                throw CLIError("the example device did not start")
            }
        }

        var adapter: String { "virtual:\(radio.path)" }

        // Bounded (a SIGTERM'd child's exit): deinit cannot await.
        deinit {
            process.child.terminateBlocking()
            try? FileManager.default.removeItem(at: radio)
        }
    }

    struct CLIError: Error, CustomStringConvertible {
        var description: String
        init(_ text: String) { description = text }
    }

    @Test func scanFindsTheDevice() async throws {
        let device = try await Device()
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
        let device = try await Device()
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
        let device = try await Device()
        let capture = device.radio.appendingPathComponent("trace.btsnoop").path
        let read = try await CLIRunner.run([
            "gatt", "read", "--adapter", device.adapter, "--device", Self.address, "0x0003", "--capture", capture, "--trace",
        ])
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stderr.contains("ATT > Read Request handle=0x0003"))
        // ATT records only: the link's Connection Complete and Disconnection Complete events come first and last.
        let text = try await CLIRunner.run(
            ["-r", capture, "-Y", "btatt", "-T", "fields", "-e", "btatt.opcode", "-e", "btatt.handle"],
            environment: ["HOME": NSTemporaryDirectory()], timeout: 120, executable: URL(fileURLWithPath: tshark)
        ).stdout
        let rows = text.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        // Exchange MTU request and response, then Read Request on 0x0003 and its response.
        #expect(rows.first?.first == "0x02")
        #expect(rows.contains { $0.first == "0x0a" && $0.count > 1 && $0[1] == "0x0003" })
        #expect(rows.contains { $0.first == "0x0b" })
    }
}
