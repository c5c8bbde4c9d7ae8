import BLECore
import CBOR
import MCUmgr
import Synchronization
import TestDoubles
import Testing

import GATT

/// An SMP transport in memory: the test reads what the client writes and answers with notifications.
final class ScriptedTransport: SMPTransport {
    let notifications: AsyncStream<[UInt8]>
    let continuation: AsyncStream<[UInt8]>.Continuation
    let written: AsyncStream<[UInt8]>
    let writtenContinuation: AsyncStream<[UInt8]>.Continuation
    let mtuValue: Int

    init(mtu: Int = 247) {
        (notifications, continuation) = AsyncStream.makeStream()
        (written, writtenContinuation) = AsyncStream.makeStream()
        mtuValue = mtu
    }

    func send(_ message: [UInt8]) async throws(SMPError) { writtenContinuation.yield(message) }
    var mtu: Int { get async { mtuValue } }
    var peerFault: String? { get async { nil } }
    func close() async { continuation.finish() }

    /// The device answers `bytes` as notifications of `fragment` bytes.
    func notify(_ bytes: [UInt8], fragment: Int = 20) {
        for start in stride(from: 0, to: bytes.count, by: fragment) {
            continuation.yield(Array(bytes[start..<min(start + fragment, bytes.count)]))
        }
    }
}

