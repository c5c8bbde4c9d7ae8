import Foundation

/// The files of a zip archive, read with the same bounds and checks as packages (for other package formats, such
/// as the nRF Connect SDK's `dfu_application.zip`).
public enum ZipFiles {
    public static func read(_ bytes: [UInt8], limits: ArchiveLimits = ArchiveLimits()) throws(PackageError) -> [String: [UInt8]] {
        try ArchiveReader.read(Data(bytes), limits: limits).files
    }
}
