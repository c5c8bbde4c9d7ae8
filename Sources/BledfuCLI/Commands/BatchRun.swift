import BledfuKit
import ArgumentParser
import BLECore
import Fleet
import Foundation
import Synchronization

/// `bledfu batch [run] PLAN`: runs a production-line plan (docs/batch.md).
struct BatchRun: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a plan: find the devices, update them in parallel, record every attempt.",
        discussion: """
            The plan is checked completely (YAML, keys, classes, packages and their signatures) before anything \
            connects; an error names the line. Running the same command again after a crash or kill -9 finishes the \
            devices left unfinished and never updates again a device the database records at the target version \
            (unless --force). Each device's `bledfu flash` output goes to STATE/batch-logs/ADDRESS.log.

            \(BatchExit.helpText)
            """)

    @Argument(help: "The plan (YAML).") var plan: String
    @Option(name: .long, help: ArgumentHelp("The SQLite log (default STATE/batch.sqlite).", valueName: "file"))
    var db: String?
    @Option(name: .long, help: ArgumentHelp("Journals and logs (default $XDG_STATE_HOME/bledfu).", valueName: "dir"))
    var stateDir: String?
    @Flag(name: .long, help: "Update devices the database records at the target version too, and ignore the skip policy.")
    var force = false
    @Flag(name: .long, help: "Print NDJSON events (device, started, progress, finished, totals, result) on standard output.")
    var json = false
    @Flag(name: .long, help: "Check the plan and its packages, then exit (nothing connects).")
    var check = false
    @Option(name: .long, help: .hidden) var bledfu: String?

    func run() async throws {
        let planURL = URL(fileURLWithPath: plan).standardizedFileURL
        let (plan, packages) = try BatchPlanFiles.load(planURL.path)
        if check {
            print("plan OK: \(plan.adapters.count) adapter(s), \(plan.totalConnections) connection(s), \(plan.classes.count) class(es), "
                + "\(plan.devices.count) device(s), \(plan.discovery.rules.count) discovery rule(s)")
            return
        }
        let state = stateDir.map { URL(fileURLWithPath: $0) } ?? JournalFileStore.defaultDirectory()
        try? FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let database = db ?? state.appendingPathComponent("batch.sqlite").path
        let log: BatchLog
        do {
            log = try BatchLog(path: database)
        } catch {
            throw CLIError(error.reason, exitCode: BatchExit.databaseError)
        }
        let console = BatchConsole(json: json)
        let batchName = planURL.path
        let known = Set(((try? log.devices(batch: batchName)) ?? []).compactMap { BluetoothAddress($0.address) })
        let targets = try await Self.targets(plan, known: known, console: console)
        if targets.isEmpty, known.isEmpty {
            throw CLIError("no device found: the plan lists none and discovery matched none", exitCode: BatchExit.noDevices)
        }
        var scheduler = BatchScheduler(
            plan: plan, packages: packages,
            flasher: ProcessFlasher(
                executable: Self.executable(bledfu), stateDirectory: state,
                logDirectory: state.appendingPathComponent("batch-logs")),
            log: log, batch: batchName)
        scheduler.force = force
        if force { scheduler.plan.policies.skipAtTargetVersion = false }
        scheduler.events = { console.handle($0) }
        let stop = Mutex(false)
        scheduler.shouldStop = { stop.withLock { $0 } }
        let interrupts = InterruptHandler {
            stop.withLock { $0 = true }
            console.message("stopping: no new device starts; running devices stop at a safe point (Ctrl-C again quits)")
        }
        defer { interrupts.cancel() }
        let summary: BatchSummary
        do {
            summary = try await scheduler.run(targets: targets)
        } catch {
            throw CLIError(error.reason, exitCode: BatchExit.databaseError)
        }
        console.finish(summary, database: database)
        if summary.interrupted { throw CLIError("interrupted; run the same command again to finish", exitCode: BledfuExit.interrupted) }
        if summary.lineStopped {
            throw CLIError("the line stopped after \(summary.failed) failed device(s); \(summary.pending) pending", exitCode: BatchExit.lineStopped)
        }
        if summary.failed > 0 { throw CLIError("\(summary.failed) device(s) failed", exitCode: BatchExit.devicesFailed) }
    }

    /// The plan's explicit devices, then whatever discovery finds (explicit entries win). `known`: the batch's
    /// devices in the database, which count toward `discover.expect`.
    static func targets(_ plan: BatchPlan, known: Set<BluetoothAddress>, console: BatchConsole) async throws(CLIError) -> [BatchTarget] {
        var targets = plan.devices.map {
            BatchTarget(peer: PeerAddress($0.address, type: $0.addressType), className: $0.className)
        }
        guard !plan.discovery.rules.isEmpty else { return targets }
        var adapters: [any BLEAdapter] = []
        for name in Set(plan.adapters.map(\.name)).sorted() {
            do {
                adapters.append(try makeFlashAdapter(name))
            } catch let error as CLIError {
                throw error
            } catch {
                throw CLIError("adapter \(name): \(error)", exitCode: BledfuExit.noAdapter)
            }
        }
        console.message("scanning for up to \(plan.discovery.duration) s")
        let found: [BatchTarget]
        do {
            found = try await DeviceDiscovery.discover(plan.discovery, adapters: adapters, known: known.union(targets.map(\.address)))
        } catch let error as AdapterError {
            throw CLIError(error)
        } catch {
            throw CLIError("scan failed: \(error)", exitCode: BledfuExit.failure)
        }
        let explicit = Set(targets.map(\.address))
        targets += found.filter { !explicit.contains($0.address) }
        return targets
    }

    /// The `bledfu` binary the per-device flashes run: `--bledfu`, else this very executable.
    static func executable(_ override: String?) -> URL {
        if let override { return URL(fileURLWithPath: override) }
        let link = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        if link.path != "/proc/self/exe" { return link }
        return (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])).resolvingSymlinksInPath()
    }
}
