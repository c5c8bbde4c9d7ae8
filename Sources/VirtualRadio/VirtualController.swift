import BLECore
import Foundation
import LinuxIO
import SystemPackage

/// One central adapter's controller on a virtual radio, shared by every process that connects through it
/// (docs/virtual-radio.md §4.2): its profile (`<DIR>/.controllers/<NAME>.json`, written by `bledfu simulate
/// --controller`) and its links (`<NAME>.links`, one line per link:
/// `pid token state peer`), changed only under an exclusive lock on `<NAME>.lock`.
///
/// Like the Linux kernel and the controller together (many-links.md §2.1-2.2): at most the profile's number of links
/// (one more is refused with the profile's HCI status, as its errno tells it), and one connection being created at
/// a time: a second attempt waits until the first has its link or has failed. A process that dies leaves its lines
/// behind; they are dropped by the next process that takes the lock (its pid is gone).
///
/// An adapter without a profile file has the default controller, ``ControllerProfile/generic`` (5 links, HCI 0x09
/// beyond them; docs/virtual-radio.md §4.2): every virtual adapter has a controller.
public struct VirtualController: Sendable {
    /// The adapter name a central uses when it names none (`virtual:DIR`).
    public static let defaultName = "default"

    public let directory: String
    public let name: String

    public init(radio directory: String, name: String) {
        self.directory = directory
        self.name = name
    }

    /// The adapters of the radio in `directory`: `default` and every adapter with a profile or links there, by name.
    public static func names(radio directory: String) -> [String] {
        let files = (try? FileIO.listDirectory(directory + "/.controllers")) ?? []
        let named = files.filter { !$0.hasPrefix(".") }.compactMap { file -> String? in
            for suffix in [".json", ".links"] where file.hasSuffix(suffix) { return String(file.dropLast(suffix.count)) }
            return nil
        }
        return Array(Set(named + [defaultName])).sorted()
    }

    var folder: String { directory + "/.controllers" }
    public var profilePath: String { folder + "/\(name).json" }
    var linksPath: String { folder + "/\(name).links" }
    var lockPath: String { folder + "/\(name).lock" }

    /// The controller's profile: its file (`bledfu simulate --controller`), or the default controller without one
    /// (a file that does not decode is the default controller too).
    public func profile() -> ControllerProfile {
        guard let bytes = try? FileIO.read(profilePath) else { return .generic }
        return (try? JSONDecoder().decode(ControllerProfile.self, from: Data(bytes))) ?? .generic
    }

    /// Writes the profile (the simulator does, for the centrals that connect to its devices).
    public func write(_ profile: ControllerProfile) throws(Errno) {
        try FileIO.makeDirectory(folder)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let bytes = (try? encoder.encode(profile)).map { Array($0) } ?? []
        try FileIO.writeAtomically(profilePath, bytes, temporaryPath: folder + "/.\(name).json.tmp")
    }

    /// One line of the links file.
    struct Entry: Hashable {
        var pid: Int32
        var token: UInt64
        var creating: Bool
        var peer: String

        var line: String { "\(pid) \(token) \(creating ? "creating" : "connected") \(peer)" }

        init(pid: Int32, token: UInt64, creating: Bool, peer: String) {
            self.pid = pid
            self.token = token
            self.creating = creating
            self.peer = peer
        }

        init?(line: Substring) {
            let fields = line.split(separator: " ")
            guard fields.count == 4, let pid = Int32(fields[0]), let token = UInt64(fields[1]),
                ["creating", "connected"].contains(fields[2])
            else { return nil }
            self.init(pid: pid, token: token, creating: fields[2] == "creating", peer: String(fields[3]))
        }
    }

    /// The links the controller holds now (live processes only).
    public func linkCount() -> Int {
        ((try? FileIO.read(linksPath)) ?? []).split(separator: UInt8(ascii: "\n")).compactMap {
            Entry(line: Substring(String(decoding: $0, as: UTF8.self)))
        }.filter { ProcessSignal.isAlive($0.pid) }.count
    }

    /// How long a wait for the links' lock goes before it asks whether the holder is stopped.
    static let stoppedHolderCheck: Duration = .seconds(1)

