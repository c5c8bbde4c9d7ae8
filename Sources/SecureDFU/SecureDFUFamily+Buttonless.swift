import BLECore
import DFUCore
import DFUProtocol
import GATT
import Synchronization

extension SecureDFUFamily {
    /// How long the application has to answer a buttonless request (the SDK answers at once; the jump itself
    /// waits for the indication's confirmation, secure-dfu-anchors.md 3.7).
    static let buttonlessAnswerTimeout: Duration = .seconds(5)
    /// How long the application has to drop the link after `20 01 01`.
    static let jumpDisconnectTimeout: Duration = .seconds(5)

    /// The buttonless jump (secure-dfu-anchors.md 2.8, 3.7): indications on, the optional advertising name (`02`,
    /// without bonds only), Enter Bootloader (`01`), wait for `20 01 01` and for the device to drop the link.
    /// Returns where the bootloader will advertise: address + 1 (or the name) without bonds, the same address with.
    public func enterUpdater(_ entry: Entry, on link: DFULink, context: UpdateContext) async throws(DFUError)
        -> DeviceLocation
    {
        let gatt = link.gatt
        let handle = entry.characteristic.valueHandle
        let replies = ButtonlessReplies(values: link.att.notificationValues(handle: handle), clock: context.clock)
        defer { replies.close() }
        var name = entry.bonded ? nil : context.options.bootloaderName
        do {
            try await gatt.setIndications(true, of: entry.characteristic)
            if let requested = name {
                try await gatt.write(handle: handle, value: ButtonlessRequest.setAdvertisementName(requested).encoded)
                let reply = await replies.next(opcode: 0x02, within: Self.buttonlessAnswerTimeout)
                if reply?.status != .success {
                    let answer = reply.map { "\($0.status)" } ?? "no answer"
                    context.emit(
                        .warning("the device did not accept the bootloader name '\(requested)' (\(answer)); looking for it at its address"))
                    name = nil
                }
            }
            context.emit(.jumping(address: link.peer.address.description, bonded: entry.bonded))
            do {
                try await gatt.write(handle: handle, value: ButtonlessRequest.enterBootloader.encoded)
            } catch where error.code == .disconnected || error.code == .closed {
                // The device may reset before it answers.
            }
        } catch {
            throw DFUError(.remoteRefusal, "buttonless jump failed: \(error)", cause: error, family: id)
        }
        if let reply = await replies.next(opcode: 0x01, within: Self.buttonlessAnswerTimeout), reply.status != .success {
            throw DFUError(.remoteRefusal, "the device refused to enter the bootloader: \(reply.status)", family: id)
        }
        let att = link.att
        if await context.withDeadline(Self.jumpDisconnectTimeout, { _ = await att.disconnected() }) == nil {
            context.emit(.warning("the device did not disconnect after the jump; closing the link"))
        }
        let address = entry.bonded ? link.peer.address : link.peer.address.nordicBootloaderAddress
        return DeviceLocation(addresses: [address], names: name.map { [$0] } ?? [], addressType: link.peer.type)
    }
}

/// Buttonless responses (`20 <op> <status>`) as they arrive, with deadlines on the injected clock. One stream
/// carries the responses, the end of the link and the deadlines, so a wait is a wait for the next event.
final class ButtonlessReplies: Sendable {
    private enum Event: Sendable {
        case response(ButtonlessResponse)
        case deadline(Int)
        case ended
    }

    private let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let forwarder: Task<Void, Never>
    private let clock: UpdateClock

    init(values: AsyncStream<[UInt8]>, clock: UpdateClock) {
        (events, continuation) = AsyncStream.makeStream(of: Event.self)
        self.clock = clock
        let continuation = self.continuation
        forwarder = Task {
            for await value in values {
                if let response = try? ButtonlessResponse(decoding: value) { continuation.yield(.response(response)) }
            }
            continuation.yield(.ended)
        }
    }

    func close() {
        forwarder.cancel()
        continuation.finish()
    }

    private static let counter = SendableCounter()

    /// The next response to `opcode`, or nil when `timeout` passes (or the link ends) first. Only one caller waits
    /// at a time (the jump is sequential).
    func next(opcode: UInt8, within timeout: Duration) async -> ButtonlessResponse? {
        let id = Self.counter.next()
        let clock = self.clock
        let deadline = clock.now.advanced(by: timeout)
        let continuation = self.continuation
        let timer = Task {
            try? await clock.sleep(until: deadline, tolerance: nil)
            continuation.yield(.deadline(id))
        }
        defer { timer.cancel() }
        for await event in events {
            switch event {
            case .response(let response) where response.requestOpcode == opcode: return response
            case .response: continue
            case .deadline(let fired) where fired == id: return nil
            case .deadline: continue
            case .ended: return nil
            }
        }
        return nil
    }
}

/// A counter shared across tasks.
final class SendableCounter: Sendable {
    private let value = Mutex(0)
    func next() -> Int {
        value.withLock { value in
            value += 1
            return value
        }
    }
}
