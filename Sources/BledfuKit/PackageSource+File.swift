import Crypto
import DFUCore
import DFUPackage
import Foundation

extension PackageSource {
    /// Reads a package (or image) file and computes its SHA-256 (the journal's key).
    public init(contentsOf url: URL) throws(DFUError) {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            // A file that cannot be read is an I/O failure (exit 39), not a package that fails to parse (30).
            let message = FileProblem.describe("read", url.path, error)
            throw DFUError(.invalidPackage, message, cause: PackageError(.io, message))
        }
        let bytes = [UInt8](data)
        self.init(fileName: url.lastPathComponent, bytes: bytes, sha256: Self.sha256(bytes))
    }

    /// Secure DFU files that come without a zip (`flash --image APP.bin --init APP.dat`, as the Android library
    /// takes them): the package is built in memory (DFUPackage's `FirmwarePackage.archive(image:initPacket:)`), named
    /// after the image. The same two files give the same bytes, so the same SHA-256 and the same journal.
    public init(imageAt image: URL, initPacketAt initPacket: URL) throws(DFUError) {
        let imageBytes = try Self.read(image, what: "the image")
        let initBytes = try Self.read(initPacket, what: "the init packet")
        let zip: [UInt8]
        do {
            zip = try FirmwarePackage.archive(image: imageBytes, initPacket: initBytes)
        } catch {
            throw DFUError(.invalidPackage, error.message, cause: error)
        }
        self.init(fileName: image.lastPathComponent, bytes: zip, sha256: Self.sha256(zip))
    }

    private static func read(_ url: URL, what: String) throws(DFUError) -> [UInt8] {
        do {
            return [UInt8](try Data(contentsOf: url))
        } catch {
            let message = "cannot read \(what) \(url.path): \(FileProblem.reason(error))"
            throw DFUError(.invalidPackage, message, cause: PackageError(.io, message))
        }
    }

    /// Lowercase hex SHA-256.
    public static func sha256(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { byte in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }.joined()
    }
}

extension UpdateRequest {
    /// A request for the package file at `url`.
    public init(packageAt url: URL, target: UpdateTarget, family: DFUFamilyID? = nil, options: UpdateOptions = UpdateOptions())
        throws(DFUError)
    {
        self.init(package: try PackageSource(contentsOf: url), target: target, family: family, options: options)
    }
}
