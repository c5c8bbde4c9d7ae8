import Foundation
import ZIPFoundation

/// Writes a zip archive in memory: stored (method 0) entries, as nrfutil writes them, with a fixed timestamp
/// (1980-01-01 00:00, the DOS epoch) and mode 0644 so that the output is reproducible.
enum ArchiveWriter {
    static func archive(_ files: [(name: String, bytes: [UInt8])]) throws(PackageError) -> [UInt8] {
        do {
            let archive = try Archive(data: Data(), accessMode: .create)
            var components = DateComponents()
            components.year = 1980
            components.month = 1
            components.day = 1
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone.current
            let date = calendar.date(from: components) ?? Date(timeIntervalSince1970: 315_532_800)
            for file in files {
                let data = Data(file.bytes)
                try archive.addEntry(
                    with: file.name, type: .file, uncompressedSize: Int64(data.count), modificationDate: date,
                    permissions: 0o644, compressionMethod: .none
                ) { position, size in
                    data.subdata(in: Int(position)..<(Int(position) + size))
                }
            }
            guard let data = archive.data else { throw PackageError(.io, "zip archive could not be produced") }
            return Array(data)
        } catch let error as PackageError {
            throw error
        } catch {
            throw PackageError(.io, "zip archive could not be written (\(error))")
        }
    }
}
