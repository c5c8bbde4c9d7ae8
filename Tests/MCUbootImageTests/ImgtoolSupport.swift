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

    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) throws -> Output {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let outData = Data((try? BlockingRead.toEnd(fd: out.fileHandleForReading.fileDescriptor)) ?? [])
        let errData = Data((try? BlockingRead.toEnd(fd: err.fileHandleForReading.fileDescriptor)) ?? [])
        process.waitUntilExit()
        return Output(
            status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self))
    }

    static func imgtool(_ arguments: [String]) throws -> Output {
        guard isInstalled else {
            throw ToolMissing(what: "imgtool is not installed: run tools/python-env")
        }
        return try run(path, arguments)
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
