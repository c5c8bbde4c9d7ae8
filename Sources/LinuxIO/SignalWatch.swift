import Dispatch

/// Turns signals (SIGINT, SIGTERM) into a callback while it lives: the default action (terminating at once) is
/// replaced by the handler until ``cancel()``.
// @unchecked: `sources` and `numbers` are set once in init and never mutated; Dispatch sources are thread-safe.
public final class SignalWatch: @unchecked Sendable {
    private let sources: [any DispatchSourceSignal]
    private let numbers: [Int32]

    /// - Parameter handler: runs on one serial queue, once per signal delivered.
    public init(signals numbers: [Int32], handler: @escaping @Sendable (Int32) -> Void) {
        self.numbers = numbers
        let queue = DispatchQueue(label: "bledfu.signals")
        self.sources = numbers.map { number in
            system_setSignalIgnored(number, true)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { handler(number) }
            source.resume()
            return source
        }
    }

    public func cancel() {
        for source in sources { source.cancel() }
        for number in numbers { system_setSignalIgnored(number, false) }
    }
}
