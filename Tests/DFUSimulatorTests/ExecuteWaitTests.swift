import DFUProtocol
import DFUSimulator
import Testing

/// nRF5 SDK 15-17 `on_data_obj_execute_request_sched` answers a data Execute only once `nrf_fstorage_is_busy`
/// is false ("Wait for all buffers to be written in flash"), for every object, not only the last one.
@Suite("Execute Data waits for the flash queue", .timeLimit(.minutes(5)))
struct ExecuteWaitTests {
    let image = Fixture.firmware(10_000)

    /// Real flash timing (speedup 1): erase 85 ms, 41 µs per 32-bit word.
    func ready() -> Conversation {
        var profile = Fixture.profile(queueDepth: 64)
        profile.speedup = 1
        var c = Conversation(profile)
        #expect(c.sendInit(Fixture.initPacket(Fixture.command(for: image))) == [0x60, 0x04, 0x01])
        _ = c.ask([0x06, 0x02])
        return c
    }

    @Test("An Execute that finds erase and writes queued waits until they are done, then answers")
    func waitsForQueue() {
        var c = ready()
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])  // t = 0: erase until 85 ms
        _ = c.send(Array(image.prefix(4096)))  // 1024 words: 41.984 ms of writes after the erase
        c.now = .milliseconds(10)
        let actions = c.cp([0x04])
        // 85 ms + 41.984 ms - 10 ms.
        #expect(actions.first == .wait(.microseconds(116_984)))
        #expect(Conversation.notifications(actions) == [[0x60, 0x04, 0x01]])
        // The wait comes before the response.
        let waitIndex = actions.firstIndex { if case .wait = $0 { true } else { false } }
        let notifyIndex = actions.firstIndex { if case .notify = $0 { true } else { false } }
        #expect((waitIndex ?? .max) < (notifyIndex ?? .min))
    }

    @Test("An Execute after the flash went idle answers at once")
    func idleAnswersAtOnce() {
        var c = ready()
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        _ = c.send(Array(image.prefix(4096)))
        c.now = .milliseconds(200)
        let actions = c.cp([0x04])
        #expect(!actions.contains { if case .wait = $0 { true } else { false } })
        #expect(Conversation.notifications(actions) == [[0x60, 0x04, 0x01]])
        // The next object's Create is accepted and queues its own erase.
        #expect(c.ask([0x01, 0x02, 0x00, 0x10, 0, 0]) == [[0x60, 0x01, 0x01]])
    }
}
