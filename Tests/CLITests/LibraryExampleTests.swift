import Foundation
import Testing

/// docs/library.md's example is `Examples/FlashVirtualDevice/main.swift`, built by the package (so it compiles
/// against the public API), and it flashes a virtual device served by `bledfu simulate`.
@Suite(.timeLimit(.minutes(10))) struct LibraryExampleTests {
    static var source: URL { CLIRunner.repositoryRoot.appendingPathComponent("Examples/FlashVirtualDevice/main.swift") }
    static var executable: URL { CLIRunner.binary.deletingLastPathComponent().appendingPathComponent("FlashVirtualDevice") }

    /// The code block after "<!-- example: Examples/FlashVirtualDevice/main.swift -->" in docs/library.md.
    static func documentedExample() throws -> String {
        let doc = try String(contentsOf: CLIRunner.repositoryRoot.appendingPathComponent("docs/library.md"), encoding: .utf8)
        let marker = "<!-- example: Examples/FlashVirtualDevice/main.swift -->\n```swift\n"
        let start = try #require(doc.range(of: marker), "docs/library.md has no example marker")
        let end = try #require(doc.range(of: "\n```", range: start.upperBound..<doc.endIndex))
        return String(doc[start.upperBound..<end.lowerBound]) + "\n"
    }

    @Test func theDocumentedExampleIsTheBuiltOne() throws {
        let built = try String(contentsOf: Self.source, encoding: .utf8)
        #expect(try Self.documentedExample() == built)
        // About 20 lines of program, imports and comments aside.
        let code = built.split(separator: "\n").filter { !$0.hasPrefix("//") && !$0.hasPrefix("import") && !$0.isEmpty }
        #expect(code.count <= 25, "\(code.count) lines")
    }

    @Test func theExampleFlashesAVirtualDevice() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, sha) = try await FlashFixture.applicationPackage(in: directory, size: 20_000)
        let simulator = try await FlashSimulator(directory: directory, speedup: 100)
        defer { simulator.stop() }
        let result = try await CLIRunner.run([simulator.radio, package, FlashFixture.device], timeout: 120, executable: Self.executable)
        #expect(result.status == 0, "stdout: \(result.stdout)\nstderr: \(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("part 1/1: ") && $0.hasSuffix("%") })
        #expect(lines.last?.hasPrefix("done: ") == true, "\(result.stdout)")
        let device = await simulator.waitForApplication(sha256: sha)
        let installed = (device?["installed"] as? [String: Any])?["application"] as? [String: Any]
        #expect((installed?["sha256"] as? String)?.lowercased() == sha)
    }
}
