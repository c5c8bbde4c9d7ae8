import Foundation

/// `bledfu batch report`: the device records as CSV (RFC 4180), JSON or JUnit XML.
public enum BatchExport {
    public enum Format: String, Sendable, CaseIterable {
        case csv, json, junit
    }

    /// The CSV columns, in order.
    public static let columns = [
        "batch", "address", "name", "class", "adapter", "package_sha256", "target_version", "version_before",
        "version_after", "status", "error", "exit_code", "attempts", "duration_s", "bytes", "resends", "updated_at",
        "station",
    ]

    public static func render(_ records: [DeviceRecord], attempts: [AttemptRecord], as format: Format) -> String {
        switch format {
        case .csv: csv(records)
        case .json: json(records, attempts: attempts)
        case .junit: junit(records)
        }
    }

    // MARK: CSV

    public static func csv(_ records: [DeviceRecord]) -> String {
        var lines = [columns.joined(separator: ",")]
        for r in records {
            let fields: [String?] = [
                r.batch, r.address, r.name, r.className, r.adapter, r.packageSHA256, r.targetVersion.map(String.init),
                r.versionBefore.map(String.init), r.versionAfter.map(String.init), r.status.rawValue, r.error,
                r.exitCode.map(String.init), String(r.attempts), String(format: "%.3f", r.duration), String(r.bytes),
                String(r.resends), r.updatedAt, r.station,
            ]
            lines.append(fields.map { csvField($0 ?? "") }.joined(separator: ","))
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    static func csvField(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    // MARK: JSON

    struct JSONReport: Codable {
        struct Device: Codable {
            var record: DeviceRecord
            var attempts: [AttemptRecord]
        }
        var devices: [Device]
        var totals: [String: Int]
    }

    public static func json(_ records: [DeviceRecord], attempts: [AttemptRecord]) -> String {
        let byDevice = Dictionary(grouping: attempts) { "\($0.batch)\n\($0.address)" }
        var totals: [String: Int] = [:]
        for status in DeviceStatus.allCases { totals[status.rawValue] = records.filter { $0.status == status }.count }
        let report = JSONReport(
            devices: records.map { JSONReport.Device(record: $0, attempts: byDevice["\($0.batch)\n\($0.address)"] ?? []) },
            totals: totals)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(report) else { return "{}\n" }
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    // MARK: JUnit XML

    /// One `<testsuite>` per batch, one `<testcase>` per device (classname = device class, name = address and
    /// advertised name); failed devices carry `<failure>`, skipped ones `<skipped>`, unfinished ones `<error>`.
    public static func junit(_ records: [DeviceRecord]) -> String {
        var xml = #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n"
        let batches = Dictionary(grouping: records, by: \.batch)
        let totalFailures = records.filter { $0.status == .failed }.count
        let totalErrors = records.filter { !$0.status.isFinal }.count
        xml += #"<testsuites name="bledfu batch" tests="\#(records.count)" failures="\#(totalFailures)" errors="\#(totalErrors)">"# + "\n"
        for batch in batches.keys.sorted() {
            let devices = batches[batch] ?? []
            let failures = devices.filter { $0.status == .failed }.count
            let skipped = devices.filter { $0.status == .skipped }.count
            let errors = devices.filter { !$0.status.isFinal }.count
            let time = devices.reduce(0) { $0 + $1.duration }
            xml += "  <testsuite name=\"\(escape(batch))\" tests=\"\(devices.count)\" failures=\"\(failures)\" errors=\"\(errors)\" "
                + "skipped=\"\(skipped)\" time=\"\(String(format: "%.3f", time))\">\n"
            for r in devices {
                let name = r.address + (r.name.map { " \($0)" } ?? "")
                xml += "    <testcase classname=\"\(escape(r.className))\" name=\"\(escape(name))\" time=\"\(String(format: "%.3f", r.duration))\">\n"
                let detail = "sha256=\(r.packageSHA256) before=\(r.versionBefore.map(String.init) ?? "-") "
                    + "after=\(r.versionAfter.map(String.init) ?? "-") attempts=\(r.attempts) bytes=\(r.bytes) resends=\(r.resends) "
                    + "adapter=\(r.adapter ?? "-") station=\(r.station ?? "-")"
                switch r.status {
                case .failed:
                    xml += "      <failure message=\"\(escape(r.error ?? "failed"))\" type=\"exit \(r.exitCode.map(String.init) ?? "-")\">\(escape(detail))</failure>\n"
                case .skipped:
                    xml += "      <skipped message=\"\(escape(r.error ?? "already at the target version"))\"/>\n"
                case .pending, .running:
                    xml += "      <error message=\"not finished (\(r.status.rawValue))\" type=\"unfinished\">\(escape(detail))</error>\n"
                case .done:
                    break
                }
                xml += "      <system-out>\(escape(detail))</system-out>\n"
                xml += "    </testcase>\n"
            }
            xml += "  </testsuite>\n"
        }
        return xml + "</testsuites>\n"
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\t", "\n", "\r": out.unicodeScalars.append(scalar)
            default:
                // XML 1.0 forbids most control characters even as references.
                if scalar.value < 0x20 { out += "?" } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out
    }
}
