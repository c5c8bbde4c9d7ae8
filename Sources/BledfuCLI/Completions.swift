import ArgumentParser
import BledfuKit
import Foundation

/// What the shells complete (`bledfu --generate-completion-script bash|zsh|fish`; tools/package installs the scripts):
/// files by kind, and the values of `--mode`, `--family` and `--adapter`.
enum Completions {
    /// A package: a DFU zip, an MCUboot image or an NCS zip.
    static let package = CompletionKind.file(extensions: ["zip", "bin", "hex"])
    /// A PEM key.
    static let key = CompletionKind.file(extensions: ["pem"])
    /// A firmware image for `package create` or `flash --image`.
    static let firmware = CompletionKind.file(extensions: ["hex", "bin"])
    /// An init packet for `flash --init`.
    static let initPacket = CompletionKind.file(extensions: ["dat"])
    /// A batch plan.
    static let plan = CompletionKind.file(extensions: ["yaml", "yml"])
    static let directory = CompletionKind.directory
    /// The families `--family` takes.
    static let family = CompletionKind.list(DefaultFamilies.all.map(\.id.rawValue) + ["auto"])
    /// The pacing modes of every family (`prn:` and the like take a number after the colon).
    static let mode = CompletionKind.list([
        "adaptive", "object", "ios", "android", "nrfutil", "seed-pacing", "with-response", "stream", "nordic", "one-at-a-time",
        "mcumgr-cli", "prn:", "checksum:", "burst:", "window:",
    ])
    /// The kernel's adapters, `any` and `virtual:`.
    static let adapter = CompletionKind.custom { _, _, _ in AdapterCompletion.candidates() }
}

/// The values a shell completes for `--adapter`: the kernel's adapters (`/sys/class/bluetooth/hciN`), `any` and
/// `virtual:` (a virtual radio's directory follows).
enum AdapterCompletion {
    static func candidates(sysfs: String = "/sys/class/bluetooth") -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: sysfs)) ?? []
        // hci0:64 and the like are links (connections), not adapters.
        let adapters = entries.filter { $0.hasPrefix("hci") && !$0.contains(":") }.sorted()
        return adapters + ["any", "virtual:"]
    }
}