/// Conversation scripts: the host sends X, the device answers Y (for every command; SMPRequestTests has their bytes).
@Suite(.timeLimit(.minutes(5))) struct SMPClientScriptTests {
    func answer(_ request: [UInt8], body: CBOR, version: SMPVersion = .v2) throws -> [UInt8] {
        let message = try SMPMessage(decoding: request)
        let op = try #require(message.header.operation.response)
        return SMPMessage(op, group: message.header.group, command: message.header.command, sequence: message.header.sequence, version: version, body: body).encoded(indefiniteContainers: true)
    }

    @Test func everyCommandGetsItsAnswer() async throws {
        let transport = ScriptedTransport()
        let clock = ManualClock()
        let client = SMPClient(transport: transport, clock: clock)
        var writes = transport.written.makeAsyncIterator()
        let script: [(SMPRequest, CBOR)] = [
            (.echo("hi"), .textMap(["r": .text("hi")])),
            (.mcumgrParameters, .textMap(["buf_size": .int(2475), "buf_count": .int(4)])),
            (.bootloaderInfo(), .textMap(["bootloader": .text("MCUboot")])),
            (.imageState, .textMap(["images": .array([.textMap(["slot": .int(0), "version": .text("1.0.0"), "hash": .bytes([1]), "active": .bool(true)])])])),
            (.setImageState(hash: [UInt8](repeating: 2, count: 32), confirm: false), .textMap(["images": .array([])])),
            (.upload(SMPUploadChunk(offset: 0, data: [0x3D, 0xB8, 0xF3, 0x96][...], length: 4, sha: [9])), .textMap(["off": .int(4), "match": .bool(true)])),
            (.erase(slot: 1), .map([])),
            (.reset(), .map([])),
        ]
        for (request, body) in script {
            let pending = Task { try await client.send(request) }
            let sent = try #require(await writes.next())
            let decoded = try SMPMessage(decoding: sent)
            #expect(decoded.header.group == request.group && decoded.header.command == request.command)
            #expect(decoded.body == request.body)
            transport.notify(try answer(sent, body: body))
            #expect(try await pending.value == body)
        }
        await client.close()
    }

    @Test func deviceErrorsInBothFormsThrowRemote() async throws {
        let transport = ScriptedTransport()
        let client = SMPClient(transport: transport, clock: ManualClock())
        var writes = transport.written.makeAsyncIterator()
        let pending = Task { try await client.send(.mcumgrParameters) }
        transport.notify(try answer(try #require(await writes.next()), body: .textMap(["rc": .int(8)]), version: .v1))
        let generic = await #expect(throws: SMPError(.remote, "")) { try await pending.value }
        #expect(generic?.returnCode == .notSupported)
        #expect(await client.currentVersion == .v1, "the client follows a v1 server")
        let upload = Task { try await client.send(.upload(SMPUploadChunk(offset: 0, data: [][...], length: 1))) }
        transport.notify(try answer(try #require(await writes.next()), body: .textMap(["err": .textMap(["group": .int(1), "rc": .int(27)])])))
        let group = await #expect(throws: SMPError(.remote, "")) { try await upload.value }
        #expect(group?.groupError == SMPGroupError(.currentVersionIsNewer))
        #expect(group?.returnCode == nil)
    }

    @Test func timeoutResendsTheSameBytesThenFails() async throws {
        let transport = ScriptedTransport()
        let clock = ManualClock()
        let client = SMPClient(transport: transport, configuration: SMPClientConfiguration(timeout: .seconds(10), retries: 1), clock: clock)
        var writes = transport.written.makeAsyncIterator()
        let pending = Task { try await client.send(.echo("x")) }
        let first = try #require(await writes.next())
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(10))
        let second = try #require(await writes.next())
        #expect(second == first, "a resend is the same request, same sequence")
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(10))
        await #expect(throws: SMPError(.timeout, "")) { try await pending.value }
        // A late answer to the abandoned request is ignored; the client still works.
        transport.notify(try answer(first, body: .textMap(["r": .text("x")])))
        let next = Task { try await client.send(.echo("y")) }
        let third = try #require(await writes.next())
        transport.notify(try answer(third, body: .textMap(["r": .text("y")])))
        #expect(try await next.value == .textMap(["r": .text("y")]))
    }

    @Test func aResponseToAnotherSequenceClosesTheClient() async throws {
        let transport = ScriptedTransport()
        let client = SMPClient(transport: transport, clock: ManualClock())
        var writes = transport.written.makeAsyncIterator()
        let pending = Task { try await client.send(.echo("x")) }
        var message = try SMPMessage(decoding: try answer(try #require(await writes.next()), body: .textMap(["r": .text("x")])))
        message.header.sequence &+= 1
        transport.notify(message.encoded())
        await #expect(throws: SMPError(.protocolViolation, "")) { try await pending.value }
        #expect(await client.closeReason?.code == .protocolViolation)
    }

    @Test func aResponseForAnotherCommandIsAViolation() async throws {
        let transport = ScriptedTransport()
        let client = SMPClient(transport: transport, clock: ManualClock())
        var writes = transport.written.makeAsyncIterator()
        let pending = Task { try await client.send(.imageState) }
        var message = try SMPMessage(decoding: try answer(try #require(await writes.next()), body: .map([])))
        message.header.command = 5
        transport.notify(message.encoded())
        await #expect(throws: SMPError(.protocolViolation, "")) { try await pending.value }
    }

    @Test func pipelinedRequestsAreMatchedBySequence() async throws {
        let transport = ScriptedTransport()
        let client = SMPClient(transport: transport, clock: ManualClock())
        var writes = transport.written.makeAsyncIterator()
        let results = Mutex<[Int: CBOR]>([:])
        for i in 0..<3 {
            try await client.submit(.echo("\(i)")) { result in
                if case .success(let message) = result { results.withLock { $0[i] = message.body } }
            }
        }
        var sent: [[UInt8]] = []
        for _ in 0..<3 { sent.append(try #require(await writes.next())) }
        // Answers out of order, split at odd places: each still reaches its own request.
        let answers = try [2, 0, 1].map { try answer(sent[$0], body: .textMap(["r": .text("\($0)")])) }
        transport.notify(answers.flatMap { $0 }, fragment: 7)
        let done = Task { try await client.send(.echo("end")) }
        transport.notify(try answer(try #require(await writes.next()), body: .textMap(["r": .text("end")])))
        _ = try await done.value
        #expect(results.withLock { $0 } == [0: .textMap(["r": .text("0")]), 1: .textMap(["r": .text("1")]), 2: .textMap(["r": .text("2")])])
    }

    @Test func linkLossFailsEveryWaitingRequest() async throws {
        let transport = ScriptedTransport()
        let client = SMPClient(transport: transport, clock: ManualClock())
        var writes = transport.written.makeAsyncIterator()
        let pending = Task { try await client.send(.imageState) }
        _ = await writes.next()
        transport.continuation.finish()
        await #expect(throws: SMPError(.disconnected, "")) { try await pending.value }
    }
}
