import BLECore
import Foundation

/// Intel HEX to a flat `.bin`, as nrfutil's `nRFHex` normalizes firmware for a package.
///
/// Record layout (one per line): `:LL AAAA TT D…D CC` in hex, where LL = data length, AAAA = 16-bit address,
/// TT = type (00 data, 01 end of file, 02 extended segment address ×16, 03 start segment address,
/// 04 extended linear address <<16, 05 start linear address), CC = two's complement of the sum of all bytes.
///
/// Normalization: bytes below 0x1000 (the MBR) and at or above 0x10000000 (UICR) are dropped, gaps between the
/// lowest and highest remaining address are filled with 0xFF, and the result is padded with 0xFF to a multiple of
/// 4 bytes. The load address is not kept (a `.bin` carries none).
public enum IntelHex {
    public static let mbrEnd: UInt32 = 0x1000
    public static let uicrStart: UInt32 = 0x1000_0000
    /// Largest span accepted between the lowest and highest data address (16 MiB).
    public static let maxSpan: UInt32 = 16 << 20

    /// Parses the text into (address, bytes) runs, checking every record's checksum.
    public static func parse(_ text: String) throws(PackageError) -> [(address: UInt32, bytes: [UInt8])] {
        var runs: [(address: UInt32, bytes: [UInt8])] = []
        var base: UInt32 = 0
        var sawEnd = false
        for (index, rawLine) in text.split(whereSeparator: \.isNewline).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty { continue }
            let lineNumber = index + 1
            guard !sawEnd else { break }
            guard line.first == ":", let record = [UInt8](hexString: String(line.dropFirst())), record.count >= 5 else {
                throw PackageError(.invalidInput, "hex line \(lineNumber) is not an Intel HEX record")
            }
            let length = Int(record[0])
            guard record.count == length + 5 else {
                throw PackageError(.invalidInput, "hex line \(lineNumber): length \(length) does not match the record")
            }
            guard record.reduce(UInt8(0), &+) == 0 else {
                throw PackageError(.invalidInput, "hex line \(lineNumber): checksum mismatch")
            }
            let address = UInt32(record[1]) << 8 | UInt32(record[2])
            let data = Array(record[4..<(4 + length)])
            switch record[3] {
            case 0x00:
                let (start, overflow) = base.addingReportingOverflow(address)
                guard !overflow else { throw PackageError(.invalidInput, "hex line \(lineNumber): address overflow") }
                runs.append((start, data))
            case 0x01: sawEnd = true
            case 0x02, 0x04:
                guard data.count == 2 else { throw PackageError(.invalidInput, "hex line \(lineNumber): bad address record") }
                let value = UInt32(data[0]) << 8 | UInt32(data[1])
                base = record[3] == 0x02 ? value << 4 : value << 16
            case 0x03, 0x05: continue
            default: throw PackageError(.invalidInput, "hex line \(lineNumber): unknown record type \(record[3])")
            }
        }
        guard sawEnd else { throw PackageError(.invalidInput, "hex file has no end-of-file record") }
        return runs
    }

    /// The normalized `.bin` image of a hex file (see the type's documentation).
    public static func binary(from text: String) throws(PackageError) -> [UInt8] {
        var kept: [(address: UInt32, bytes: [UInt8])] = []
        for run in try parse(text) {
            let end = run.address + UInt32(run.bytes.count)
            let low = max(run.address, mbrEnd)
            let high = min(end, uicrStart)
            guard low < high else { continue }
            let from = Int(low - run.address)
            kept.append((low, Array(run.bytes[from..<(from + Int(high - low))])))
        }
        guard let start = kept.map(\.address).min(), let end = kept.map({ $0.address + UInt32($0.bytes.count) }).max() else {
            throw PackageError(.invalidInput, "hex file has no data outside the MBR and UICR")
        }
        guard end - start <= maxSpan else {
            throw PackageError(.invalidInput, "hex file spans \(end - start) bytes, more than \(maxSpan)")
        }
        var image = [UInt8](repeating: 0xFF, count: Int(end - start))
        for run in kept {
            let offset = Int(run.address - start)
            image.replaceSubrange(offset..<(offset + run.bytes.count), with: run.bytes)
        }
        return padded(image)
    }

    /// Pads with 0xFF to a multiple of 4 bytes (nrfutil: 102401 → 102404).
    public static func padded(_ image: [UInt8]) -> [UInt8] {
        image + [UInt8](repeating: 0xFF, count: (4 - image.count % 4) % 4)
    }
}
