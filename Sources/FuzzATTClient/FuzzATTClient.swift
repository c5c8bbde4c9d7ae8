import ATT
import BLECore
import Foundation
import FuzzSupport

// The state machine is internal to GATT: reachable in debug builds (testability on), which every fuzz build is. A
// release build of the whole package compiles this target to a no-op.
#if DEBUG
@testable import GATT
#endif

/// libFuzzer target for the client side of an ATT bearer (`ATTClientStateMachine`, which the `ATTClient` actor
/// drives): a peer that sends arbitrary PDUs, interleaved with our own requests, timers and link loss
/// (tools/fuzz ATTClient).
///
/// The input is a script, one operation per byte (low 3 bits), some with operands:
///
///     0  request      next byte picks the request (MTU, Read, Write, Find Information, Read By Group Type, and a
///                     Write Command, which is not a request), the next two bytes are its handle
///     1-3 peer PDU    next byte & 0x3F is the length L, then L raw bytes arrive from the peer
///     4  timer        the transaction timer of the newest request fires
///     5  link lost    the bearer fails
///     6  MTU answer   Exchange MTU Response with the next two bytes as the server's Rx MTU
///     7  error answer Error Response naming the opcode in the next byte
///
/// Invariants checked (a violation traps, which libFuzzer reports as a crash): every request completes exactly
/// once, none before it was made; once closed nothing is sent; everything sent is a well-formed ATT PDU; timers
/// start only for pending requests; ATT_MTU stays within 23...max(23, our Rx MTU); a PDU longer than ATT_MTU
/// closes the bearer (`oversizePDU`) and is not delivered.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzATTClient(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    #if DEBUG
    var script = ClientScript(bytes: Array(UnsafeBufferPointer(start: data, count: size)))
    script.run()
    #endif
    return 0
}

#if DEBUG

struct ClientScript {
    var input: ArraySlice<UInt8>
    var machine: ATTClientStateMachine
    var requested: Set<UInt64> = []
    var completed: Set<UInt64> = []
    var nextID: UInt64 = 0
    var closed = false

    init(bytes: [UInt8]) {
        let rxMTU = UInt16(bytes.first ?? 0) * 4 + 1
        input = bytes.dropFirst()
        machine = ATTClientStateMachine(rxMTU: rxMTU)
    }

    mutating func byte() -> UInt8 { input.popFirst() ?? 0 }
    mutating func handle() -> UInt16 { UInt16(byte()) | UInt16(byte()) << 8 }

    mutating func run() {
        while let op = input.popFirst() {
            switch op & 7 {
            case 0:
                let kind = byte() % 6
                let handle = handle()
                let pdu: ATTPDU
                switch kind {
                case 0: pdu = .exchangeMTURequest(clientRxMTU: machine.rxMTU)
                case 1: pdu = .readRequest(handle: handle)
                case 2: pdu = .writeRequest(handle: handle, value: [0x01, 0x00])
                case 3: pdu = .findInformationRequest(startHandle: handle, endHandle: 0xFFFF)
                case 4: pdu = .readByGroupTypeRequest(startHandle: 1, endHandle: handle, type: BluetoothUUID(0x2800))
                default: pdu = .writeCommand(handle: handle, value: [0x60])
                }
                let id = nextID
                nextID += 1
                requested.insert(id)
                check(machine.request(pdu, id: id))
            case 1, 2, 3:
                let length = Int(byte() & 0x3F)
                let pdu = Array(input.prefix(length))
                input = input.dropFirst(length)
                let limit = machine.mtu
                let actions = machine.received(pdu)
                // Core v5.4 Vol 3 Part F §3.2.8: a PDU longer than ATT_MTU closes the bearer, nothing is delivered.
                if pdu.count > limit, !closed {
                    precondition(
                        actions.last == .close(ATTClientError(.oversizePDU))
                            && !actions.contains { if case .deliver = $0 { true } else { false } },
                        "a \(pdu.count)-octet PDU at ATT_MTU \(limit) did not close the bearer: \(actions)")
                }
                check(actions)
            case 4:
                check(machine.timerFired(id: nextID &- 1))
            case 5:
                check(machine.bearerFailed(ATTClientError(.disconnected, "fuzz")))
            case 6:
                check(machine.received(ATTPDU.exchangeMTUResponse(serverRxMTU: handle()).encoded))
            default:
                let opcode = ATTOpcode(rawValue: byte())
                check(machine.received(ATTPDU.errorResponse(requestOpcode: opcode, handle: 0, error: .invalidHandle).encoded))
            }
            let mtu = machine.mtu
            precondition(mtu >= 23 && mtu <= max(23, Int(machine.rxMTU)), "ATT_MTU \(mtu) out of range")
        }
        check(machine.close(ATTClientError(.closed, "end of script")))
        precondition(completed == requested, "requests never completed: \(requested.subtracting(completed))")
    }

    mutating func check(_ actions: [ATTClientStateMachine.Action]) {
        for action in actions {
            switch action {
            case .send(let bytes):
                precondition(!closed, "sent \(bytes) after the bearer closed")
                precondition((try? ATTPDU(decoding: bytes)) != nil, "sent a PDU that does not decode: \(bytes)")
            case .startTimer(let id):
                precondition(requested.contains(id) && !completed.contains(id), "timer for request \(id) not pending")
            case .cancelTimer:
                break
            case .complete(let id, _):
                precondition(requested.contains(id), "completed unknown request \(id)")
                precondition(completed.insert(id).inserted, "request \(id) completed twice")
            case .deliver:
                precondition(!closed, "delivered a notification after the bearer closed")
            case .close:
                precondition(!closed, "closed twice")
                closed = true
            }
        }
    }
}

#endif

#if FUZZING
/// SwiftPM links executables with `main` aliased to `<Target>_main`: hand over to libFuzzer.
@_cdecl("FuzzATTClient_main")
public func fuzzATTClientMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzDriver.run(argc, argv, fuzzATTClient)
}
#else
/// An ordinary build replays the files given as arguments (crash reproducers).
@main enum FuzzATTClientMain { static func main() { FuzzDriver.replay(fuzzATTClient) } }
#endif
