import CLinuxShim
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

/// An array of Linux `struct mmsghdr` for sendmmsg(2) and recvmmsg(2) (CLinuxShim's `bledfu_mmsghdr`, the C
/// type), each with one `iovec` of its own: `msg_hdr.msg_iov` -> vectors[i], `msg_iovlen` 1, no name, no control
/// data; `msg_len` and `msg_hdr.msg_flags` are set by the kernel.
///
/// Not thread-safe: one caller at a time (the bearers keep one per direction and take it out while in use).
public final class MessageHeaders: @unchecked Sendable {
    // @unchecked: owned by one caller at a time (see above).
    public let capacity: Int
    let headers: UnsafeMutablePointer<bledfu_mmsghdr>
    let vectors: UnsafeMutablePointer<iovec>

    public init(capacity: Int) {
        self.capacity = max(1, capacity)
        headers = UnsafeMutablePointer<bledfu_mmsghdr>.allocate(capacity: self.capacity)
        vectors = UnsafeMutablePointer<iovec>.allocate(capacity: self.capacity)
        vectors.initialize(repeating: iovec(iov_base: nil, iov_len: 0), count: self.capacity)
        for index in 0..<self.capacity {
            var header = msghdr()
            header.msg_iov = vectors + index
            header.msg_iovlen = 1
            (headers + index).initialize(to: bledfu_mmsghdr(msg_hdr: header, msg_len: 0))
        }
    }

    deinit {
        headers.deallocate()
        vectors.deallocate()
    }

    /// Points entry `index` at `count` bytes from `base` and clears its results.
    func setBuffer(_ index: Int, base: UnsafeMutableRawPointer?, count: Int) {
        vectors[index] = iovec(iov_base: base, iov_len: count)
        Self.setReceived(headers, index: index, length: 0, flags: 0)
    }

    /// `msg_len` of entry `index`.
    func length(_ index: Int) -> Int { Int(headers[index].msg_len) }

    /// `msg_hdr.msg_flags` of entry `index` (MSG_TRUNC after a receive that did not fit).
    func flags(_ index: Int) -> CInt { headers[index].msg_hdr.msg_flags }

    /// The buffer of the first entry of the array at `headers` (for the syscall mock).
    static func firstIOVector(_ headers: UnsafeMutablePointer<bledfu_mmsghdr>) -> UnsafeRawBufferPointer {
        let header = headers.pointee.msg_hdr
        guard let vector = header.msg_iov, header.msg_iovlen > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: vector.pointee.iov_base, count: vector.pointee.iov_len)
    }

    /// Sets `msg_len` and `msg_hdr.msg_flags` of entry `index` (what the kernel does on receive).
    static func setReceived(_ headers: UnsafeMutablePointer<bledfu_mmsghdr>, index: Int, length: Int, flags: CInt) {
        headers[index].msg_hdr.msg_flags = flags
        headers[index].msg_len = CUnsignedInt(clamping: length)
    }
}

/// Receive buffers for recvmmsg(2): `capacity` slots of `slotSize` bytes each and their headers. Memory the kernel
/// never writes to is never touched, so a large slot costs address space, not resident memory.
public final class ReceiveBatch: @unchecked Sendable {
    public let slotSize: Int
    let headers: MessageHeaders
    let storage: UnsafeMutableRawPointer

    public init(capacity: Int, slotSize: Int) {
        self.slotSize = max(1, slotSize)
        headers = MessageHeaders(capacity: capacity)
        storage = UnsafeMutableRawPointer.allocate(byteCount: headers.capacity * self.slotSize, alignment: 16)
    }

    public var capacity: Int { headers.capacity }

    deinit { storage.deallocate() }
}

/// Send buffers for sendmmsg(2), reused from burst to burst: the headers of ``SocketDescriptor/maximumBatch``
/// messages and one data area that grows to the largest burst seen (then stays). A burst of Write Commands is put
/// together here: each message's prefix (the ATT header) and its payload (an image slice) copied once, straight
/// from where they are; nothing is allocated per burst once the area is large enough.
///
/// Not thread-safe: one caller at a time (a bearer takes it out while a send runs).
public final class SendBatch: @unchecked Sendable {
    // @unchecked: owned by one caller at a time (see above).
    let headers: MessageHeaders
    private(set) var storage: UnsafeMutableRawPointer
    private(set) var storageSize: Int

    public init(capacity: Int = SocketDescriptor.maximumBatch, initialBytes: Int = 64 * 256) {
        headers = MessageHeaders(capacity: capacity)
        storageSize = max(1, initialBytes)
        storage = UnsafeMutableRawPointer.allocate(byteCount: storageSize, alignment: 16)
    }

    public var capacity: Int { headers.capacity }

    /// Bytes the data area holds now.
    public var bytes: Int { storageSize }

