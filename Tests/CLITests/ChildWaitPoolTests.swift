import Foundation
import Testing

/// The starved pool (docs/reliability.md): a test waiting for a child process must not hold one of the process's
/// cooperative threads, or a few such tests side by side stop every other test (their clocks run on: a 10 s link
/// security answer, a 2 s stall timeout, all expire without their task having run).
@Suite("Tests waiting for children leave the cooperative pool free", .timeLimit(.minutes(4)))
struct ChildWaitPoolTests {
    @Test("More children awaited at once than the machine has cores: all of them run, the test goes on")
    func moreWaitingChildrenThanCoresLeaveThePoolFree() async throws {
        // More waits than the pool has threads (one per core): held threads would leave some children unstarted.
        let count = 2 * ProcessInfo.processInfo.activeProcessorCount + 2
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-pool-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let release = directory.appendingPathComponent("release").path
        // Each child says it started, then waits until the test releases it.
        async let results = withThrowingTaskGroup(of: CLIRunner.Result.self) { group in
            for index in 0..<count {
                group.addTask {
                    try await CLIRunner.run(
                        ["-c", "touch '\(directory.path)/started-\(index)'; while [ ! -e '\(release)' ]; do sleep 0.02; done"],
                        timeout: 300, executable: URL(fileURLWithPath: "/bin/sh"))
                }
            }
            var all: [CLIRunner.Result] = []
            for try await result in group { all.append(result) }
            return all
        }
        // Waits off the pool until every child has started. Should the pool be held by the waits, nothing in this
        // process could release the children: after a generous deadline this thread releases them itself (freeing
        // the pool so the test can report), and says the children never all ran.
        let allStarted = try await OffPool.run { () -> Bool in
            defer { FileManager.default.createFile(atPath: release, contents: nil) }
            return OffPool.blockingPoll(seconds: 120) {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
                return names.filter({ $0.hasPrefix("started-") }).count == count
            }
        }
        let finished = try await results
        #expect(allStarted, "\(count) children awaited at once did not all start: the waits held the pool")
        #expect(finished.count == count)
        #expect(finished.allSatisfy { $0.status == 0 })
    }
}
