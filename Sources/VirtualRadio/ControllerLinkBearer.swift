import BLECore
import Synchronization

/// A central's link on the virtual radio that gives its place back to the adapter's controller when it closes
/// (docs/virtual-radio.md §4.2). Everything else goes to the link underneath.
public final class ControllerLinkBearer: ATTBearer {
    public let base: any ATTBearer
    private let released: @Sendable () async -> Void
    private let closed = Mutex(false)

    public init(_ base: any ATTBearer, released: @escaping @Sendable () async -> Void) {
        self.base = base
        self.released = released
    }

    public var linkInfo: LinkInfo { base.linkInfo }
    public func send(_ pdu: [UInt8]) async throws(BearerError) { try await base.send(pdu) }
    public func send(burst pdus: [[UInt8]]) async throws(BearerError) { try await base.send(burst: pdus) }
    public func send(burst payloads: [ArraySlice<UInt8>], prefix: [UInt8]) async throws(BearerError) {
        try await base.send(burst: payloads, prefix: prefix)
    }
    public func receive() async throws(BearerError) -> [UInt8] { try await base.receive() }
    public func receive(upTo maximumCount: Int) async throws(BearerError) -> [[UInt8]] {
        try await base.receive(upTo: maximumCount)
    }
    public func securityLevel() async -> LinkSecurityLevel { await base.securityLevel() }
    public func raiseSecurity(to level: LinkSecurityLevel) async throws(BearerError) -> LinkSecurityLevel {
        try await base.raiseSecurity(to: level)
    }

    public func close() async {
        await base.close()
        let first = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        if first { await released() }
    }
}
