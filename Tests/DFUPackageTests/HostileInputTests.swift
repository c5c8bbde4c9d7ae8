import BLECore
import Foundation
import Testing

@testable import DFUPackage

/// A malformed package and the error it must produce.
struct HostileCase: Sendable, CustomStringConvertible {
    var name: String
    var bytes: [UInt8]
    var code: PackageError.Code
    /// A fragment the one-line message must contain.
    var fragment: String
    var limits = ArchiveLimits()
    var description: String { name }
}

enum HostileCorpus {
    static func base() -> ZipFixture {
        ZipFixture((try? Fixtures.appFiles()) ?? [])
    }

    static func with(_ change: (inout ZipFixture) -> Void) -> [UInt8] {
        var zip = base()
        change(&zip)
        return zip.bytes
    }

    static func manifest(_ text: String) -> [UInt8] { with { $0.set("manifest.json", Array(text.utf8)) } }

    static let app = #"{"manifest":{"application":{"bin_file":"app.bin","dat_file":"app.dat"}}}"#

    static var cases: [HostileCase] {
        let valid = base().bytes
        let appBin = base().entries.first { $0.name == "app.bin" }?.data ?? []
        var list: [HostileCase] = [
            HostileCase(name: "empty", bytes: [], code: .invalidArchive, fragment: "not a zip archive"),
            HostileCase(name: "garbage", bytes: Fixtures.image(300), code: .invalidArchive, fragment: "zip archive"),
            HostileCase(name: "truncated half", bytes: Array(valid.prefix(valid.count / 2)), code: .invalidArchive, fragment: "zip archive"),
            HostileCase(name: "truncated end record", bytes: Array(valid.dropLast(3)), code: .invalidArchive, fragment: "zip archive"),
            HostileCase(name: "only end record", bytes: [0x50, 0x4B, 0x05, 0x06] + [UInt8](repeating: 0, count: 18), code: .invalidManifest, fragment: "no manifest.json"),
            HostileCase(name: "no manifest", bytes: with { $0.remove("manifest.json") }, code: .invalidManifest, fragment: "no manifest.json"),
            HostileCase(name: "invalid JSON", bytes: manifest("{\"manifest\": {"), code: .invalidManifest, fragment: "not valid JSON"),
            HostileCase(name: "not UTF-8", bytes: with { $0.set("manifest.json", [0xFF, 0xFE, 0x7B]) }, code: .invalidManifest, fragment: "not valid JSON"),
            HostileCase(name: "JSON array", bytes: manifest("[1,2]"), code: .invalidManifest, fragment: "not a JSON object"),
            HostileCase(name: "no manifest key", bytes: manifest(#"{"application":{}}"#), code: .invalidManifest, fragment: "no \"manifest\" object"),
            HostileCase(name: "no images", bytes: manifest(#"{"manifest":{"dfu_version":0.5}}"#), code: .invalidManifest, fragment: "names no image"),
            HostileCase(name: "part not object", bytes: manifest(#"{"manifest":{"application":"app.bin"}}"#), code: .invalidManifest, fragment: "application is not an object"),
            HostileCase(name: "no bin_file", bytes: manifest(#"{"manifest":{"application":{"dat_file":"app.dat"}}}"#), code: .invalidManifest, fragment: "application has no bin_file"),
            HostileCase(name: "no dat_file", bytes: manifest(#"{"manifest":{"application":{"bin_file":"app.bin"}}}"#), code: .invalidManifest, fragment: "application has no dat_file"),
            HostileCase(name: "bin_file number", bytes: manifest(#"{"manifest":{"application":{"bin_file":7,"dat_file":"app.dat"}}}"#), code: .invalidManifest, fragment: "no bin_file"),
            HostileCase(name: "negative sd_size", bytes: manifest(#"{"manifest":{"softdevice_bootloader":{"bin_file":"app.bin","dat_file":"app.dat","sd_size":-1,"bl_size":0}}}"#), code: .invalidManifest, fragment: "sd_size is not a 32-bit"),
            HostileCase(name: "fractional bl_size", bytes: manifest(#"{"manifest":{"softdevice_bootloader":{"bin_file":"app.bin","dat_file":"app.dat","info_read_only_metadata":{"bl_size":1.5,"sd_size":1}}}}"#), code: .invalidManifest, fragment: "bl_size is not a 32-bit"),
            HostileCase(name: "dfu_version string", bytes: manifest(#"{"manifest":{"dfu_version":"0.5","application":{"bin_file":"app.bin","dat_file":"app.dat"}}}"#), code: .invalidManifest, fragment: "dfu_version is not a number"),
            HostileCase(name: "missing bin", bytes: manifest(#"{"manifest":{"application":{"bin_file":"nope.bin","dat_file":"app.dat"}}}"#), code: .missingFile, fragment: "application: manifest names nope.bin"),
            HostileCase(name: "missing dat", bytes: manifest(#"{"manifest":{"application":{"bin_file":"app.bin","dat_file":"nope.dat"}}}"#), code: .missingFile, fragment: "nope.dat, which is not in the archive"),
            HostileCase(name: "dot-dot entry", bytes: with { $0.set("../evil.bin", [1]) }, code: .unsafeEntry, fragment: "'../evil.bin' is unsafe"),
            HostileCase(name: "nested dot-dot", bytes: with { $0.set("a/../../b", [1]) }, code: .unsafeEntry, fragment: "is unsafe"),
            HostileCase(name: "absolute entry", bytes: with { $0.set("/etc/passwd", [1]) }, code: .unsafeEntry, fragment: "'/etc/passwd' is unsafe"),
            HostileCase(name: "backslash entry", bytes: with { $0.set("..\\evil", [1]) }, code: .unsafeEntry, fragment: "is unsafe"),
            HostileCase(name: "drive letter", bytes: with { $0.set("C:/evil", [1]) }, code: .unsafeEntry, fragment: "is unsafe"),
            HostileCase(name: "duplicate entry", bytes: with { $0.entries.append(ZipFixture.Entry(name: "app.bin", data: [1, 2, 3, 4])) }, code: .unsafeEntry, fragment: "'app.bin' appears more than once"),
            HostileCase(name: "duplicate by case", bytes: with { $0.entries.append(ZipFixture.Entry(name: "APP.BIN", data: [1])) }, code: .unsafeEntry, fragment: "appears more than once"),
            HostileCase(name: "entry too large", bytes: with { $0.modify("app.bin") { $0.uncompressedSize = 20 << 20 } }, code: .entryTooLarge, fragment: "'app.bin' is 20971520 bytes"),
            HostileCase(name: "zip bomb ratio", bytes: with { $0.modify("app.bin") { $0.method = 8; $0.uncompressedSize = 8 << 20 } }, code: .entryTooLarge, fragment: "compression ratio"),
            HostileCase(name: "stored CRC mismatch", bytes: with { $0.modify("app.bin") { $0.crc = 0x1234_5678 } }, code: .corruptEntry, fragment: "'app.bin' fails its CRC-32 check"),
            HostileCase(name: "deflated CRC mismatch", bytes: with { $0.modify("app.dat") { $0.method = 8; $0.crc = 1 } }, code: .corruptEntry, fragment: "'app.dat' fails its CRC-32 check"),
            HostileCase(name: "inflates past header", bytes: with { $0.modify("app.bin") { $0.method = 8; $0.uncompressedSize = 100 } }, code: .corruptEntry, fragment: "inflates past its declared 100 bytes"),
            HostileCase(name: "corrupt deflate", bytes: with { $0.modify("app.bin") { $0.method = 8; $0.payload = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF] } }, code: .corruptEntry, fragment: "'app.bin'"),
            HostileCase(name: "unknown method", bytes: with { $0.modify("app.bin") { $0.method = 99 } }, code: .corruptEntry, fragment: "'app.bin' cannot be extracted"),
            HostileCase(name: "garbage dat", bytes: with { $0.set("app.dat", [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]) }, code: .invalidInitPacket, fragment: "application: app.dat does not decode"),
            HostileCase(name: "empty dat", bytes: with { $0.set("app.dat", []) }, code: .invalidInitPacket, fragment: "init packet is empty"),
            HostileCase(name: "reset command", bytes: with { $0.set("app.dat", [0x0A, 0x06, 0x08, 0x00, 0x1A, 0x02, 0x08, 0x05]) }, code: .invalidInitPacket, fragment: "not INIT"),
            HostileCase(name: "truncated dat", bytes: with { zip in zip.modify("app.dat") { $0.data = Array($0.data.prefix(30)) } }, code: .invalidInitPacket, fragment: "app.dat does not decode"),
            HostileCase(name: "group then field 0", bytes: with { $0.set("app.dat", [0x0B, 0x0C, 0x00]) }, code: .invalidInitPacket, fragment: "Packet: malformed protobuf"),
            HostileCase(name: "mixed secure and legacy", bytes: with {
                $0.set("manifest.json", Array(#"{"manifest":{"application":{"bin_file":"app.bin","dat_file":"app.dat"},"bootloader":{"bin_file":"app.bin","dat_file":"legacy.dat"}}}"#.utf8))
                $0.set("legacy.dat", [0x12, 0x34])
            }, code: .invalidInitPacket, fragment: "mixes Secure and Legacy"),
            HostileCase(name: "too many entries", bytes: with { zip in for i in 0..<70 { zip.set("x\(i)", [1]) } }, code: .invalidArchive, fragment: "more than 64 entries"),
            HostileCase(name: "archive over limit", bytes: valid, code: .entryTooLarge, fragment: "more than the 100-byte limit", limits: ArchiveLimits(maxArchiveSize: 100)),
            HostileCase(name: "entries over total", bytes: valid, code: .entryTooLarge, fragment: "entries total more than", limits: ArchiveLimits(maxTotalSize: 500)),
        ]
        // Found by tools/fuzz-package: a central header pointing past the end trapped ZIPFoundation's memory reader.
        var farOffset = valid
        if let cd = (0..<(valid.count - 4)).first(where: { valid[$0..<($0 + 4)].elementsEqual([0x50, 0x4B, 0x01, 0x02]) }) {
            farOffset.replaceSubrange((cd + 42)..<(cd + 46), with: [0xF0, 0xFF, 0xFF, 0x00])
        }
        list.append(HostileCase(name: "local header past end", bytes: farOffset, code: .invalidArchive, fragment: "local header at 16777200 is missing"))
        var cdPastEnd = valid
        cdPastEnd.replaceSubrange((valid.count - 6)..<(valid.count - 2), with: [0xFF, 0xFF, 0x00, 0x00])
        list.append(HostileCase(name: "central directory past end", bytes: cdPastEnd, code: .invalidArchive, fragment: "central directory lies outside"))
        list.append(HostileCase(name: "symlink-free sanity", bytes: with { $0.set("app.bin", appBin + [1]) }, code: .invalidManifest, fragment: "unused"))
        return list.filter { $0.fragment != "unused" }
    }
}

@Suite(.timeLimit(.minutes(3))) struct HostileInputTests {
    @Test func corpusIsLargeEnough() {
        #expect(HostileCorpus.cases.count >= 30)
        // The unmodified base is a valid package.
        #expect(throws: Never.self) { try FirmwarePackage(bytes: HostileCorpus.base().bytes) }
    }

    @Test(arguments: HostileCorpus.cases)
    func malformedPackageIsRejected(_ hostile: HostileCase) {
        do {
            _ = try FirmwarePackage(bytes: hostile.bytes, limits: hostile.limits)
            Issue.record("\(hostile.name): accepted")
        } catch {
            #expect(error.code == hostile.code, "\(hostile.name): \(error.code) \(error.message)")
            #expect(error.message.contains(hostile.fragment), "\(hostile.name): \(error.message)")
            #expect(!error.message.contains("\n"), "\(hostile.name): message is one line")
        }
    }

    @Test func everyTruncatedPrefixFailsCleanly() {
        let bytes = HostileCorpus.base().bytes
        var failures = 0
        for length in stride(from: 0, to: bytes.count, by: 7) {
            if (try? FirmwarePackage(bytes: Array(bytes.prefix(length)))) == nil { failures += 1 }
        }
        #expect(failures == (bytes.count + 6) / 7)
    }
}
