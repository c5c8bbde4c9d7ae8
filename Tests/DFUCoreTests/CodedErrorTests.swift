import BLECore
import Foundation
import Testing

@testable import DFUCore

@Suite(.timeLimit(.minutes(2))) struct CodedErrorTests {
    /// Equality and hashing are on the code: the text is for people, the cause is not compared.
    @Test func equalityIsOnTheCode() {
        let a = DFUError(.linkLost, "the device disconnected during object 3")
        let b = DFUError(.linkLost, "another text", cause: JournalError(.unwritable, "disk full"))
        let c = DFUError(.timeout, "the device disconnected during object 3")
        #expect(a == b)
        #expect(a != c)
        #expect(Set([a, b, c]).count == 2)
    }

    /// Unknown codes survive and print.
    @Test func openCodeSpace() throws {
        let code = DFUError.Code("legacy-validate-failed")
        let error = DFUError(code, "Validate answered 10 04 05")
        #expect(error.description == "legacy-validate-failed: Validate answered 10 04 05")
        let json = try JSONEncoder().encode(code)
        #expect(String(decoding: json, as: UTF8.self) == "\"legacy-validate-failed\"")
        #expect(try JSONDecoder().decode(DFUError.Code.self, from: json) == code)
    }

    @Test func familyIsFilledInOnce() {
        let error = DFUError(.remoteRefusal, "refused").from(.secure)
        #expect(error.family == .secure)
        #expect(error.from(.smp).family == .secure)
    }

    @Test func linkLossCodes() {
        #expect(DFUError(.linkLost, "").isLinkLoss)
        #expect(DFUError(.timeout, "").isLinkLoss)
        #expect(DFUError(.transport, "").isLinkLoss)
        #expect(!DFUError(.remoteRefusal, "").isLinkLoss)
        #expect(!DFUError(.unconfirmed, "").isLinkLoss)
    }
}
