import BledfuKit
import DFUCore
import DFUPackage
import Batch
import Foundation

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
        // The line knows no DFU family: a `buttonless` rule looks for the services the updater's families name.
        for index in plan.discovery.rules.indices { plan.discovery.rules[index].dfuServices = DefaultFamilies.services() }
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

    /// Loads, verifies (with the plan's keys) and identifies one package, as the update will plan it: whichever
    /// family reads it (``Updater/plan(_:family:options:families:)``), which also checks that it takes `mode` (a usage
    /// error otherwise). One plan may mix families (a Secure DFU class beside an SMP one).
    static func info(_ path: String, keys: [String], mode: String = "adaptive") throws(CLIError) -> PackageInfo {
        let source: PackageSource
        do {
            source = try PackageSource(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CLIError(error.message, exitCode: BledfuExit.packageInvalid)
        }
        var pems: [String] = []
        for key in keys {
            do {
                pems.append(try PackageKeys.readPEM(URL(fileURLWithPath: key)))
            } catch {
                throw PackageCLI.cliError(error)
            }
        }
        let plan: UpdatePlan
        do {
            plan = try Updater.plan(source, options: UpdateOptions(verificationKeys: pems, pacing: mode))
        } catch {
            throw CLIError(error.message, exitCode: FlashExit.code(for: error))
        }
        return PackageInfo(path: path, sha256: source.sha256, targetVersion: plan.targetVersion, totalBytes: plan.totalBytes)
    }
}
