import CBOR

/// A request of the OS or image group, before it gets a sequence number (smp-mcuboot.md §2.2, §3.2, §4.1).
public struct SMPRequest: Hashable, Sendable, CustomStringConvertible {
    public var operation: SMPOperation
    public var group: SMPGroup
    public var command: UInt8
    public var body: CBOR

    public init(_ operation: SMPOperation, group: SMPGroup, command: UInt8, body: CBOR = .map([])) {
        self.operation = operation
        self.group = group
        self.command = command
        self.body = body
    }

    /// The message with `sequence` and the header `version`.
    public func message(sequence: UInt8, version: SMPVersion = .v2) -> SMPMessage {
        SMPMessage(operation, group: group, command: command, sequence: sequence, version: version, body: body)
    }

    // MARK: OS group (0)

    /// Echo (id 0, write): `{"d": text}`, answered `{"r": text}`.
    public static func echo(_ text: String) -> SMPRequest {
        SMPRequest(.write, group: .os, command: SMPCommand.OS.echo, body: .textMap(["d": .text(text)]))
    }

    /// Reset (id 5, write): `{}`, or `{"force": 1}` to reset even when an application hook would refuse.
    public static func reset(force: Bool = false) -> SMPRequest {
        SMPRequest(
            .write, group: .os, command: SMPCommand.OS.reset, body: force ? .textMap(["force": .unsigned(1)]) : .map([]))
    }

    /// MCUmgr parameters (id 6, read): answered `{"buf_size": n, "buf_count": n}` when
    /// `CONFIG_MCUMGR_GRP_OS_MCUMGR_PARAMS` is on, ENOTSUP (8) otherwise.
    public static let mcumgrParameters = SMPRequest(.read, group: .os, command: SMPCommand.OS.mcumgrParameters)

    /// Bootloader information (id 8, read): `{}` gives `{"bootloader": "MCUboot"}`, `{"query": "mode"}` the mode.
    public static func bootloaderInfo(query: String? = nil) -> SMPRequest {
        SMPRequest(
            .read, group: .os, command: SMPCommand.OS.bootloaderInfo,
            body: query.map { .textMap(["query": .text($0)]) } ?? .map([]))
    }

    // MARK: Image group (1)

    /// Image state read (id 0, read).
    public static let imageState = SMPRequest(.read, group: .image, command: SMPCommand.Image.state)

    /// Image state write (id 0, write): `{"hash": h, "confirm": c}`. Test = a hash and `confirm` false; confirm the
    /// running image = no hash and `confirm` true (smp-mcuboot.md §3.2).
    public static func setImageState(hash: [UInt8]?, confirm: Bool) -> SMPRequest {
        var pairs: [CBOR.Pair] = []
        if let hash { pairs.append(CBOR.Pair(.text("hash"), .bytes(hash))) }
        pairs.append(CBOR.Pair(.text("confirm"), .bool(confirm)))
        return SMPRequest(.write, group: .image, command: SMPCommand.Image.state, body: .map(pairs))
    }

    /// Image upload (id 1, write): one chunk.
    public static func upload(_ chunk: SMPUploadChunk) -> SMPRequest {
        SMPRequest(.write, group: .image, command: SMPCommand.Image.upload, body: chunk.body)
    }

    /// Image erase (id 5, write): `{"slot": n}`, or `{}` for the other slot.
    public static func erase(slot: Int? = nil) -> SMPRequest {
        SMPRequest(
            .write, group: .image, command: SMPCommand.Image.erase,
            body: slot.map { .textMap(["slot": .int($0)]) } ?? .map([]))
    }

    public var description: String { "\(operation) \(group)/\(command) \(body)" }
}

/// One upload chunk (smp-mcuboot.md §4.1). The first chunk (`off` 0) carries `len`, `sha` and `upgrade`; `image`
/// goes with it when the target is not image 0 (as Nordic's hosts do; mcumgr-cli always sends it).
public struct SMPUploadChunk: Hashable, Sendable {
    public var image: Int?
    public var offset: Int
    public var data: ArraySlice<UInt8>
    /// Total image length (first chunk).
    public var length: Int?
    /// SHA-256 of the whole image (first chunk): the device resumes an upload with the same `sha`.
    public var sha: [UInt8]?
    /// Refuse unless the image's version is newer than the running one (first chunk).
    public var upgrade: Bool?

    public init(
        image: Int? = nil, offset: Int, data: ArraySlice<UInt8>, length: Int? = nil, sha: [UInt8]? = nil,
        upgrade: Bool? = nil
    ) {
        self.image = image
        self.offset = offset
        self.data = data
        self.length = length
        self.sha = sha
        self.upgrade = upgrade
    }

    public var body: CBOR {
        var pairs: [CBOR.Pair] = []
        if let image { pairs.append(CBOR.Pair(.text("image"), .int(image))) }
        if let length { pairs.append(CBOR.Pair(.text("len"), .int(length))) }
        pairs.append(CBOR.Pair(.text("off"), .int(offset)))
        if let sha { pairs.append(CBOR.Pair(.text("sha"), .bytes(sha))) }
        pairs.append(CBOR.Pair(.text("data"), .bytes(Array(data))))
        if let upgrade { pairs.append(CBOR.Pair(.text("upgrade"), .bool(upgrade))) }
        return .map(pairs)
    }

    /// The largest `data` length such that the whole request (header + body) of a chunk with these fields, at any
    /// offset up to `length`, fits `packetLimit` bytes. Nil when not even one byte fits.
    public static func maximumDataLength(
        packetLimit: Int, totalLength: Int, image: Int?, sha: [UInt8]?, upgrade: Bool?, first: Bool
    ) -> Int? {
        var probe = SMPUploadChunk(
            image: first ? image : nil, offset: totalLength, data: [][...], length: first ? totalLength : nil,
            sha: first ? sha : nil, upgrade: first ? upgrade : nil)
        if first { probe.offset = 0 }
        // The empty byte string costs 1 byte; n bytes cost n plus a 1-, 2-, 3- or 5-byte head (RFC 8949 §3.1).
        let room = packetLimit - (SMPHeader.size + probe.body.encoded().count - 1)
        func head(_ n: Int) -> Int { n < 24 ? 1 : n < 256 ? 2 : n < 65536 ? 3 : 5 }
        var n = room - 1
        while n > 0, n + head(n) > room { n -= 1 }
        return n > 0 ? n : nil
    }
}
