import Foundation
import LinuxIO
import Testing

/// MCUboot's imgtool from PyPI, installed by tools/python-env into .venv-tools (pinned version).
enum Imgtool {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let venv = URL(fileURLWithPath: ProcessInfo.processInfo.environment["BLEDFU_PYTHON_ENV"] ?? ".venv-tools", relativeTo: repository)
    static let path = venv.appendingPathComponent("bin/imgtool").path
    static let python = venv.appendingPathComponent("bin/python").path
    static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: path) }
    /// Run the imgtool tests: imgtool is there, or CI demands it (then a missing imgtool fails the test).
    static var shouldRun: Bool { isInstalled || ProcessInfo.processInfo.environment["CI"] == "true" }

    struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs `executable` to its end without holding a thread of the cooperative pool: the child's exit and its
    /// pipes are awaited on the reactor (LinuxIO's ChildProcess and PipeReader; each wait bounded by 120 s). A
    /// blocking wait here held one of the pool's threads (one per core) for the tool's whole run and starved the
    /// in-process tests beside it (docs/reliability.md, "Starved pool").
    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) async throws -> Output {
        let out = try ChildProcess.makePipe()
        let err = try ChildProcess.makePipe()
        let child: ChildProcess
        do {
            defer {
                try? FileIO.close(out.write)
                try? FileIO.close(err.write)
            }
            child = try ChildProcess.spawn(
                executable, arguments: arguments, standardOutput: .descriptor(out.write), standardError: .descriptor(err.write),
                ownProcessGroup: false)
        } catch {
            try? FileIO.close(out.read)
            try? FileIO.close(err.read)
            throw error
        }
        let outReader = try PipeReader(fd: out.read)
        let errReader = try PipeReader(fd: err.read)
        defer {
            outReader.close()
            errReader.close()
        }
        async let outData = outReader.readToEnd(idle: .seconds(120))
        async let errData = errReader.readToEnd(idle: .seconds(120))
        let (stdout, stderr) = try await (outData, errData)
        let exit = await child.end(grace: .seconds(120))
        return Output(
            status: exit?.code ?? -1, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
    }

    static func imgtool(_ arguments: [String]) async throws -> Output {
        guard isInstalled else {
            throw ToolMissing(what: "imgtool is not installed: run tools/python-env")
        }
        return try await run(path, arguments)
    }

    struct ToolMissing: Error, CustomStringConvertible {
        var what: String
        var description: String { what }
    }

    /// A fresh temporary directory.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-mcuboot-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Deterministic firmware bytes.
    static func firmware(_ count: Int, seed: UInt8 = 1) -> [UInt8] {
        var state = UInt32(seed) &* 2_654_435_761 | 1
        return (0..<count).map { _ in
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            return UInt8(truncatingIfNeeded: state)
        }
    }
}
