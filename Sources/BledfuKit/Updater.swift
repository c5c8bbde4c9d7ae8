import BLECore
import DFUCore
import Logging

/// Updates the firmware of BLE devices: one ``start(_:)`` per device, any family the updater knows.
///
/// The updater owns the whole flow of an update: it plans the package with the families (`--family auto` tries
/// each), connects, recognises the device's family and mode from its services, jumps from the application into the
/// updater, finds it again, sends every part (reconnecting and resuming after a lost link as the
/// ``UpdateRequest/reconnect`` policy allows), keeps the journal, stops at a safe point on request, and looks at
/// the device when the step that installs a part went unacknowledged. Families are injected
/// (``DefaultFamilies/all`` by default); time comes from the injected clock.
///
///     let updater = Updater(adapter: VirtualRadio(directory: "/tmp/radio"))
///     let run = updater.start(try UpdateRequest(packageAt: URL(fileURLWithPath: "app.zip"), target: .address(peer)))
///     for await event in run { print(event) }
///     let result = try await run.result()
public struct Updater: Sendable {
    public let adapter: any BLEAdapter
    public let families: [any DFUFamily]
    let clock: UpdateClock
    /// The stall watchdog's clock (real time unless a test moves it).
    let watchdogClock: any Clock<Duration>
    let journalStore: any UpdateJournalStore
    let logger: Logger
    let bearerWrapper: BearerWrapper?

    /// Wraps every bearer the updater opens, before the ATT client takes it (captures, traces, counters).
    public typealias BearerWrapper = @Sendable (any ATTBearer) throws(DFUError) -> any ATTBearer

    /// - Parameters:
    ///   - adapter: where devices are scanned for and connected to (BlueZ, the virtual radio, a test adapter).
    ///   - families: the families to try, in order (``DefaultFamilies/all``).
    ///   - clock: every wait of the update (backoff, reboot delays, deadlines, timeouts) is on it.
    ///   - journal: where journals are kept (``JournalFileStore`` for a program that may be stopped and run again).
    ///   - wrapBearer: called on every new bearer (the CLI's `--capture` and `--verbose`).
    ///   - watchdogClock: the clock of the stall watchdog (``UpdateRequest/stallLimit``): real time, as a hang is;
    ///     a test moves it by hand.
    public init(
        adapter: any BLEAdapter, families: [any DFUFamily] = DefaultFamilies.all,
        clock: some Clock<Duration> = ContinuousClock(), journal: any UpdateJournalStore = InMemoryUpdateJournalStore(),
        logger: Logger = Logger(label: "bledfu.updater"), wrapBearer: BearerWrapper? = nil,
        watchdogClock: any Clock<Duration> = ContinuousClock()
    ) {
        self.watchdogClock = watchdogClock
        self.adapter = adapter
        self.families = families
        self.clock = UpdateClock(clock)
        self.journalStore = journal
        self.logger = logger
        self.bearerWrapper = wrapBearer
    }

    /// Starts an update; the returned run yields its events and ends in its result.
    public func start(_ request: UpdateRequest) -> UpdateRun {
        UpdateRun(updater: self, request: request)
    }

    /// Runs an update to its end, ignoring events.
    public func update(_ request: UpdateRequest) async throws(DFUError) -> UpdateResult {
        let run = start(request)
        for await _ in run {}
        return try await run.result()
    }
}

/// Which device to update.
public enum UpdateTarget: Sendable, Hashable {
    /// A device at a known address.
    case address(PeerAddress)
    /// The first device whose advertised name starts with this.
    case name(String)

    var isAddress: Bool { if case .address = self { true } else { false } }
}

/// One update: the package, the device, and how to go about it.
public struct UpdateRequest: Sendable {
    public var package: PackageSource
    public var target: UpdateTarget
    /// The family to use; nil tries every family the updater knows (`--family auto`).
    public var family: DFUFamilyID?
    public var options: UpdateOptions
    /// How lost links are retried (attempts per episode, backoff on the updater's clock).
    public var reconnect: ReconnectPolicy
    /// How long to look for a device (by name, or the updater after a jump or a reset).
    public var scanTimeout: Duration
    /// How long a connection may take to come up.
    public var connectTimeout: Duration
    /// BT_SECURITY level of the links (1 low … 4 FIPS), nil for the adapter's default.
    public var securityLevel: UInt8?
    /// The updater's own watchdog: an update that emits no event for this long (no progress, no step, no retry)
    /// ends with ``DFUError/Code/stalled`` whatever it waits on, so nothing waits forever. Nil: no watchdog. The
    /// default is above the longest silent step (a reconnect's search, a connection's timeout, a checkpoint's).
    public var stallLimit: Duration? = UpdateRequest.defaultStallLimit

    public static let defaultStallLimit: Duration = .seconds(120)

    public init(
        package: PackageSource, target: UpdateTarget, family: DFUFamilyID? = nil, options: UpdateOptions = UpdateOptions(),
        reconnect: ReconnectPolicy = ReconnectPolicy(), scanTimeout: Duration = .seconds(10),
        connectTimeout: Duration = .seconds(10), securityLevel: UInt8? = nil
    ) {
        self.package = package
        self.target = target
        self.family = family
        self.options = options
        self.reconnect = reconnect
        self.scanTimeout = scanTimeout
        self.connectTimeout = connectTimeout
        self.securityLevel = securityLevel
    }
}

/// How an update ended well.
public struct UpdateResult: Sendable, Hashable {
    /// The family that did it.
    public var family: DFUFamilyID
    /// The device's address as it was given (or found by name).
    public var deviceAddress: String
    public var statistics: UpdateStatistics
    /// How the parts got there (a family's ``PartOutcome/summary``: restarts, bytes sent again and why) and what the
    /// family's finish found, joined by "; "; nil when there was nothing to say.
    public var summary: String?
}
