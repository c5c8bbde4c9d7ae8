import BledfuKit
import ArgumentParser
import BLECore
import Batch
import Foundation
import LineStore
import LinuxIO
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

    @Argument(help: "The plan (YAML).", completion: Completions.plan) var plan: String
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The batch log: an SQLite file (default STATE/batch.sqlite, or the plan's db:), or postgres://USER@HOST/DB to run as a station of a line.",
            valueName: "file|url"))
    var db: String?
    @Option(name: .long, help: ArgumentHelp("This station's name in the line (default: the host name); unique among live stations.", valueName: "name"))
    var station: String?
    @Option(name: .long, help: ArgumentHelp("The line's name in a shared database (default: the plan's line:, else 'line'; SQLite: the plan's path).", valueName: "name"))
    var line: String?
    @Option(name: .long, help: ArgumentHelp("Seconds a claim lasts without a heartbeat; another station takes a device over after that.", valueName: "seconds"))
    var lease: Double = 30
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
        let (loaded, packages) = try BatchPlanFiles.load(planURL.path)
        // `connections: auto` is the adapter's controller's own limit (docs/batch.md "Links per adapter"); a number
        // above a known limit is refused.
        let plan: BatchPlan
        do throws(PlanError) {
            plan = try loaded.resolvingAuto(limit: \.controllerLinks)
        } catch {
            throw CLIError("plan \(planURL.path): \(error)", exitCode: BatchExit.planInvalid)
        }
        if check {
            print("plan OK: \(plan.adapters.count) adapter(s), \(plan.totalConnections) connection(s), \(plan.classes.count) class(es), "
                + "\(plan.devices.count) device(s), \(plan.discovery.rules.count) discovery rule(s)")
            return
        }
        let state = ConfigDefaults.currentOrNone.stateDirectory(option: stateDir)
        try? FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let database = db ?? plan.database ?? state.appendingPathComponent("batch.sqlite").path
        guard lease >= 1, lease <= 3600 else { throw CLIError("--lease must be 1 to 3600 seconds", exitCode: BledfuExit.usage) }
        let log: BatchLog
        do {
            log = try await BatchLog.open(location: database)
        } catch {
            throw CLIError(error)
        }
        // The connection is closed on every way out (PostgreSQL: the server sees a clean goodbye).
        do {
            try await runStation(plan: plan, packages: packages, planURL: planURL, database: database, state: state, log: log)
        } catch {
            await log.close()
            throw error
        }
        await log.close()
    }

    func runStation(plan: BatchPlan, packages: [String: PackageInfo], planURL: URL, database: String, state: URL, log: BatchLog)
        async throws
    {
        let console = BatchConsole(json: json)
        let shared = PostgresURL.isPostgres(database)
        let batchName = line ?? plan.lineName ?? (shared ? "line" : planURL.path)
        let stationInfo = StationInfo(
            name: station ?? LineStation.hostName(), host: LineStation.hostName(), pid: Int(ProcessInfo.processInfo.processIdentifier),
            adapters: BatchScheduler.adapterSummary(plan), planHash: PlanHash.of(packages), lease: lease)
        do {
            try await log.checkStation(batch: batchName, station: stationInfo, at: Date(), isRunning: LineStation.isRunning)
        } catch {
            throw CLIError(error)
        }
        let known = Set(((try? await log.devices(batch: batchName)) ?? []).compactMap { BluetoothAddress($0.address) })
        let targets = try await Self.targets(plan, known: known, console: console)
        if targets.isEmpty, known.isEmpty {
            throw CLIError("no device found: the plan lists none and discovery matched none", exitCode: BatchExit.noDevices)
        }
        let journals = LineJournalSync(log: log, station: stationInfo.name, directory: state) {
            JournalFileStore.fileName(deviceAddress: $0, packageSHA256: $1)
        }
        let flasher = ProcessFlasher(
            executable: Self.executable(bledfu), stateDirectory: state, logDirectory: state.appendingPathComponent("batch-logs"),
            makeAdapter: makeFlashAdapter)
        // The last resort behind the scheduler's own deadlines (Batch's BatchBackstop): fed by every heartbeat and event.
        let backstop = BatchBackstop.start(lease: lease)
        defer { backstop.stop() }
        var scheduler = BatchScheduler(
            plan: plan, packages: packages, flasher: journals.wrap(flasher),
            log: log, batch: batchName, station: stationInfo)
        scheduler.isRunning = LineStation.isRunning
        scheduler.afterHeartbeat = {
            backstop.feed()
            await journals.pushInFlight()
        }
        scheduler.leaseLost = { reason in
            // Exiting closes the children's event pipes: each `bledfu flash` child stops at once (ReaderWatch).
            Console.errorRaw("bledfu: error: \(reason)")
            Foundation.exit(BatchExit.databaseError)
        }
        scheduler.force = force
        if force { scheduler.plan.policies.skipAtTargetVersion = false }
        scheduler.events = {
            backstop.feed()
            console.handle($0)
        }
        let stop = Mutex(false)
        scheduler.shouldStop = { stop.withLock { $0 } }
        // The children run in process groups of their own: the terminal's Ctrl-C reaches this process alone, which
        // passes it on (docs/batch.md "Ctrl-C").
        let children = flasher.children
        let interrupts = InterruptHandler(onSecond: {
            children.kill()
            Console.errorRaw("bledfu: killed \(children.count) running flash(es); their journals are kept: run the same command again to resume")
        }) {
            stop.withLock { $0 = true }
            let running = children.interrupt()
            console.message(
                "stopping: no new device starts; \(running) running device(s) stop at their next safe point and stay pending "
                    + "(Ctrl-C again quits at once)")
        }
        defer { interrupts.cancel() }
        let summary: BatchSummary
        do {
            summary = try await scheduler.run(targets: targets)
        } catch {
            throw CLIError(error)
        }
        console.finish(summary, database: log.path)
        if summary.interrupted { throw CLIError("interrupted; run the same command again to finish", exitCode: BledfuExit.interrupted) }
        if !summary.adaptersGone.isEmpty, summary.pending > 0 {
            throw CLIError(
                "adapter \(summary.adaptersGone.joined(separator: ", ")) gone (unplugged or removed); \(summary.pending) device(s) "
                    + "pending: plug it back in and run the same command again (their journals resume them)",
                exitCode: BatchExit.adapterGone)
        }
        if summary.lineStopped {
            throw CLIError("the line stopped after \(summary.failed) failed device(s); \(summary.pending) pending", exitCode: BatchExit.lineStopped)
        }
        if summary.failed > 0 { throw CLIError("\(summary.failed) device(s) failed", exitCode: BatchExit.devicesFailed) }
    }

    /// The plan's devices and what discovery finds (Batch's `DeviceDiscovery.targets`), on the plan's adapters.
    static func targets(_ plan: BatchPlan, known: Set<BluetoothAddress>, console: BatchConsole) async throws(CLIError) -> [BatchTarget] {
        var adapters: [any BLEAdapter] = []
        if !plan.discovery.rules.isEmpty {
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
        }
        do {
            return try await DeviceDiscovery.targets(plan, known: known, adapters: adapters)
        } catch let error as AdapterError {
            throw CLIError(error)
        } catch {
            throw CLIError("scan failed: \(error)", exitCode: BledfuExit.failure)
        }
    }

    /// The `bledfu` binary the per-device flashes run: `--bledfu`, else this very executable.
    static func executable(_ override: String?) -> URL {
        if let override { return URL(fileURLWithPath: override) }
        let link = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        if link.path != "/proc/self/exe" { return link }
        return (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])).resolvingSymlinksInPath()
    }
}
