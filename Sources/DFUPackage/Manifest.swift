import Foundation

/// A manifest image key. `CaseIterable` order is the send order (pc-nrfutil `dfu.py`): SoftDevice+bootloader,
/// SoftDevice, bootloader, then the application.
public enum PartKind: String, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    case softdeviceBootloader = "softdevice_bootloader"
    case softdevice
    case bootloader
    case application

    public var description: String { rawValue }

    /// The init-command type nrfutil writes for this key (`application` may also carry EXTERNAL_APPLICATION).
    public var firmwareType: FirmwareType {
        switch self {
        case .softdeviceBootloader: .softdeviceBootloader
        case .softdevice: .softdevice
        case .bootloader: .bootloader
        case .application: .application
        }
    }
}

/// `manifest.json` of a DFU package.
///
/// ```json
/// {"manifest": {"application": {"bin_file": "app.bin", "dat_file": "app.dat"},
///               "softdevice_bootloader": {"bin_file": "sd_bl.bin", "dat_file": "sd_bl.dat",
///                                         "info_read_only_metadata": {"bl_size": 23512, "sd_size": 147792}},
///               "dfu_version": 0.5}}
/// ```
/// SD+BL sizes may also sit directly in the part object (Legacy, SDK-12-alpha). Legacy parts carry
/// `init_packet_data` (informational: the `.dat` is what is sent). Unknown keys are ignored with a warning.
public struct Manifest: Hashable, Sendable {
    public struct Part: Hashable, Sendable {
        public var kind: PartKind
        public var binFile: String
        public var datFile: String
        /// From `info_read_only_metadata` or directly from the object.
        public var sdSize: UInt32?
        public var blSize: UInt32?
        /// Legacy `init_packet_data`, as found (informational).
        public var initPacketData: JSONValue?

        public init(kind: PartKind, binFile: String, datFile: String, sdSize: UInt32? = nil, blSize: UInt32? = nil) {
            self.kind = kind
            self.binFile = binFile
            self.datFile = datFile
            self.sdSize = sdSize
            self.blSize = blSize
        }
    }

    /// Parts in send order.
    public var parts: [Part]
    /// Legacy `dfu_version` (0.5 … 0.8) when present.
    public var dfuVersion: Double?
    /// Unknown keys and other oddities (not fatal).
    public var warnings: [String] = []

    public init(parts: [Part], dfuVersion: Double? = nil) {
        self.parts = parts.sorted { Self.order($0.kind) < Self.order($1.kind) }
        self.dfuVersion = dfuVersion
    }

    static func order(_ kind: PartKind) -> Int { PartKind.allCases.firstIndex(of: kind) ?? 0 }

    /// Parses manifest.json (UTF-8, LF or CRLF).
    public init(json bytes: [UInt8]) throws(PackageError) {
        let value: JSONValue
        do {
            value = try JSONDecoder().decode(JSONValue.self, from: Data(bytes))
        } catch {
            throw PackageError(.invalidManifest, "manifest.json is not valid JSON")
        }
        guard let top = value.object else { throw PackageError(.invalidManifest, "manifest.json is not a JSON object") }
        guard let body = top["manifest"]?.object else {
            throw PackageError(.invalidManifest, "manifest.json has no \"manifest\" object")
        }
        var warnings = top.keys.filter { $0 != "manifest" }.sorted().map { "manifest.json: unknown key '\($0)' ignored" }
        var parts: [Part] = []
        var dfuVersion: Double?
        for key in body.keys.sorted() {
            guard let member = body[key] else { continue }
            if key == "dfu_version" {
                guard let version = member.number else {
                    throw PackageError(.invalidManifest, "manifest.json: dfu_version is not a number")
                }
                dfuVersion = version
                continue
            }
            guard let kind = PartKind(rawValue: key) else {
                warnings.append("manifest.json: unknown key 'manifest.\(key)' ignored")
                continue
            }
            parts.append(try Self.parsePart(kind, member, warnings: &warnings))
        }
        guard !parts.isEmpty else { throw PackageError(.invalidManifest, "manifest.json names no image") }
        self.init(parts: parts, dfuVersion: dfuVersion)
        self.warnings = warnings
    }

    private static let knownPartKeys: Set<String> = [
        "bin_file", "dat_file", "info_read_only_metadata", "sd_size", "bl_size", "init_packet_data",
    ]

    private static func parsePart(_ kind: PartKind, _ value: JSONValue, warnings: inout [String]) throws(PackageError) -> Part {
        guard let object = value.object else { throw PackageError(.invalidManifest, "manifest.json: \(kind) is not an object") }
        guard let bin = object["bin_file"]?.string, !bin.isEmpty else {
            throw PackageError(.invalidManifest, "manifest.json: \(kind) has no bin_file")
        }
        guard let dat = object["dat_file"]?.string, !dat.isEmpty else {
            throw PackageError(.invalidManifest, "manifest.json: \(kind) has no dat_file")
        }
        var part = Part(kind: kind, binFile: bin, datFile: dat)
        let meta = object["info_read_only_metadata"]?.object ?? [:]
        let slots: [(String, WritableKeyPath<Part, UInt32?>)] = [("sd_size", \.sdSize), ("bl_size", \.blSize)]
        for (name, slot) in slots {
            guard let raw = meta[name] ?? object[name] else { continue }
            guard let size = raw.uint32 else {
                throw PackageError(.invalidManifest, "manifest.json: \(kind).\(name) is not a 32-bit unsigned integer")
            }
            part[keyPath: slot] = size
        }
        part.initPacketData = object["init_packet_data"]
        for key in object.keys.sorted() where !knownPartKeys.contains(key) {
            warnings.append("manifest.json: unknown key '\(kind).\(key)' ignored")
        }
        return part
    }

    /// nrfutil's manifest.json text: sorted keys, 4-space indent, no trailing newline. Secure: SD+BL sizes in
    /// `info_read_only_metadata`. Legacy (``dfuVersion`` set, nrfutil 0.5): `dfu_version`, SD+BL sizes directly in the
    /// part, and each part's `init_packet_data`.
    public func encoded() -> [UInt8] {
        var body: [String: JSONValue] = [:]
        for part in parts {
            var object: [String: JSONValue] = ["bin_file": .string(part.binFile), "dat_file": .string(part.datFile)]
            if let sd = part.sdSize, let bl = part.blSize {
                if dfuVersion == nil {
                    object["info_read_only_metadata"] = .object(["bl_size": .number(Double(bl)), "sd_size": .number(Double(sd))])
                } else {
                    object["bl_size"] = .number(Double(bl))
                    object["sd_size"] = .number(Double(sd))
                }
            }
            if let data = part.initPacketData { object["init_packet_data"] = data }
            body[part.kind.rawValue] = .object(object)
        }
        if let dfuVersion { body["dfu_version"] = .number(dfuVersion) }
        return Array(JSONValue.object(["manifest": .object(body)]).pythonStyle().utf8)
    }
}
