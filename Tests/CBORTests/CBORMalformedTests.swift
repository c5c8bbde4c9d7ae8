import BLECore
import CBOR
import Testing

/// Not well-formed input (RFC 8949 Appendix F): each is refused as malformed, never as truncated, and never crashes.
let malformedVectors: [(hex: String, why: String)] = [
    ("1c", "reserved additional information 28"),
    ("3d", "reserved additional information 29 on a negative integer"),
    ("5e", "reserved additional information 30 on a byte string"),
    ("1f", "indefinite length on an unsigned integer"),
    ("3f", "indefinite length on a negative integer"),
    ("df00", "indefinite length on a tag"),
    ("ff", "break outside an indefinite item"),
    ("f818", "two-byte simple value below 32"),
    ("5f6161ff", "text chunk inside an indefinite byte string"),
    ("5f5f4100ffff", "indefinite chunk inside an indefinite byte string"),
    ("7f4100ff", "byte chunk inside an indefinite text string"),
    ("bf00ff", "break after a map key"),
    ("62c328", "invalid UTF-8 in a text string"),
    ("7f61c3ff", "invalid UTF-8 across an indefinite text string"),
    ("8100ff", "break after a complete definite array"),
]

@Suite(.timeLimit(.minutes(2))) struct CBORMalformedTests {
    @Test func malformedInputIsRefusedAsMalformed() {
        for vector in malformedVectors {
            let bytes = CBORVector.parse(vector.hex)
            do {
                let item = try CBOR(decoding: bytes)
                Issue.record("\(vector.why): decoded as \(item)")
            } catch {
                // "8100ff" is a complete array followed by a byte: trailing bytes, not a malformed item.
                let expected: CBORError.Code = vector.hex == "8100ff" ? .trailingBytes : .malformed
                #expect(error.code == expected, "\(vector.hex): \(vector.why): \(error)")
            }
        }
    }

    @Test func nestingBeyondTheLimitIsRefused() {
        let deep = [UInt8](repeating: 0x81, count: 40) + [0x00]
        #expect(throws: CBORError(.tooDeep, "", offset: 0)) { _ = try CBOR(decoding: deep) }
        let tags = [UInt8](repeating: 0xC6, count: 40) + [0x00]
        #expect(throws: CBORError(.tooDeep, "", offset: 0)) { _ = try CBOR(decoding: tags) }
        let shallow = [UInt8](repeating: 0x81, count: 10) + [0x00]
        #expect((try? CBOR(decoding: shallow)) != nil)
    }

    @Test func hugeDeclaredLengthsAreTruncatedWithoutAllocating() {
        // A byte string, an array and a map announcing 2^64-1 elements with nothing behind them.
        for hex in ["5bffffffffffffffff", "9bffffffffffffffff", "bbffffffffffffffff", "7b7fffffffffffffff"] {
            #expect(throws: CBORError(.truncated, "", offset: 0), "\(hex)") {
                _ = try CBOR(decoding: CBORVector.parse(hex))
            }
        }
    }

    @Test func unknownKeysAreKept() throws {
        // {"off": 4096, "rc": 0, "x-vendor": h'01'}: a host reads "off" and keeps the rest.
        let item = CBOR.textMap(["off": .unsigned(4096), "rc": .unsigned(0), "x-vendor": .bytes([1])])
        let decoded = try CBOR(decoding: item.encoded())
        #expect(decoded["off"]?.intValue == 4096)
        #expect(decoded["x-vendor"]?.bytesValue == [1])
        #expect(decoded.mapPairs?.count == 3)
    }

    @Test func seededRandomItemsRoundTrip() throws {
        var generator = SplitMix64(seed: 0x5EED)
        for _ in 0..<500 {
            let item = randomItem(&generator, depth: 0)
            for indefinite in [false, true] {
                let bytes = item.encoded(indefiniteContainers: indefinite)
                let decoded = try CBOR(decoding: bytes)
                // Compare through the encoding: NaN payloads are equal bit for bit, not by ==.
                #expect(decoded.encoded(indefiniteContainers: indefinite) == bytes)
                for length in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 16)) {
                    #expect(throws: CBORError(.truncated, "", offset: 0)) { _ = try CBOR(decoding: Array(bytes.prefix(length))) }
                }
            }
        }
    }

    @Test func randomBytesNeverCrash() {
        var generator = SplitMix64(seed: 7)
        for _ in 0..<5000 {
            let count = Int(generator.next() % 24)
            let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            if let item = try? CBOR(decoding: bytes) {
                // Whatever decodes re-encodes to something that decodes to the same bytes again.
                #expect((try? CBOR(decoding: item.encoded()))?.encoded() == item.encoded())
            }
        }
    }
}

func randomItem(_ g: inout SplitMix64, depth: Int) -> CBOR {
    let kind = g.next() % (depth > 3 ? 9 : 12)
    switch kind {
    case 0: return .unsigned(g.next() >> (g.next() % 64))
    case 1: return .negative(g.next() >> (g.next() % 64))
    case 2: return .bytes((0..<Int(g.next() % 40)).map { _ in UInt8(truncatingIfNeeded: g.next()) })
    case 3: return .text(String((0..<Int(g.next() % 12)).map { _ in Character(Unicode.Scalar(UInt8(97 + g.next() % 26))) }) + (g.next() % 3 == 0 ? "é✓" : ""))
    case 4: return .bool(g.next() % 2 == 0)
    case 5: return [CBOR.null, .undefined, .simple(UInt8(g.next() % 20)), .simple(UInt8(32 + g.next() % 200))][Int(g.next() % 4)]
    case 6: return .half(UInt16(truncatingIfNeeded: g.next()))
    case 7: return .float(Float(bitPattern: UInt32(truncatingIfNeeded: g.next())))
    case 8: return .double(Double(bitPattern: g.next()))
    case 9: return .array((0..<Int(g.next() % 5)).map { _ in randomItem(&g, depth: depth + 1) })
    case 10: return .map((0..<Int(g.next() % 4)).map { _ in CBOR.Pair(randomItem(&g, depth: depth + 1), randomItem(&g, depth: depth + 1)) })
    default: return .tagged(g.next() % 300, randomItem(&g, depth: depth + 1))
    }
}
