import BLECore
import Foundation
import LinuxIO
import Synchronization
import Testing
import VirtualRadio

/// btsnoop capture files: exact bytes, and decoding by tshark (Wireshark) when installed.
@Suite(.timeLimit(.minutes(5))) struct CaptureTests {
    static let tsharkPath: String? = ["/usr/bin/tshark", "/usr/local/bin/tshark"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static let isCI = ProcessInfo.processInfo.environment["CI"] == "true"

    func temporaryPath(_ name: String) -> String {
        NSTemporaryDirectory() + "bledfu-capture-\(UUID().uuidString)-\(name)"
    }

    @Test func fileHeaderBytes() {
        #expect(
            BTSnoopWriter.fileHeader == [
                0x62, 0x74, 0x73, 0x6E, 0x6F, 0x6F, 0x70, 0x00,  // "btsnoop\0"
                0x00, 0x00, 0x00, 0x01,  // version 1
                0x00, 0x00, 0x03, 0xEA,  // datalink 1002 (H4)
            ])
    }

    @Test func recordBytes() {
        // Read Request (0x0A) for handle 0x0003, sent by us, at the Unix epoch plus 1 µs.
        let record = BTSnoopWriter.record(pdu: [0x0A, 0x03, 0x00], sent: true, handle: 0x0040, unixMicroseconds: 1)
        #expect(
            record == [
                0x00, 0x00, 0x00, 0x0C,  // original length 12
                0x00, 0x00, 0x00, 0x0C,  // included length 12
                0x00, 0x00, 0x00, 0x00,  // flags: sent, data
                0x00, 0x00, 0x00, 0x00,  // drops
                0x00, 0xDC, 0xDD, 0xB3, 0x0F, 0x2F, 0x80, 0x01,  // 0x00DCDDB30F2F8000 + 1
                0x02,  // H4 ACL
                0x40, 0x20,  // handle 0x040, PB 0b10
                0x07, 0x00,  // ACL length 7
                0x03, 0x00,  // L2CAP length 3
                0x04, 0x00,  // CID 4 (ATT)
                0x0A, 0x03, 0x00,  // the PDU
            ])
        let received = BTSnoopWriter.record(pdu: [0x0B, 0x01], sent: false, handle: 0x0041, unixMicroseconds: 0)
        #expect(received[8..<12] == [0x00, 0x00, 0x00, 0x01])  // flags: received
        #expect(received[25..<27] == [0x41, 0x20])
    }

    /// The PDUs of a short client conversation, as (pdu, sent by us).
    static let conversation: [([UInt8], Bool)] = [
        ([0x02, 0x05, 0x02], true),  // Exchange MTU Request, 517
        ([0x03, 0xF7, 0x00], false),  // Exchange MTU Response, 247
        ([0x0A, 0x03, 0x00], true),  // Read Request, handle 0x0003
        ([0x0B, 0x68, 0x69], false),  // Read Response "hi"
        ([0x12, 0x05, 0x00, 0x01, 0x00], true),  // Write Request, handle 0x0005 (CCCD), notifications on
        ([0x13], false),  // Write Response
        ([0x1B, 0x03, 0x00, 0x2A], false),  // Handle Value Notification, handle 0x0003
    ]

    /// Writes the conversation through a CapturingBearer over a real socketpair.
    func writeConversation(to path: String) async throws {
        let writer = try BTSnoopWriter(path: path, now: { 1_700_000_000_000_000 })
        let (client, server) = try SeqPacketBearer.makePair()
        let trace = TraceObserver()
        let capturing = CapturingBearer(wrapping: client, observers: [writer, trace])
        for (pdu, sent) in CaptureTests.conversation {
            if sent {
                try await capturing.send(pdu)
                #expect(try await server.receive() == pdu)
            } else {
                try await server.send(pdu)
                #expect(try await capturing.receive() == pdu)
            }
        }
        await capturing.close()
        writer.close()
        #expect(trace.seen.map(\.1) == CaptureTests.conversation.map(\.1))
    }

    @Test func capturingBearerWritesEveryPDU() async throws {
        let path = temporaryPath("conversation.btsnoop")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await writeConversation(to: path)
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        var expected = BTSnoopWriter.fileHeader
        for (pdu, sent) in CaptureTests.conversation {
            expected += BTSnoopWriter.record(pdu: pdu, sent: sent, handle: 0x0040, unixMicroseconds: 1_700_000_000_000_000)
        }
        #expect(bytes == expected)
    }

    @Test(.enabled(if: CaptureTests.tsharkPath != nil || CaptureTests.isCI, "tshark is not installed"))
    func tsharkDecodesTheCapture() async throws {
        guard let tshark = CaptureTests.tsharkPath else {
            Issue.record("tshark is required in CI (install the tshark package)")
            return
        }
        let path = temporaryPath("tshark.btsnoop")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await writeConversation(to: path)
        // tshark's exit and output are awaited on the reactor: no thread of the cooperative pool waits for it
        // (docs/reliability.md, "Starved pool").
        let output = try ChildProcess.makePipe()
        let child: ChildProcess
        do {
            defer { try? FileIO.close(output.write) }
            child = try ChildProcess.spawn(
                tshark, arguments: ["-r", path, "-T", "fields", "-e", "btatt.opcode", "-e", "btatt.handle"],
                standardOutput: .descriptor(output.write), standardError: .null, ownProcessGroup: false)
        } catch {
            try? FileIO.close(output.read)
            throw error
        }
        let reader = try PipeReader(fd: output.read)
        defer { reader.close() }
        let data = Data(try await reader.readToEnd(idle: .seconds(120)))
        let exit = await child.end(grace: .seconds(120))
        #expect(exit?.code == 0)
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map { line in
            line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        }
        let opcodes = lines.map { $0.first ?? "" }
        #expect(opcodes == ["0x02", "0x03", "0x0a", "0x0b", "0x12", "0x13", "0x1b"])
        let handles = lines.map { $0.count > 1 ? $0[1] : "" }
        #expect(handles[2] == "0x0003")
        #expect(handles[4] == "0x0005")
        #expect(handles[6] == "0x0003")
    }
}

/// Records what a CapturingBearer shows its observers.
final class TraceObserver: PDUObserver {
    private let state = Mutex<[([UInt8], Bool)]>([])
    func observe(pdu: [UInt8], sent: Bool) { state.withLock { $0.append((pdu, sent)) } }
    var seen: [([UInt8], Bool)] { state.withLock { $0 } }
}
