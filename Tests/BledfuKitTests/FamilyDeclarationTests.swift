import BLECore
import BledfuTestSupport
import DFUCore
import Foundation
import Testing

@testable import BledfuKit

/// What the CLI and the line ask the families instead of knowing them: the plan of a package before anything
/// connects (family, parts, target version, the mode checked), the services that name a family's device, the
/// settings a command-line option sets.
@Suite(.timeLimit(.minutes(2))) struct FamilyDeclarationTests {
    static let image = SyntheticPackage.image(4000, seed: 3)

    @Test func planNamesTheFamilyThePartsAndTheTargetVersion() throws {
        let secure = try Updater.plan(SyntheticPackage.source(try SyntheticPackage.secureApplication(Self.image, version: 7), fileName: "s.zip"))
        #expect(secure.family == .secure)
        #expect(secure.parts.map(\.name) == ["application"])
        #expect(secure.totalBytes >= Self.image.count)
        #expect(secure.targetVersion == 7)
        let legacy = try Updater.plan(SyntheticPackage.source(try SyntheticPackage.legacyApplication(Self.image, version: 9), fileName: "l.zip"))
        #expect(legacy.family == .legacy && legacy.targetVersion == 9)
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let smpBytes = Array(try Data(contentsOf: root.appendingPathComponent("Firmware/samples/smp-sensor-app-v2.bin")))
        let smp = try Updater.plan(SyntheticPackage.source(smpBytes, fileName: "app.bin"))
        #expect(smp.family == .smp && smp.targetVersion == nil && smp.totalBytes == smpBytes.count)
    }

    /// The mode is the family's to check: a Legacy mode on a Secure package is refused as an option, before
    /// anything connects; a forced family that is not registered is refused by name, one that is registered but
    /// does not read the package says so (exit 46, as for auto-detection).
    @Test func planChecksTheModeAndTheFamily() throws {
        let source = SyntheticPackage.source(try SyntheticPackage.secureApplication(Self.image), fileName: "s.zip")
        #expect(throws: DFUError(.invalidOption, "")) { try Updater.plan(source, options: UpdateOptions(pacing: "stream")) }
        #expect(try Updater.plan(source, options: UpdateOptions(pacing: "prn:12")).family == .secure)
        #expect(throws: DFUError(.unknownFamily, "")) { try Updater.plan(source, family: DFUFamilyID("fota")) }
        // A forced family that says "not mine" is refused as auto-detection refuses another family's package.
        #expect(throws: DFUError(.incompatiblePackage, "")) { try Updater.plan(source, family: .smp) }
    }

    @Test func servicesAndOptionSettingsComeFromTheFamilies() {
        let smp = BluetoothUUID("8D53DC1D-1DB7-4CD3-868B-8A527460AA84")!
        #expect(DefaultFamilies.services() == [BluetoothUUID(0xFE59), BluetoothUUID("00001530-1212-EFDE-1523-785FEABCD123")!, smp])
        #expect(DefaultFamilies.family(advertising: [BluetoothUUID(0x180F), BluetoothUUID(0xFE59)]) == .secure)
        #expect(DefaultFamilies.family(advertising: [smp]) == .smp)
        #expect(DefaultFamilies.family(advertising: [BluetoothUUID(0x180D)]) == nil)
        // A Legacy bootloader advertises its name only (SDK 11 "DfuTarg", the Adafruit bootloader "AdaDFU").
        #expect(DefaultFamilies.family(advertising: [], name: "DfuTarg") == .legacy)
        #expect(DefaultFamilies.family(advertising: [], name: "Bracelet") == nil)
        #expect(DefaultFamilies.settings(forOptions: ["confirm": "upload-only", "other": "x"]) == ["smp.confirm": "upload-only"])
        #expect(DefaultFamilies.settings(forOptions: ["confirm": nil]).isEmpty)
        #expect(DefaultFamilies.settings(forOptions: ["confirm": "x"], among: []).isEmpty)
    }
}
