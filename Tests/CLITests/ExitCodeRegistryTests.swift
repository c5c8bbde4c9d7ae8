import BLECore
import DFUCore
import DFUPackage
@testable import Batch
import Foundation
import GATT
import Testing

@testable import BledfuCLI

/// The exit-code registry: numbers and names unique, every error code the project throws mapped, the generated
/// tables in README.md and docs/exit-codes.md equal to what `bledfu exit-codes --markdown` prints.
@Suite(.timeLimit(.minutes(10))) struct ExitCodeRegistryTests {
    @Test func codesAndNamesAreUniqueAndOrdered() {
        let codes = ExitCodeRegistry.entries.map(\.code)
        #expect(codes == codes.sorted())
        #expect(Set(codes).count == codes.count)
        #expect(Set(ExitCodeRegistry.entries.map(\.name)).count == codes.count)
        let errors = ExitCodeRegistry.entries.flatMap(\.errors)
        #expect(Set(errors).count == errors.count, "an error maps to two codes")
    }

    /// The numbers scripts rely on (README.md before the registry) keep their meaning.
    @Test func documentedNumbersKeepTheirMeaning() {
        #expect(BledfuExit.success == 0 && BledfuExit.failure == 1 && BledfuExit.usage == 64)
        #expect(BledfuExit.noBluetoothInKernel == 10 && BledfuExit.noAdapter == 11 && BledfuExit.adapterDown == 12)
        #expect(BledfuExit.permissionDenied == 13 && BledfuExit.badAddress == 14 && BledfuExit.connectionTimeout == 15)
        #expect(BledfuExit.disconnected == 16 && BledfuExit.deviceNotFound == 17 && BledfuExit.busy == 18)
        #expect(BledfuExit.connectionRefused == 19 && BledfuExit.protocolError == 20 && BledfuExit.packageInvalid == 30)
        #expect(FlashExit.remoteError == 40 && FlashExit.verificationFailed == 41 && FlashExit.timeout == 42)
        #expect(FlashExit.linkLost == 43 && FlashExit.bootloaderNotFound == 44 && FlashExit.noDFUService == 45)
        #expect(FlashExit.protocolError == 46 && BledfuExit.interrupted == 130)
        #expect(BatchExit.devicesFailed == 50 && BatchExit.planInvalid == 51 && BatchExit.lineStopped == 52)
        #expect(BatchExit.databaseError == 53 && BatchExit.noDevices == 54 && BatchExit.benchGoalMissed == 55)
        #expect(BledfuExit.noFreeLink == 21 && BledfuExit.adapterBusy == 22)
        #expect(BatchExit.databaseNewer == 56 && BatchExit.stationNameTaken == 57 && BatchExit.planDiffers == 58)
        #expect(BatchExit.flashStalled == 59)
    }

    /// An adapter without a free link (21) or busy (22), and the line's database refusals (56-58), end in their own
    /// codes; any other batch-log failure is 53.
    @Test func adapterAndLineErrorsMapToTheirCodes() {
        #expect(ExitCodeRegistry.code(for: AdapterError(.noFreeLink, "x")) == 21)
        #expect(ExitCodeRegistry.code(for: AdapterError(.adapterBusy, "x")) == 22)
        #expect(ExitCodeRegistry.code(for: DFUError(.connection, "x", cause: AdapterError(.noFreeLink, "x"))) == 21)
        let expected: [(BatchLogError.Code, Int32)] = [
            (.newerSchema, 56), (.stationNameTaken, 57), (.planDiffers, 58), (.open, 53),
        ]
        for (code, exit) in expected {
            #expect(ExitCodeRegistry.code(for: BatchLogError(code, "x")) == exit, "\(code)")
            #expect(CLIError(BatchLogError(code, "x")).exitCode == exit)
        }
    }

    /// docs/packages.md's table: each package error code has its own exit status in 30-39.
    @Test func everyPackageErrorMapsInto30To39() {
        let expected: [(PackageError.Code, Int32)] = [
            (.invalidArchive, 30), (.unsafeEntry, 31), (.entryTooLarge, 32), (.corruptEntry, 33), (.invalidManifest, 34),
            (.missingFile, 35), (.invalidInitPacket, 36), (.imageMismatch, 37), (.signatureInvalid, 38), (.invalidKey, 39),
            (.invalidInput, 39), (.io, 39), (.invalidOptions, 64), (PackageError.Code(rawValue: 999), 39),
        ]
        for (code, exit) in expected {
            #expect(ExitCodeRegistry.code(for: PackageError(code, "x")) == exit, "\(code)")
            // Through the updater's error too (a plan that failed on the package).
            #expect(ExitCodeRegistry.code(for: DFUError(.invalidPackage, "x", cause: PackageError(code, "x"))) == exit)
        }
        #expect(ExitCodeRegistry.code(for: DFUError(.invalidPackage, "no family reads it")) == 30)
    }

    @Test func everyDFUErrorCodeIsMapped() {
        let expected: [(DFUError.Code, Int32)] = [
            (.remoteRefusal, 40), (.alreadyPresent, 40), (.verificationFailed, 41), (.timeout, 42), (.linkLost, 43),
            (.transport, 43), (.unconfirmed, 43), (.notFound, 44), (.noUpdateService, 45), (.protocolViolation, 46),
            (.incompatiblePackage, 46), (.reverted, 47), (.deviceMismatch, 48), (.stalled, 49), (.unknownFamily, 64), (.stopped, 130),
            (.cancelled, 130),
            (DFUError.Code("a-family-specific-code"), 1),
        ]
        for (code, exit) in expected { #expect(ExitCodeRegistry.code(for: DFUError(code, "x")) == exit, "\(code)") }
        // A connection failure takes its cause's code.
        #expect(ExitCodeRegistry.code(for: DFUError(.connection, "x", cause: AdapterError(.connectionRefused, "x"))) == 19)
        #expect(ExitCodeRegistry.code(for: DFUError(.connection, "x", cause: ATTClientError(.closed, "x"))) == 16)
        #expect(ExitCodeRegistry.code(for: DFUError(.connection, "x", cause: ATTClientError(.timeout, "x"))) == 20)
    }

    /// Which command ends with which code, and whether `batch` retries it, are attributes of the registry's
    /// entries: `flash --help` lists the update codes, `batch --help` the station's own and a device attempt's,
    /// and a package or command line refused as such is not retried.
    @Test func scopesAndRetriesAreRegistryAttributes() {
        #expect(BatchExit.table.map(\.0) == [0, 50, 51, 52, 53, 54, 56, 57, 58, 59, 60, 61, 130])
        #expect(FlashExit.codes.contains(0) && FlashExit.codes.contains(43) && FlashExit.codes.contains(130))
        #expect(FlashExit.codes.allSatisfy { ExitCodeRegistry.entry($0)?.scope.contains(.update) == true })
        #expect(!FlashExit.codes.contains(50) && !FlashExit.codes.contains(55) && !FlashExit.codes.contains(59))
        let refused = ExitCodeRegistry.entries.filter { !ExitCodeRegistry.retryMayHelp($0.code) }.map(\.code)
        // 48: the device would refuse the package (checked before the jump): it refuses it every time.
        #expect(refused == Array(30...39) + [48, 64])
        #expect(ExitCodeRegistry.retryMayHelp(43) && ExitCodeRegistry.retryMayHelp(21) && ExitCodeRegistry.retryMayHelp(250))
        // The parser of a flash child's events reads the same attribute.
        let usage = FlashEventParser(total: 1) { _ in }
        #expect(usage.outcome(exitStatus: 64, logPath: "x.log").retryable == false)
        #expect(ExitCodeRegistry.packageTable.split(separator: "\n").count == 2 + 10)
        #expect(ExitCodeRegistry.code(for: DFUError(.capture, "x")) == 1)
        #expect(ExitCodeRegistry.entries.contains { $0.errors.contains("DFUError.capture") })
    }

    /// README.md and docs/exit-codes.md carry the generated tables (tools/check-exit-codes checks the same in CI).
    @Test func readmeAndDocsAreGenerated() async throws {
        let result = try await CLIRunner.run(["exit-codes", "--markdown"])
        #expect(result.status == 0, "\(result.stderr)")
        let readme = try String(contentsOf: CLIRunner.repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let docs = try String(contentsOf: CLIRunner.repositoryRoot.appendingPathComponent("docs/exit-codes.md"), encoding: .utf8)
        #expect(readme.contains(ExitCodeRegistry.readmeTable + "\n"))
        #expect(docs.contains(ExitCodeRegistry.docsTable + "\n"))
        #expect(result.stdout == ExitCodeRegistry.docsTable + "\n")
        for (file, table) in [("docs/batch.md", ExitCodeRegistry.batchTable), ("docs/packages.md", ExitCodeRegistry.packageTable)] {
            let text = try String(contentsOf: CLIRunner.repositoryRoot.appendingPathComponent(file), encoding: .utf8)
            #expect(text.contains("<!-- exit-codes:begin -->\n" + table + "\n<!-- exit-codes:end -->"), "\(file)")
        }
    }
}