    /// Runs `body` on the links under the lock, waiting for the lock (bounded by `deadline`); without it when every
    /// process holding it is stopped.
    func withLinks<R>(
        until deadline: ContinuousClock.Instant, _ body: (inout [Entry]) throws(AdapterError) -> R
    ) async throws(AdapterError) -> R {
        let lock: FileLock
        do throws(Errno) {
            try FileIO.makeDirectory(folder)
            lock = try FileLock(path: lockPath)
        } catch {
            throw AdapterError(.system, "controller \(name) on \(directory): \(error)", errno: error.rawValue)
        }
        var held = false
        var nextHolderCheck = ContinuousClock.now.advanced(by: Self.stoppedHolderCheck)
        while true {
            do throws(Errno) {
                held = try lock.tryLock()
            } catch {
                throw AdapterError(.system, "controller \(name): flock: \(error)", errno: error.rawValue)
            }
            if held { break }
            // A holder stopped (SIGSTOP, Ctrl-Z) inside its few file operations would hold every other process off
            // this adapter until it is continued; a real controller has no such lock (the kernel keeps its state).
            // Its links are read as they are; what it writes when continued may be stale (the file is rewritten
            // whole by every holder).
            if ContinuousClock.now >= nextHolderCheck {
                let holders = lock.holders()
                if !holders.isEmpty && holders.allSatisfy(ProcessSignal.isStopped) { break }
                nextHolderCheck = ContinuousClock.now.advanced(by: Self.stoppedHolderCheck)
            }
            guard ContinuousClock.now < deadline else {
                throw AdapterError(.adapterBusy, "adapter \(name) on \(directory) stayed locked by another process")
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
        defer { if held { lock.unlock() } }
        let text = String(decoding: (try? FileIO.read(linksPath)) ?? [], as: UTF8.self)
        var entries = text.split(separator: "\n").compactMap(Entry.init(line:)).filter { ProcessSignal.isAlive($0.pid) }
        let before = entries
        let result = try body(&entries)
        if entries != before || text.isEmpty == false {
            let content = entries.map { $0.line + "\n" }.joined()
            try? FileIO.writeAtomically(linksPath, Array(content.utf8), temporaryPath: folder + "/.\(name).links.tmp")
        }
        return result
    }

    /// Reserves a link to `peer`: refused when the controller is full, waits while another connection is being
    /// created (until `deadline`). Returns the reservation's token.
    public func reserve(
        peer: PeerAddress, profile: ControllerProfile, until deadline: ContinuousClock.Instant
    ) async throws(AdapterError) -> UInt64 {
        let pid = ProcessInfo.processInfo.processIdentifier
        let token = UInt64.random(in: 1...UInt64.max)
        while true {
            let reserved = try await withLinks(until: deadline) { (entries) throws(AdapterError) -> Bool in
                if entries.count >= profile.maximumLinks {
                    let refusal = profile.refusal
                    throw AdapterError(
                        .noFreeLink,
                        "adapter \(name) has \(entries.count) link\(entries.count == 1 ? "" : "s") and no free link: its "
                            + "controller (\(profile.name)) refused another (HCI 0x"
                            + String(format: "%02X", refusal.status) + " \(refusal.statusName), reported as "
                            + "\(refusal.errnoName)); \(peer) can be tried again when a link ends")
                }
                // The kernel creates one LE connection per adapter at a time (hci_conn.c, hci_sync.c).
                if entries.contains(where: \.creating) { return false }
                entries.append(Entry(pid: pid, token: token, creating: true, peer: peer.address.description))
                return true
            }
            if reserved { return token }
            guard ContinuousClock.now < deadline else {
                throw AdapterError(
                    .connectionTimeout,
                    "connecting to \(peer) timed out: adapter \(name) was still creating another connection")
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The reservation's connection is up.
    public func established(_ token: UInt64) async {
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        _ = try? await withLinks(until: deadline) { entries in
            for index in entries.indices where entries[index].token == token { entries[index].creating = false }
        }
    }

    /// The reservation's link ended (or its creation failed).
    public func release(_ token: UInt64) async {
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        _ = try? await withLinks(until: deadline) { entries in entries.removeAll { $0.token == token } }
    }
}
