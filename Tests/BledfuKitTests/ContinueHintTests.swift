import BledfuKit
import BledfuTestSupport
import DFUCore
import DFUPackage
import Foundation
import Testing

/// The library side of `bledfu flash`'s last line: how to go on after an error (`DFUError.messageWithContinuation`),
/// and the package built from loose Secure DFU files (`PackageSource(imageAt:initPacketAt:)`).
@Suite(.timeLimit(.minutes(2))) struct ContinueHintTests {
    /// A resumable end names `bledfu resume` for the device (and the adapter unless it is the default `any`); an
    /// error that resuming cannot mend names nothing.
    @Test func resumableEndsNameTheResumeCommand() {
        let device = "C0:FF:EE:00:00:01"
        let cases: [(DFUError.Code, String, Int, String)] = [
            (.stopped, "any", 5, "stopped; continue with: bledfu resume --device C0:FF:EE:00:00:01"),
            (.linkLost, "hci1", 5, "stopped; continue later with: bledfu resume --device C0:FF:EE:00:00:01 --adapter hci1"),
            (.timeout, "any", 0, "stopped (--reconnect-attempts 0); continue later with: bledfu resume --device C0:FF:EE:00:00:01"),
            (.transport, "any", 5, "stopped; continue later with: bledfu resume --device C0:FF:EE:00:00:01"),
            (.unconfirmed, "any", 5, "stopped; continue later with: bledfu resume --device C0:FF:EE:00:00:01"),
            (.invalidPackage, "hci1", 5, "stopped"),
            (.remoteRefusal, "any", 0, "stopped"),
        ]
        for (code, adapter, attempts, expected) in cases {
            let line = DFUError(code, "stopped").messageWithContinuation(device: device, adapter: adapter, reconnectAttempts: attempts)
            #expect(line == expected, "\(code)")
        }
    }

    /// The loose files of a package build a package whose part is theirs, byte for byte; the same files give the same
    /// SHA-256 (so the same journal), named after the image.
    @Test func looseFilesBuildTheSamePackageEveryTime() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-loose-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let zip = try SyntheticPackage.secureApplication(SyntheticPackage.image(3000, seed: 4), version: 3)
        let part = try #require(try FirmwarePackage(bytes: zip).parts.first)
        let bin = directory.appendingPathComponent("app.bin")
        let dat = directory.appendingPathComponent("app.dat")
        try Data(part.image).write(to: bin)
        try Data(part.initPacketBytes).write(to: dat)

        let source = try PackageSource(imageAt: bin, initPacketAt: dat)
        #expect(source.fileName == "app.bin")
        #expect(source.sha256 == PackageSource.sha256(source.bytes))
        #expect(try PackageSource(imageAt: bin, initPacketAt: dat).sha256 == source.sha256)
        let rebuilt = try #require(try FirmwarePackage(bytes: source.bytes).parts.first)
        #expect(rebuilt.image == part.image && rebuilt.initPacketBytes == part.initPacketBytes)
    }

    /// A missing file is an I/O failure naming the file (exit 39 by the registry); an init packet that does not
    /// decode is the package's own error.
    @Test func unreadableOrUndecodableFilesAreTheirOwnErrors() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-loose-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bin = directory.appendingPathComponent("app.bin")
        let dat = directory.appendingPathComponent("app.dat")
        try Data(repeating: 0xAB, count: 64).write(to: bin)
        try Data([0x12, 0x34, 0x56]).write(to: dat)
        let missing = directory.appendingPathComponent("none.dat")
        do {
            _ = try PackageSource(imageAt: bin, initPacketAt: missing)
            Issue.record("a missing init packet was read")
        } catch {
            #expect(error.code == .invalidPackage)
            #expect((error.cause as? PackageError)?.code == .io)
            #expect(error.message.hasPrefix("cannot read the init packet \(missing.path): "), "\(error.message)")
        }
        do {
            _ = try PackageSource(imageAt: bin, initPacketAt: dat)
            Issue.record("an init packet of three bytes was accepted")
        } catch {
            #expect(error.code == .invalidPackage)
            #expect((error.cause as? PackageError).map { $0.code != .io } == true, "\(error)")
        }
    }
}
