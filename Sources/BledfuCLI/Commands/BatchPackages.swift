import BledfuKit
import DFUCore
import DFUPackage
import Fleet
import Foundation
import LegacyDFU
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
        do {
            // A Secure DFU mode, or a Legacy DFU one (a plan may mix both families; each flash takes its own).
            if (try? LegacyPacingPolicies.parse(plan.flash.mode)) == nil { _ = try PacingPolicies.parse(plan.flash.mode) }
        } catch {
            throw CLIError("plan \(path): flash.mode: \(error)", exitCode: BatchExit.planInvalid)
        }
        var packages: [String: PackageInfo] = [:]
        for deviceClass in plan.classes {
            do {
                packages[deviceClass.name] = try info(deviceClass.package, keys: plan.flash.keys)
            } catch {
                let planError = PlanError(.badPackage, line: deviceClass.line, "class '\(deviceClass.name)': \(error.message)")
                throw CLIError("plan \(path): \(planError)", exitCode: BatchExit.planInvalid)
            }
        }
        return (plan, packages)
    }

    /// Loads, verifies (with the plan's keys) and identifies one package.
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
