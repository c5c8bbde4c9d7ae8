import ArgumentParser
import Batch
import BLECore
import DFUPackage
import Foundation
import MCUbootImage

/// `package inspect`, `verify` and `create` for MCUboot images (`.bin`, `.hex`) and the nRF Connect SDK's
/// `dfu_application.zip` (docs/smp.md). The subcommands hand over here when the file is one of those.
enum PackageMCUboot {
    static func read(_ path: String) throws -> [UInt8] {
        do {
            return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw CLIError(FileProblem.describe("read", path, error), exitCode: ExitCodeRegistry.code(for: PackageError(.io, "")))
        }
    }

    /// True when `path` holds an MCUboot image or an NCS zip rather than a Nordic DFU package.
    static func handles(_ path: String) -> Bool {
        guard let bytes = try? Data(contentsOf: URL(fileURLWithPath: path)) else { return false }
        return MCUbootPackage.looksLikeMCUboot(Array(bytes))
    }

    static func load(_ path: String) throws -> MCUbootPackage {
        do {
            return try MCUbootPackage(bytes: try read(path), name: URL(fileURLWithPath: path).lastPathComponent)
        } catch let error as PackageError {
            throw PackageCLI.cliError(error)
        }
    }

    static func keys(_ paths: [String]) throws -> [MCUbootPublicKey] {
        do {
            return try paths.map { path throws(PackageError) in
                try MCUbootPublicKey(pem: try PackageKeys.readPEM(URL(fileURLWithPath: path)), name: path)
            }
        } catch {
            throw PackageCLI.cliError(error)
        }
    }

    /// Checks one image with the given keys (any may verify it): the first failure, or the key name that verified.
    static func check(_ image: MCUbootImage, keys: [MCUbootPublicKey], slotSize: Int?) -> Result<String, PackageError> {
        do throws(PackageError) {
            guard !keys.isEmpty else {
                _ = try image.verify(key: nil, slotSize: slotSize)
                return .success("not checked (no --key)")
            }
            var failure: PackageError?
            for key in keys {
                do {
                    _ = try image.verify(key: key, slotSize: slotSize)
                    return .success("valid (\(key.name))")
                } catch {
                    if error.code != .signatureInvalid { throw error }
                    failure = failure ?? error
                }
            }
            return .failure(failure ?? PackageError(.signatureInvalid, "no key verifies the image"))
        } catch {
            return .failure(error)
        }
    }

    static func describe(_ part: MCUbootPackage.Part, verdict: Result<String, PackageError>) -> [String] {
        let image = part.image
        let header = image.header
        var lines = [
            "[image \(part.imageIndex)] \(part.name): version \(header.version), \(image.bytes.count) bytes (header \(header.headerSize), body \(header.imageSize), TLVs \(image.bytes.count - Int(header.headerSize) - Int(header.imageSize)))",
            "    load address 0x\(String(header.loadAddress, radix: 16)), flags \(header.flags.names.isEmpty ? "-" : header.flags.names.joined(separator: ","))"
                + (image.securityCounter.map { ", security counter \($0)" } ?? ""),
            "    hash (SHA-256 TLV) \(image.hashTLV?.hexString ?? "missing")",
            "    TLVs: " + (image.protectedTLVs.map { "\($0.name)(protected)" } + image.tlvs.map(\.name)).joined(separator: ", "),
        ]
        if let keyHash = image.keyHash { lines.append("    key hash \(keyHash.hexString)") }
        switch verdict {
        case .success(let text): lines.append("    hash: valid; signature: \(text)")
        case .failure(let error): lines.append("    error: \(error.message)")
        }
        return lines
    }

