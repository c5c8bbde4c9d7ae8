import Foundation

/// Blocking work (waiting for a child process, reading its pipes) on a thread of its own: the task that awaits it
/// gives its cooperative thread back meanwhile. The cooperative pool has as many threads as the machine has cores;
/// a test that blocks one of them for a child's whole run stops every other test of the process once the pool is
/// full (docs/reliability.md, "Starved pool").
enum OffPool {
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                do {
                    continuation.resume(returning: try body())
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            thread.start()
        }
    }
}
