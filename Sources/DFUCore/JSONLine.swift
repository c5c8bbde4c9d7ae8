import Foundation

/// One value as one line of NDJSON: keys sorted, slashes unescaped, a newline at the end. `bledfu flash --json`'s
/// event records (which `bledfu batch` reads back) and the CLI's other NDJSON lines (`Console.jsonLine`).
public enum JSONLine {
    /// The line with its newline; nil when the value does not encode.
    public static func text(_ value: some Encodable) -> String? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(value) else { return nil }
        return String(decoding: data, as: UTF8.self) + "\n"
    }
}
