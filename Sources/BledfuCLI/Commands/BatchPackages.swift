import BledfuKit
import DFUCore
import DFUPackage
import Batch
import Foundation
import LegacyDFU
import MCUbootImage
import MCUmgr
import SecureDFU

/// Loads and checks a plan's packages and keys before anything connects.
enum BatchPlanFiles {
    /// A plan path resolved against the plan file's directory.
    static func resolve(_ path: String, relativeTo directory: URL) -> String {
        path.hasPrefix("/") ? path : directory.appendingPathComponent(path).standardizedFileURL.path
    }

    /// Reads and parses the plan, resolves relative paths, and loads and verifies every class's package.
    static func load(_ path: String) throws(CLIError) -> (plan: BatchPlan, packages: [String: PackageInfo]) {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw CLIError("cannot read the plan \(path)", exitCode: BatchExit.planInvalid)
        }
        var plan: BatchPlan
        do {
            plan = try PlanParser.parse(String(decoding: data, as: UTF8.self))
        } catch {
            throw CLIError("plan \(path): \(error)", exitCode: BatchExit.planInvalid)
        }
        let directory = url.deletingLastPathComponent()
        plan.flash.keys = plan.flash.keys.map { resolve($0, relativeTo: directory) }
        for index in plan.classes.indices {
            plan.classes[index].package = resolve(plan.classes[index].package, relativeTo: directory)
        }
        var packages: [String: PackageInfo] = [:]
        for deviceClass in plan.classes {
            do {
                // One plan may mix families (a Secure DFU class beside an SMP one): each package is read by its
                // family, which also checks flash.mode (adaptive suits every family).
                let info = try info(deviceClass.package, keys: plan.flash.keys, mode: plan.flash.mode)
                packages[deviceClass.name] = info
            } catch let error where error.exitCode == BledfuExit.usage {
                throw CLIError("plan \(path): flash.mode: class '\(deviceClass.name)': \(error.message)", exitCode: BatchExit.planInvalid)
            } catch {
                let planError = PlanError(.badPackage, line: deviceClass.line, "class '\(deviceClass.name)': \(error.message)")
                throw CLIError("plan \(path): \(planError)", exitCode: BatchExit.planInvalid)
            }
        }
        return (plan, packages)
    }

    /// Loads, verifies (with the plan's keys) and identifies one package, of whichever family reads it; `mode` must
    /// be one the family takes (a usage error otherwise).
    static func info(_ path: String, keys: [String], mode: String) throws(CLIError) -> PackageInfo {
        let source: PackageSource
        do {
            source = try PackageSource(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CLIError(error.message, exitCode: BledfuExit.packageInvalid)
        }
        guard MCUbootPackage.looksLikeMCUboot(source.bytes) else {
            // A Secure DFU mode, or a Legacy DFU one (the zip serves both families; each flash takes its own).
            do {
                if (try? LegacyPacingPolicies.parse(mode)) == nil { _ = try PacingPolicies.parse(mode) }
            } catch {
                throw CLIError("\(mode) is not a Secure or Legacy DFU mode: \(error)", exitCode: BledfuExit.usage)
            }
            return try info(path, keys: keys)
        }
        var pems: [String] = []
        for key in keys {
            do {
                pems.append(try PackageKeys.readPEM(URL(fileURLWithPath: key)))
            } catch {
                throw PackageCLI.cliError(error)
            }
        }
        let plan: FamilyPlan<SMPPart>
        do {
            plan = try SMPFamily().plan(source, options: UpdateOptions(verificationKeys: pems, pacing: mode))
        } catch {
            throw CLIError(error.message, exitCode: FlashExit.code(for: error))
        }
        // The device reports semantic versions, not the Firmware Revision number the skip rule compares: no target.
        return PackageInfo(
            path: path, sha256: source.sha256, targetVersion: nil, totalBytes: plan.parts.reduce(0) { $0 + $1.byteCount })
    }

    /// Loads, verifies (with the plan's keys) and identifies one Secure or Legacy DFU package.
    static func info(_ path: String, keys: [String]) throws(CLIError) -> PackageInfo {
        let package = try PackageCLI.loadForFlash(path)
        let report = package.verify(keys: try PackageCLI.publicKeysForFlash(keys))
        if let first = report.errors.first { throw PackageCLI.cliError(first) }
        let sha: String
        do {
            sha = try PackageSource(contentsOf: URL(fileURLWithPath: path)).sha256
        } catch {
            throw CLIError(error.message, exitCode: BledfuExit.packageInvalid)
        }
        // Secure: the init command's fw_version; Legacy: the init packet's application_version (0xFFFFFFFF: none).
        let application = package.part(.application)
        let legacyVersion = application?.legacyInit?.applicationVersion.flatMap { $0 == 0xFFFF_FFFF ? nil : $0 }
        return PackageInfo(
            path: path, sha256: sha, targetVersion: application?.initCommand?.fwVersion ?? legacyVersion,
            totalBytes: package.parts.reduce(0) { $0 + $1.image.count })
    }
}