    /// Makes the data area at least `byteCount` bytes (its contents are not kept).
    func reserve(_ byteCount: Int) {
        guard byteCount > storageSize else { return }
        storage.deallocate()
        storageSize = byteCount
        storage = UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: 16)
    }

    deinit { storage.deallocate() }
}

extension SocketDescriptor {
    /// The most messages one sendmmsg/recvmmsg call carries here (the kernel's limit, UIO_MAXIOV, is 1024).
    public static let maximumBatch = 64

    /// Sends the first messages of `messages` (at most ``maximumBatch``) with one sendmmsg(2), one message each
    /// (MSG_NOSIGNAL). Returns how many the kernel took, from the first on; `.wouldBlock` when it took none (EAGAIN).
    /// EINTR is retried.
    public func send(messages: ArraySlice<[UInt8]>) throws(Errno) -> IOResult<Int> {
        let count = min(messages.count, Self.maximumBatch)
        guard count > 0 else { return .processed(0) }
        let total = messages.prefix(count).reduce(0) { $0 + $1.count }
        let headers = MessageHeaders(capacity: count)
        let data = UnsafeMutableRawPointer.allocate(byteCount: max(total, 1), alignment: 16)
        defer { data.deallocate() }
        var offset = 0
        for (index, message) in messages.prefix(count).enumerated() {
            let target = data + offset
            message.withUnsafeBytes { source in
                if let base = source.baseAddress { target.copyMemory(from: base, byteCount: source.count) }
            }
            headers.setBuffer(index, base: target, count: message.count)
            offset += message.count
        }
        return try ioResultOrErrno {
            system_sendmmsg(rawValue, headers.headers, CUnsignedInt(count), CInt(MSG_NOSIGNAL))
        }.get().map(Int.init)
    }

    /// Sends the first messages of `payloads` (at most the batch's capacity) with one sendmmsg(2), each message
    /// `prefix` followed by its payload, put together in `batch`'s reused buffer (MSG_NOSIGNAL). Returns how many the
    /// kernel took, from the first on; `.wouldBlock` when it took none (EAGAIN). EINTR is retried.
    public func send(payloads: ArraySlice<ArraySlice<UInt8>>, prefix: [UInt8], using batch: SendBatch) throws(Errno)
        -> IOResult<Int>
    {
        let count = min(payloads.count, batch.capacity)
        guard count > 0 else { return .processed(0) }
        var total = 0
        for payload in payloads.prefix(count) { total += prefix.count + payload.count }
        batch.reserve(total)
        var offset = 0
        prefix.withUnsafeBytes { header in
            for (index, payload) in payloads.prefix(count).enumerated() {
                let target = batch.storage + offset
                if let base = header.baseAddress { target.copyMemory(from: base, byteCount: header.count) }
                payload.withUnsafeBytes { source in
                    if let base = source.baseAddress {
                        (target + header.count).copyMemory(from: base, byteCount: source.count)
                    }
                }
                let length = header.count + payload.count
                batch.headers.setBuffer(index, base: target, count: length)
                offset += length
            }
        }
        return try ioResultOrErrno {
            system_sendmmsg(rawValue, batch.headers.headers, CUnsignedInt(count), CInt(MSG_NOSIGNAL))
        }.get().map(Int.init)
    }

    /// Receives up to `maximumCount` messages (at most the batch's capacity) that have already arrived, with one
    /// recvmmsg(2). A message longer than the batch's slot size is cut to it, as recv(2) into a buffer of that size
    /// cuts it; an empty message (end of stream) is returned as an empty array and ends the list. `.wouldBlock`
    /// when nothing is waiting (EAGAIN). EINTR is retried.
    public func receive(upTo maximumCount: Int, using batch: ReceiveBatch) throws(Errno) -> IOResult<[[UInt8]]> {
        let count = max(1, min(maximumCount, batch.capacity))
        for index in 0..<count {
            batch.headers.setBuffer(index, base: batch.storage + index * batch.slotSize, count: batch.slotSize)
        }
        let received = try ioResultOrErrno {
            system_recvmmsg(rawValue, batch.headers.headers, CUnsignedInt(count), 0)
        }.get()
        guard case .processed(let messageCount) = received else { return .wouldBlock }
        var messages: [[UInt8]] = []
        messages.reserveCapacity(Int(messageCount))
        for index in 0..<min(Int(messageCount), count) {
            let length = min(batch.headers.length(index), batch.slotSize)
            let slot = UnsafeRawBufferPointer(start: batch.storage + index * batch.slotSize, count: length)
            messages.append(Array(slot))
            if length == 0 { break }
        }
        return .processed(messages)
    }
}

extension IOResult {
    func map<U>(_ transform: (T) -> U) -> IOResult<U> {
        switch self {
        case .processed(let value): .processed(transform(value))
        case .wouldBlock: .wouldBlock
        }
    }
}
