/// RFC 8949 encoding in preferred serialization (§4.1: the shortest argument), with definite lengths unless
/// `indefiniteContainers` asks for indefinite-length arrays and maps, as Zephyr's zcbor writes them when
/// `CONFIG_ZCBOR_CANONICAL` is off (smp-mcuboot.md §2.1).
extension CBOR {
    /// The item's bytes.
    public func encoded(indefiniteContainers: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        encode(into: &out, indefiniteContainers: indefiniteContainers)
        return out
    }

    /// Appends the item's bytes to `out`.
    public func encode(into out: inout [UInt8], indefiniteContainers: Bool = false) {
        switch self {
        case .unsigned(let n): Self.head(0, n, into: &out)
        case .negative(let n): Self.head(1, n, into: &out)
        case .bytes(let b):
            Self.head(2, UInt64(b.count), into: &out)
            out += b
        case .text(let s):
            let utf8 = Array(s.utf8)
            Self.head(3, UInt64(utf8.count), into: &out)
            out += utf8
        case .array(let items):
            if indefiniteContainers { out.append(0x9F) } else { Self.head(4, UInt64(items.count), into: &out) }
            for item in items { item.encode(into: &out, indefiniteContainers: indefiniteContainers) }
            if indefiniteContainers { out.append(0xFF) }
        case .map(let pairs):
            if indefiniteContainers { out.append(0xBF) } else { Self.head(5, UInt64(pairs.count), into: &out) }
            for pair in pairs {
                pair.key.encode(into: &out, indefiniteContainers: indefiniteContainers)
                pair.value.encode(into: &out, indefiniteContainers: indefiniteContainers)
            }
            if indefiniteContainers { out.append(0xFF) }
        case .tagged(let tag, let item):
            Self.head(6, tag, into: &out)
            item.encode(into: &out, indefiniteContainers: indefiniteContainers)
        case .bool(let b): out.append(b ? 0xF5 : 0xF4)
        case .null: out.append(0xF6)
        case .undefined: out.append(0xF7)
        case .simple(let v):
            if v < 24 { out.append(0xE0 | v) } else { out += [0xF8, v] }
        case .half(let bits): out += [0xF9, UInt8(bits >> 8), UInt8(bits & 0xFF)]
        case .float(let f):
            out.append(0xFA)
            Self.bigEndian(UInt64(f.bitPattern), count: 4, into: &out)
        case .double(let d):
            out.append(0xFB)
            Self.bigEndian(d.bitPattern, count: 8, into: &out)
        }
    }

    /// Initial byte plus the shortest argument (§4.2.1).
    static func head(_ major: UInt8, _ argument: UInt64, into out: inout [UInt8]) {
        let type = major << 5
        switch argument {
        case 0...23: out.append(type | UInt8(argument))
        case 24...0xFF: out += [type | 24, UInt8(argument)]
        case 0x100...0xFFFF:
            out.append(type | 25)
            bigEndian(argument, count: 2, into: &out)
        case 0x1_0000...0xFFFF_FFFF:
            out.append(type | 26)
            bigEndian(argument, count: 4, into: &out)
        default:
            out.append(type | 27)
            bigEndian(argument, count: 8, into: &out)
        }
    }

    static func bigEndian(_ value: UInt64, count: Int, into out: inout [UInt8]) {
        for i in stride(from: count - 1, through: 0, by: -1) { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }
}
