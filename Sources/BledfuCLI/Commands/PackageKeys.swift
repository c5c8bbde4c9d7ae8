import ArgumentParser
import Batch
import BLECore
import Crypto
import DFUPackage
import Foundation

/// `bledfu package keys`: ECDSA P-256 signing keys, as `nrfutil keys`.
struct PackageKeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Generate and display ECDSA P-256 signing keys (as `nrfutil keys`).",
        subcommands: [Generate.self, Display.self]
    )

    /// `bledfu package keys generate FILE [--public FILE]`.
    struct Generate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "generate", abstract: "Write a new private key (PEM, BEGIN EC PRIVATE KEY) and optionally its public key.")

        @Argument(help: "The private key file to create (refuses to overwrite).", completion: Completions.key) var file: String
        @Option(name: .long, help: "Also write the public key (PEM) to this file.") var `public`: String?

        func run() async throws {
            guard !FileManager.default.fileExists(atPath: file) else {
                throw CLIError("\(file) exists; refusing to overwrite a key", exitCode: ExitCodeRegistry.code(for: PackageError(.io, "")))
            }
            let pem = PackageKeys.generatePrivateKeyPEM()
            try PackageCLI.write(Array(pem.utf8), to: file)
            if let `public` {
                let key: P256.Signing.PrivateKey
                do { key = try PackageKeys.privateKey(pem: pem) } catch { throw PackageCLI.cliError(error) }
                try PackageCLI.write(Array((key.publicKey.pemRepresentation + "\n").utf8), to: `public`)
            }
            print("wrote \(file)" + (`public`.map { " and \($0)" } ?? ""))
        }
    }

    /// `bledfu package keys display FILE --key pk|sk --format pem|hex`.
    struct Display: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "display",
            abstract: "Print the public (pk) or private (sk) key as PEM or as nrfutil's hex (x, y each byte-reversed).")

        @Argument(help: "The private key file (PEM).", completion: Completions.key) var file: String
        @Option(name: .long, help: "pk (public key) or sk (private key).") var key: String = "pk"
        @Option(name: .long, help: "pem or hex.") var format: String = "pem"

        func validate() throws {
            guard ["pk", "sk"].contains(key) else { throw ValidationError("--key must be pk or sk") }
            guard ["pem", "hex"].contains(format) else { throw ValidationError("--format must be pem or hex") }
        }

        func run() async throws {
            let privateKey: P256.Signing.PrivateKey
            do {
                privateKey = try PackageKeys.privateKey(pem: try PackageKeys.readPEM(URL(fileURLWithPath: file)), name: file)
            } catch {
                throw PackageCLI.cliError(error)
            }
            switch (key, format) {
            case ("pk", "pem"): print(privateKey.publicKey.pemRepresentation)
            case ("pk", _): print(PackageKeys.nrfutilHex(privateKey.publicKey))
            case (_, "pem"): print(PackageKeys.sec1PEM(privateKey), terminator: "")
            default: print(Array(privateKey.rawRepresentation).reversed().hexString)
            }
        }
    }
}
