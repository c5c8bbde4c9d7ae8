import CBOR
import Testing

/// A byte vector with its decoded item (RFC 8949 Appendix A, and the SMP bodies that matter here).
struct CBORVector: Sendable, CustomStringConvertible {
    var hex: String
    var item: CBOR
    var description: String { hex }
    var bytes: [UInt8] { Self.parse(hex) }

    static func parse(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var chars = Array(hex.filter { !$0.isWhitespace })
        while chars.count >= 2 {
            out.append(UInt8(String(chars[0...1]), radix: 16) ?? 0)
            chars.removeFirst(2)
        }
        return out
    }
}

/// Preferred serialization (shortest arguments, definite lengths): encode and decode agree both ways.
let canonicalVectors: [CBORVector] = [
    CBORVector(hex: "00", item: .unsigned(0)),  // 0
    CBORVector(hex: "17", item: .unsigned(23)),  // 23: last immediate
    CBORVector(hex: "1818", item: .unsigned(24)),  // 24: one-byte argument
    CBORVector(hex: "1903e8", item: .unsigned(1000)),  // 1000
    CBORVector(hex: "1a000f4240", item: .unsigned(1_000_000)),  // 1000000
    CBORVector(hex: "1b000000e8d4a51000", item: .unsigned(1_000_000_000_000)),  // 10^12
    CBORVector(hex: "1bffffffffffffffff", item: .unsigned(UInt64.max)),  // 18446744073709551615
    CBORVector(hex: "20", item: .negative(0)),  // -1
    CBORVector(hex: "3863", item: .negative(99)),  // -100
    CBORVector(hex: "3903e7", item: .negative(999)),  // -1000
    CBORVector(hex: "3bffffffffffffffff", item: .negative(UInt64.max)),  // -18446744073709551616
    CBORVector(hex: "f90000", item: .half(0x0000)),  // 0.0 as binary16
    CBORVector(hex: "f93c00", item: .half(0x3C00)),  // 1.0 as binary16
    CBORVector(hex: "fa47c35000", item: .float(100000.0)),  // 100000.0 binary32
    CBORVector(hex: "fb3ff199999999999a", item: .double(1.1)),  // 1.1 binary64
    CBORVector(hex: "f4", item: .bool(false)),
    CBORVector(hex: "f5", item: .bool(true)),
    CBORVector(hex: "f6", item: .null),
    CBORVector(hex: "f7", item: .undefined),
    CBORVector(hex: "f0", item: .simple(16)),  // simple(16)
    CBORVector(hex: "f8ff", item: .simple(255)),  // simple(255)
    CBORVector(hex: "c074323031332d30332d32315432303a30343a30305a", item: .tagged(0, .text("2013-03-21T20:04:00Z"))),
    CBORVector(hex: "40", item: .bytes([])),  // h''
    CBORVector(hex: "4401020304", item: .bytes([1, 2, 3, 4])),  // h'01020304'
    CBORVector(hex: "60", item: .text("")),  // ""
    CBORVector(hex: "6161", item: .text("a")),  // "a"
    CBORVector(hex: "6449455446", item: .text("IETF")),  // "IETF"
    CBORVector(hex: "62c3bc", item: .text("\u{00fc}")),  // "ü"
    CBORVector(hex: "64f0908591", item: .text("\u{10151}")),  // U+10151
    CBORVector(hex: "80", item: .array([])),  // []
    CBORVector(hex: "83010203", item: .array([.unsigned(1), .unsigned(2), .unsigned(3)])),  // [1, 2, 3]
    // [1, [2, 3], [4, 5]]
    CBORVector(
        hex: "8301820203820405",
        item: .array([.unsigned(1), .array([.unsigned(2), .unsigned(3)]), .array([.unsigned(4), .unsigned(5)])])),
    CBORVector(hex: "a0", item: .map([])),  // {}
    // {1: 2, 3: 4}
    CBORVector(
        hex: "a201020304",
        item: .map([CBOR.Pair(.unsigned(1), .unsigned(2)), CBOR.Pair(.unsigned(3), .unsigned(4))])),
    // {"a": 1, "b": [2, 3]}
    CBORVector(
        hex: "a26161016162820203",
        item: .textMap(["a": .unsigned(1), "b": .array([.unsigned(2), .unsigned(3)])])),
    // SMP echo request body {"d": "hi"}
    CBORVector(hex: "a1616462 6869", item: .textMap(["d": .text("hi")])),
    // SMP upload response {"off": 512}
    CBORVector(hex: "a1636f6666190200", item: .textMap(["off": .unsigned(512)])),
    // SMP v2 error {"err": {"group": 1, "rc": 27}}
    CBORVector(
        hex: "a163657272a26567726f757001627263181b",
        item: .textMap(["err": .textMap(["group": .unsigned(1), "rc": .unsigned(27)])])),
    // Duplicate keys are kept in order: {"rc": 0, "rc": 1}
    CBORVector(
        hex: "a2627263006272630 1",
        item: .map([CBOR.Pair(.text("rc"), .unsigned(0)), CBOR.Pair(.text("rc"), .unsigned(1))])),
]

