import BLECore

/// Why ``DeviceSelection`` found no one device: none heard, several heard, or the scan itself failed.
public struct DeviceSelectionError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// No device matched (the name, the RSSI floor) within the scan.
        public static let notFound = Code(rawValue: "not-found")
        /// Several devices matched and the caller did not ask for the strongest.
        public static let ambiguous = Code(rawValue: "ambiguous")
        /// The scan failed (its ``cause`` is the adapter's error when it has one).
        public static let scan = Code(rawValue: "scan")
        public var description: String { rawValue }
    }

    public let code: Code
    public let message: String
    public let cause: (any Error)?

    public init(_ code: Code, _ message: String, cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }
}

/// Which device a name (and an RSSI floor) means, as BLE tools do it: listen a little after the first match so that
/// every device of that name is seen; several are an error listing them, unless the caller takes the one heard
/// loudest (`bledfu flash --name … --strongest`; README "Choosing the device").
public enum DeviceSelection {
    /// One device heard: its address, name and strongest RSSI.
    public struct Candidate: Sendable, Equatable {
        public var peer: PeerAddress
        public var name: String
        public var rssi: Int8?

        public init(peer: PeerAddress, name: String, rssi: Int8?) {
            self.peer = peer
            self.name = name
            self.rssi = rssi
        }

        /// `ADDRESS 'NAME' -57 dBm`.
        public var line: String {
            "\(peer.address) '\(name)' " + (rssi.map { "\($0) dBm" } ?? "? dBm")
        }
    }

    /// How long the scan goes on after the first match to hear the others (advertising intervals are up to about
    /// a second on the devices bledfu updates; two seconds hear each at least once).
    public static let settle: Duration = .seconds(2)

    /// Devices that match `filter`, strongest first: a scan until the first match (or `timeout`), then one of
    /// ``settle`` that hears the others.
    public static func candidates(
        adapter: any BLEAdapter, filter: ScanFilter, timeout: Duration
    ) async throws(DeviceSelectionError) -> [Candidate] {
        var seen: [BluetoothAddress: Candidate] = [:]
        func heard(_ advertisement: Advertisement) {
            let candidate = Candidate(peer: advertisement.peer, name: advertisement.parsed.name ?? "", rssi: advertisement.rssi)
            if let known = seen[advertisement.peer.address], (known.rssi ?? -128) >= (candidate.rssi ?? -128) { return }
            seen[advertisement.peer.address] = candidate
        }
        do {
            for try await advertisement in adapter.scan(filter: filter, duration: timeout) {
                heard(advertisement)
                break
            }
            if !seen.isEmpty {
                for try await advertisement in adapter.scan(filter: filter, duration: settle) { heard(advertisement) }
            }
        } catch let error as AdapterError {
            throw DeviceSelectionError(.scan, error.reason, cause: error)
        } catch {
            throw DeviceSelectionError(.scan, "scan failed: \(error)", cause: error)
        }
        return seen.values.sorted { ($0.rssi ?? -128, $1.peer.address.description) > ($1.rssi ?? -128, $0.peer.address.description) }
    }

    /// The one device meant: none is ``DeviceSelectionError/Code/notFound``, several are
    /// ``DeviceSelectionError/Code/ambiguous`` unless `strongest`. `wanted` names the device in the message
    /// (`--name 'Bracelet'`).
    public static func choose(
        _ candidates: [Candidate], wanted: String, minimumRSSI: Int?, strongest: Bool
    ) throws(DeviceSelectionError) -> Candidate {
        guard let first = candidates.first else {
            let floor = minimumRSSI.map { " at \($0) dBm or stronger" } ?? ""
            throw DeviceSelectionError(.notFound, "no device \(wanted) was heard\(floor)")
        }
        guard candidates.count == 1 || strongest else {
            throw DeviceSelectionError(
                .ambiguous,
                "\(wanted) matches \(candidates.count) devices: " + candidates.map(\.line).joined(separator: ", ")
                    + "; give --device ADDRESS, or --strongest to take the strongest")
        }
        return first
    }
}
