import Foundation

/// What a station of a line needs from its host: its name and whether a process of it runs.
public enum LineStation {
    /// The host name (the default station name).
    public static func hostName() -> String {
        let name = ProcessInfo.processInfo.hostName
        return name.isEmpty ? "station" : name
    }

    /// Whether process `pid` of this host runs (a station whose process died is not live, whatever its heartbeat
    /// says). Reads /proc, so no signal is sent.
    public static let isRunning: @Sendable (Int) -> Bool = { pid in
        pid > 0 && FileManager.default.fileExists(atPath: "/proc/\(pid)/stat")
    }
}