/// Well-formed but not in preferred serialization: they decode to the item; re-encoding gives `canonical`.
let nonCanonicalVectors: [(hex: String, item: CBOR, canonical: String)] = [
    ("5f42010243030405ff", .bytes([1, 2, 3, 4, 5]), "450102030405"),  // (_ h'0102', h'030405')
    ("7f657374726561646d696e67ff", .text("streaming"), "6973747265616d696e67"),  // (_ "strea", "ming")
    ("9fff", .array([]), "80"),  // [_ ]
    ("9f018202039f0405ffff", .array([.unsigned(1), .array([.unsigned(2), .unsigned(3)]), .array([.unsigned(4), .unsigned(5)])]), "8301820203820405"),
    ("bf61610161629f0203ffff", .textMap(["a": .unsigned(1), "b": .array([.unsigned(2), .unsigned(3)])]), "a26161016162820203"),
    ("1800", .unsigned(0), "00"),  // 0 with a one-byte argument
    ("190017", .unsigned(23), "17"),
    // Zephyr's zcbor response to an image state read: {_ "images": [_ {_ "slot": 0}]}
    ("bf66696d616765739fbf64736c6f7400ffffff", .textMap(["images": .array([.textMap(["slot": .unsigned(0)])])]), "a166696d6167657381a164736c6f7400"),
]

@Suite(.timeLimit(.minutes(2))) struct CBORVectorTests {
    @Test(arguments: canonicalVectors)
    func decodes(_ vector: CBORVector) throws {
        #expect(try CBOR(decoding: vector.bytes) == vector.item)
    }

    @Test(arguments: canonicalVectors)
    func encodes(_ vector: CBORVector) {
        #expect(vector.item.encoded() == vector.bytes)
    }

    @Test(arguments: canonicalVectors)
    func everyTruncatedPrefixIsRefusedAsTruncated(_ vector: CBORVector) {
        let bytes = vector.bytes
        for length in 0..<bytes.count {
            #expect(throws: CBORError(.truncated, "", offset: 0), "prefix of \(length) bytes") {
                _ = try CBOR(decoding: Array(bytes.prefix(length)))
            }
        }
    }

    @Test(arguments: canonicalVectors)
    func trailingBytesAreRefused(_ vector: CBORVector) throws {
        #expect(throws: CBORError(.trailingBytes, "", offset: 0)) { _ = try CBOR(decoding: vector.bytes + [0x00]) }
        let (item, used) = try CBOR.decodePrefix((vector.bytes + [0x00])[...])
        #expect(item == vector.item)
        #expect(used == vector.bytes.count)
    }

    @Test func nonCanonicalInputDecodesAndReencodesCanonically() throws {
        for vector in nonCanonicalVectors {
            let bytes = CBORVector.parse(vector.hex)
            let item = try CBOR(decoding: bytes)
            #expect(item == vector.item, "\(vector.hex)")
            #expect(item.encoded() == CBORVector.parse(vector.canonical), "\(vector.hex)")
            for length in 0..<bytes.count {
                #expect(throws: CBORError(.truncated, "", offset: 0), "\(vector.hex) prefix \(length)") {
                    _ = try CBOR(decoding: Array(bytes.prefix(length)))
                }
            }
        }
    }

    @Test func indefiniteContainersEncodeAsZephyrDoes() throws {
        let item = CBOR.textMap(["images": .array([.textMap(["slot": .unsigned(0)])])])
        let bytes = item.encoded(indefiniteContainers: true)
        #expect(bytes == CBORVector.parse("bf66696d616765739fbf64736c6f7400ffffff"))
        #expect(try CBOR(decoding: bytes) == item)
    }
}