    static func inspect(_ path: String, keys keyPaths: [String], slotSize: Int?, json: Bool) throws {
        let package = try load(path)
        let keys = try keys(keyPaths)
        let verdicts = package.parts.map { check($0.image, keys: keys, slotSize: slotSize) }
        if json {
            Console.json(jsonObject(package, verdicts, path: path))
        } else {
            var lines = ["package: \(path) (\(package.kind), \(package.parts.count) image(s))"]
            for (part, verdict) in zip(package.parts, verdicts) { lines += describe(part, verdict: verdict) }
            print(lines.joined(separator: "\n"))
        }
        try PackageCLI.fail(on: failures(verdicts))
    }

    /// The failed checks, in image order.
    static func failures(_ verdicts: [Result<String, PackageError>]) -> [PackageError] {
        verdicts.compactMap { verdict -> PackageError? in
            if case .failure(let error) = verdict { return error }
            return nil
        }
    }

    static func verify(_ path: String, keys keyPaths: [String], slotSize: Int?, json: Bool) throws {
        let package = try load(path)
        let keys = try keys(keyPaths)
        let verdicts = package.parts.map { check($0.image, keys: keys, slotSize: slotSize) }
        if json {
            Console.json(jsonObject(package, verdicts, path: path))
        } else {
            for (part, verdict) in zip(package.parts, verdicts) {
                if case .success(let text) = verdict { print("image \(part.imageIndex) \(part.name): hash valid, signature \(text)") }
            }
        }
        let failures = failures(verdicts)
        if failures.isEmpty, !json { print("OK: \(path)") }
        try PackageCLI.fail(on: failures)
    }

    static func jsonObject(_ package: MCUbootPackage, _ verdicts: [Result<String, PackageError>], path: String) -> [String: any Sendable] {
        var parts: [[String: any Sendable]] = []
        for (part, verdict) in zip(package.parts, verdicts) {
            var object: [String: any Sendable] = [
                "imageIndex": part.imageIndex, "file": part.name, "version": part.image.header.version.description,
                "size": part.image.bytes.count, "hash": part.image.hashTLV?.hexString ?? "",
                "tlvs": part.image.tlvs.map(\.name), "loadAddress": Int(part.image.header.loadAddress),
            ]
            switch verdict {
            case .success(let text): object["signature"] = text
            case .failure(let error): object["error"] = error.message
            }
            parts.append(object)
        }
        let valid = verdicts.allSatisfy { if case .success = $0 { true } else { false } }
        return ["package": path, "format": "mcuboot", "kind": package.kind, "parts": parts, "valid": valid]
    }

    /// `package create --mcuboot FIRMWARE --mcuboot-version V [--key-file K] OUTPUT`.
    static func create(
        firmware path: String, version text: String, keyFile: String?, headerSize: Int, slotSize: Int?,
        securityCounter: UInt32?, output: String
    ) throws {
        guard let version = MCUbootVersion(text) else {
            throw ValidationError("--mcuboot-version: '\(text)' is not MAJOR.MINOR.REVISION[+BUILD]")
        }
        let input = try read(path)
        do {
            var firmware = input
            var address: UInt32 = 0
            if path.lowercased().hasSuffix(".hex") {
                (address, firmware) = try MCUbootHex.read(String(decoding: input, as: UTF8.self))
            }
            let key = try keyFile.map { path throws(PackageError) in
                try MCUbootPrivateKey(pem: try PackageKeys.readPEM(URL(fileURLWithPath: path)), name: path)
            }
            let image = try MCUbootImage.sign(
                firmware: firmware, version: version, key: key, headerSize: headerSize, securityCounter: securityCounter,
                slotSize: slotSize)
            if output.lowercased().hasSuffix(".hex") {
                try PackageCLI.write(Array(MCUbootHex.write(image.bytes, address: address).utf8), to: output)
            } else {
                try PackageCLI.write(image.bytes, to: output)
            }
            print("created \(output) (MCUboot image \(version), \(image.bytes.count) bytes, hash \(image.hashTLV?.hexString ?? ""))")
        } catch let error as PackageError {
            throw PackageCLI.cliError(error)
        }
    }
}
