import BLECore

/// Turns raw advertising reports into the `Advertisement`s a scan yields: the scan response of a device is
/// merged after its advertising data, duplicates are folded (a device is reported again only when its merged data
/// or its RSSI bucket changes), and the `ScanFilter` is applied to the merged advertisement.
///
/// A value type with no I/O: the scanner feeds it reports and yields what it returns.
public struct AdvertisementFolder: Sendable {
    public var filter: ScanFilter
    /// Width of an RSSI bucket in dB: a change inside one bucket is a duplicate.
    public var rssiBucketWidth: Int

    private struct Device {
        var advertisingData: [UInt8] = []
        var scanResponse: [UInt8] = []
        var connectable = false
        var rssi: Int8?
        var lastReported: Advertisement?
    }

    private var devices: [PeerAddress: Device] = [:]

    public init(filter: ScanFilter = ScanFilter(), rssiBucketWidth: Int = 10) {
        self.filter = filter
        self.rssiBucketWidth = max(1, rssiBucketWidth)
    }

    /// Folds one report in; returns the advertisement to report, or nil for a duplicate, an anonymous
    /// advertiser or a device the filter rejects.
    public mutating func fold(_ report: HCIAdvertisingReport) -> Advertisement? {
        guard let peer = report.peer else { return nil }
        var device = devices[peer] ?? Device()
        if report.isScanResponse {
            device.scanResponse = report.data
        } else {
            device.advertisingData = report.data
            device.connectable = report.connectable
        }
        if let rssi = report.rssi { device.rssi = rssi }
        let merged = Advertisement(
            peer: peer, rssi: device.rssi, data: device.advertisingData + device.scanResponse,
            connectable: device.connectable)
        defer { devices[peer] = device }
        guard filter.matches(merged) else { return nil }
        if let last = device.lastReported, last.data == merged.data, last.connectable == merged.connectable,
            bucket(last.rssi) == bucket(merged.rssi)
        {
            return nil
        }
        device.lastReported = merged
        return merged
    }

    private func bucket(_ rssi: Int8?) -> Int? {
        guard let rssi else { return nil }
        // Floor division so that -1 and 1 fall in different buckets around zero.
        let value = Int(rssi)
        return value >= 0 ? value / rssiBucketWidth : -((-value + rssiBucketWidth - 1) / rssiBucketWidth)
    }
}
