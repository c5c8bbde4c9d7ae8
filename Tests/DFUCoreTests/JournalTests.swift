import Foundation
import Testing

@testable import DFUCore

@Suite(.timeLimit(.minutes(2))) struct JournalTests {
    struct FamilyState: Codable, Hashable {
        var sha: String
        var offsets: [Int]
        var crc: UInt32
    }

    @Test func payloadRoundTrip() throws {
        let state = FamilyState(sha: "9f86", offsets: [4096, 8192], crc: 0xFFFF_FFFF)
        let payload = try ResumePayload(state)
        #expect(try payload.decode(FamilyState.self) == state)
        #expect(throws: JournalError.self) { try payload.decode([Int].self) }
    }

    @Test func journalRoundTrip() throws {
        let journal = UpdateJournal(
            deviceAddress: "C0:FF:EE:00:00:01", packageSHA256: "ab", family: .smp, partIndex: 1, confirmedBytes: 512,
            resume: try ResumePayload(FamilyState(sha: "x", offsets: [], crc: 1)))
        let data = try JSONEncoder().encode(journal)
        #expect(try JSONDecoder().decode(UpdateJournal.self, from: data) == journal)
    }

    /// A journal written before families existed reads as a Secure DFU journal, `executed` as its resume state.
    @Test func journalBeforeFamilies() throws {
        let old = #"{"deviceAddress":"C0:FF:EE:00:00:01","packageSHA256":"9f86","partIndex":1,"executed":[{"index":0,"offset":4096,"crc":305419896}]}"#
        let journal = try JSONDecoder().decode(UpdateJournal.self, from: Data(old.utf8))
        #expect(journal.family == .secure)
        #expect(journal.partIndex == 1)
        #expect(journal.resume == .object(["executed": .array([.object(["index": .integer(0), "offset": .integer(4096), "crc": .integer(305_419_896)])])]))
    }

    @Test func inMemoryStore() async throws {
        let store = InMemoryUpdateJournalStore()
        let journal = UpdateJournal(deviceAddress: "c0:ff:ee:00:00:01", packageSHA256: "AB", family: .secure)
        try await store.save(journal)
        #expect(try await store.load(deviceAddress: "C0:FF:EE:00:00:01", packageSHA256: "ab") == journal)
        try await store.remove(deviceAddress: "C0:FF:EE:00:00:01", packageSHA256: "ab")
        #expect(try await store.load(deviceAddress: "C0:FF:EE:00:00:01", packageSHA256: "ab") == nil)
    }
}
