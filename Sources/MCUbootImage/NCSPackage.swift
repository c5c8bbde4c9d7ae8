import DFUPackage
import Foundation

/// The nRF Connect SDK's `dfu_application.zip` (sdk-nrf `generate_zip.py`, `zip.cmake`; smp-mcuboot.md §8):
/// `manifest.json` and one signed MCUboot image per updatable image, named by `image_index` (0 the application,
/// 1 the nRF5340 network core). Values are strings unless they started with `0x` (then integers).
public struct NCSPackage: Sendable {
    public struct Part: Sendable {
        public var imageIndex: Int
        public var file: String
        public var image: MCUbootImage
        /// The manifest's fields for this file (type, board, soc, version_MCUBOOT, slot indices...).
        public var fields: [String: JSONValue]

        public var type: String? { fields["type"]?.string }
        public var board: String? { fields["board"]?.string }
        public var soc: String? { fields["soc"]?.string }
    }

    public var formatVersion: Int
    public var name: String?
    public var parts: [Part]

    public init(bytes: [UInt8]) throws(PackageError) {
        let files = try ZipFiles.read(bytes)
        guard let manifestBytes = files["manifest.json"] else {
            throw PackageError(.missingFile, "dfu_application.zip without manifest.json")
        }
        let root: JSONValue
        do {
            root = try JSONDecoder().decode(JSONValue.self, from: Data(manifestBytes))
        } catch {
            throw PackageError(.invalidManifest, "manifest.json is not JSON: \(error)")
        }
        guard let manifest = root.object, case .array(let entries)? = manifest["files"], !entries.isEmpty else {
            throw PackageError(.invalidManifest, "manifest.json has no files array")
        }
        formatVersion = manifest["format-version"]?.number.map { Int($0) } ?? 0
        name = manifest["name"]?.string
        var parts: [Part] = []
        for entry in entries {
            guard let fields = entry.object, let file = fields["file"]?.string else {
                throw PackageError(.invalidManifest, "manifest.json file entry without a file name")
            }
            guard let content = files[file] else {
                throw PackageError(.missingFile, "manifest.json names \(file), which is not in the archive")
            }
            let index = Self.integer(fields["image_index"]) ?? 0
            if parts.contains(where: { $0.imageIndex == index }) {
                throw PackageError(.invalidManifest, "manifest.json has two files for image \(index)")
            }
            let image: MCUbootImage
            do {
                image = try MCUbootImage(bytes: content)
            } catch {
                throw PackageError(error.code, "\(file): \(error.message)")
            }
            parts.append(Part(imageIndex: index, file: file, image: image, fields: fields))
        }
        self.parts = parts.sorted { $0.imageIndex < $1.imageIndex }
    }

    /// "0" or 0 (generate_zip.py keeps strings unless they start with 0x).
    static func integer(_ value: JSONValue?) -> Int? {
        switch value {
        case .number(let n)?: return n >= 0 && n < 1e9 && n.rounded() == n ? Int(n) : nil
        case .string(let s)?: return s.hasPrefix("0x") ? Int(s.dropFirst(2), radix: 16) : Int(s)
        default: return nil
        }
    }
}

/// An SMP update's firmware, whatever file it came in: one MCUboot image (`.bin`, `.hex`) or an NCS zip.
public struct MCUbootPackage: Sendable {
    public struct Part: Sendable {
        public var imageIndex: Int
        public var name: String
        public var image: MCUbootImage
    }

    public var parts: [Part]
    /// "MCUboot image" or "nRF Connect SDK dfu_application.zip".
    public var kind: String

    /// Reads `bytes` by content: a zip (PK), Intel HEX text (':'), or a binary MCUboot image.
    public init(bytes: [UInt8], name: String) throws(PackageError) {
        if bytes.starts(with: [0x50, 0x4B]) {
            let package = try NCSPackage(bytes: bytes)
            parts = package.parts.map { Part(imageIndex: $0.imageIndex, name: $0.file, image: $0.image) }
            kind = "nRF Connect SDK dfu_application.zip"
        } else if bytes.first == UInt8(ascii: ":") {
            let (_, data) = try MCUbootHex.read(String(decoding: bytes, as: UTF8.self))
            parts = [Part(imageIndex: 0, name: name, image: try MCUbootImage(bytes: data))]
            kind = "MCUboot image (Intel HEX)"
        } else {
            parts = [Part(imageIndex: 0, name: name, image: try MCUbootImage(bytes: bytes))]
            kind = "MCUboot image"
        }
    }

    /// True when `bytes` look like an SMP firmware file rather than a Nordic DFU package: an MCUboot header, hex
    /// text whose data starts with one, or a zip whose manifest has `format-version` and no `manifest` object.
    public static func looksLikeMCUboot(_ bytes: [UInt8]) -> Bool {
        if bytes.starts(with: [0x3D, 0xB8, 0xF3, 0x96]) { return true }
        if bytes.first == UInt8(ascii: ":") {
            if let (_, data) = try? MCUbootHex.read(String(decoding: bytes, as: UTF8.self)) {
                return data.starts(with: [0x3D, 0xB8, 0xF3, 0x96])
            }
            return false
        }
        if bytes.starts(with: [0x50, 0x4B]), let files = try? ZipFiles.read(bytes), let manifest = files["manifest.json"],
            let root = try? JSONDecoder().decode(JSONValue.self, from: Data(manifest)), let object = root.object
        {
            return object["format-version"] != nil && object["manifest"] == nil
        }
        return false
    }
}
