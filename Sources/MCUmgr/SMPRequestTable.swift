/// The outstanding requests of an ``SMPClient``, as a value: sequence allocation, response matching, timeouts.
struct SMPRequestTable: Sendable {
    struct Entry: Sendable {
        var sequence: UInt8
        var operation: SMPOperation
        var group: SMPGroup
        var command: UInt8
        var bytes: [UInt8]
        var timeout: Duration
        var retriesLeft: Int
        var deadline: Duration
        /// The request went out more than once: two answers may come.
        var resent = false
    }

    enum Match {
        case complete(Entry)
        /// A second answer to a resent request, or an answer to one that timed out: harmless.
        case ignore
        case violation(String)
    }

    private(set) var entries: [UInt8: Entry] = [:]
    private var next: UInt8 = 0
    /// Sequences whose answer may still come although nobody waits for it (resent or abandoned), most recent last.
    private var lingering: [UInt8] = []
    static let lingeringLimit = 64

    /// The next sequence number not outstanding (nil when all 256 are).
    mutating func allocate() -> UInt8? {
        for _ in 0..<256 {
            let candidate = next
            next &+= 1
            if entries[candidate] == nil {
                lingering.removeAll { $0 == candidate }
                return candidate
            }
        }
        return nil
    }

    mutating func register(_ entry: Entry) { entries[entry.sequence] = entry }

    /// Server rules (`smp.c`): the response echoes group, command and sequence, and its OP is the response OP of
    /// the request's.
    mutating func match(_ header: SMPHeader) -> Match {
        guard let entry = entries[header.sequence] else {
            if lingering.contains(header.sequence) { return .ignore }
            return .violation("response to sequence \(header.sequence), which no request is waiting for (\(header))")
        }
        guard header.operation.isResponse, header.operation == entry.operation.response else {
            return .violation("\(header.operation) answers a \(entry.operation) request (seq \(header.sequence))")
        }
        guard header.group == entry.group, header.command == entry.command else {
            return .violation(
                "response for \(header.group)/\(header.command) to a \(entry.group)/\(entry.command) request (seq \(header.sequence))")
        }
        entries[header.sequence] = nil
        if entry.resent { linger(entry.sequence) }
        return .complete(entry)
    }

    var earliestDeadline: Duration? { entries.values.map(\.deadline).min() }

    /// At `now`: the bytes to send again (retries left) and the entries that failed.
    mutating func expire(now: Duration) -> (resend: [[UInt8]], expired: [Entry]) {
        var resend: [(UInt8, [UInt8])] = []
        var expired: [Entry] = []
        for (sequence, var entry) in entries where entry.deadline <= now {
            if entry.retriesLeft > 0 {
                entry.retriesLeft -= 1
                entry.deadline = now + entry.timeout
                entry.resent = true
                entries[sequence] = entry
                resend.append((sequence, entry.bytes))
            } else {
                entries[sequence] = nil
                linger(sequence)
                expired.append(entry)
            }
        }
        // Resend in submission order (sequence numbers wrap, but only within one window).
        return (resend.sorted { $0.0 < $1.0 }.map(\.1), expired.sorted { $0.sequence < $1.sequence })
    }

    mutating func removeAll() { entries = [:] }

    private mutating func linger(_ sequence: UInt8) {
        lingering.removeAll { $0 == sequence }
        lingering.append(sequence)
        if lingering.count > Self.lingeringLimit { lingering.removeFirst() }
    }
}
