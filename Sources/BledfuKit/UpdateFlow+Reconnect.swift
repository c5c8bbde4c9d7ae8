import Foundation
import BLECore
import DFUCore
import GATT

extension UpdateFlow {
    /// Connects to the family's updater again. After a lost link (`loss`) this is one disconnect episode of the
    /// ``ReconnectPolicy``: up to `attempts` attempts, each after its backoff on the updater's clock (a stop request
    /// ends the wait at once); between parts (`loss` nil) one attempt, which scans for up to the scan timeout.
    /// Returns the updater's link and where it was found (with every name it was looked for by).
    func reconnect(_ location: DeviceLocation, after loss: DFUError?, session: any FamilySession) async throws(DFUError)
        -> OpenedUpdater
    {
        let policy = request.reconnect
        var last: DFUError?
        for attempt in 0..<(loss == nil ? 1 : policy.attempts) {
            if loss != nil {
                let delay = policy.delay(beforeAttempt: attempt)
                emit(.reconnecting(attempt: attempt + 1, of: policy.attempts, delayMilliseconds: Int(delay / .milliseconds(1))))
                try await waitUnlessStopped(delay)
                meter.countReconnect()
            }
            if stop.isRequested { throw DFUError(.stopped, "stopped before reconnecting", cause: loss) }
            do {
                return try await openUpdater(initial: nil, location: location, sessions: [session])
            } catch {
                if [.noUpdateService, .remoteRefusal, .cancelled].contains(error.code) { throw error }
                last = error
                if loss == nil { break }
            }
        }
        guard let loss else { throw last ?? DFUError(.notFound, "the updater was not found") }
        throw DFUError(
            loss.code, "\(loss.message); reconnecting failed (\(last?.message ?? "no answer"))", cause: loss.cause ?? loss,
            family: loss.family)
    }

    /// What the device shows after a last step that went unacknowledged.
    enum Confirmation {
        /// Still in its updater: the step never arrived; resume on this link.
        case updater(DFULink)
        /// It runs the new application: the step took effect.
        case installed
        /// It runs an application whose Firmware Revision names another version (a dual-bank device that lost
        /// power boots its old application): the step did not take effect.
        case otherApplication(version: String)
    }

    /// After a last step that went unacknowledged: finds the device at its updater's or its application's place.
    /// An application means the step took effect (a bootloader with an unfinished update stays in its updater),
    /// unless its Firmware Revision (0x2A26) shows a version other than `expectedVersion`.
    func confirmInstalled(_ location: DeviceLocation, session: any FamilySession, expectedVersion: UInt32?)
        async throws(DFUError) -> Confirmation
    {
        try await pause(request.options.rebootDelay)
        let (link, _) = try await findAndConnect(location, notFound: .linkLost)
        let isApplication: Bool
        do {
            switch try await detect(on: link, sessions: [session]) {
            case .ready: return .updater(link)
            case .jump: isApplication = true
            }
        } catch where error.code == .noUpdateService {
            isApplication = true
        } catch {
            await link.close()
            throw error
        }
        let shown = isApplication ? await Self.firmwareRevision(link) : nil
        await link.close()
        if let expectedVersion, let shown, let number = UInt32(shown), number != expectedVersion {
            return .otherApplication(version: shown)
        }
        return .installed
    }

    /// The application's Firmware Revision string (Device Information 0x180A, 0x2A26), trimmed; nil without one.
    static func firmwareRevision(_ link: DFULink) async -> String? {
        do {
            let services = try await link.gatt.discoverPrimaryServices()
            guard let information = services.first(where: { $0.uuid == BluetoothUUID(0x180A) }),
                let revision = try await link.gatt.discoverCharacteristics(of: information)
                    .first(where: { $0.uuid == BluetoothUUID(0x2A26) })
            else { return nil }
            let bytes = try await link.gatt.read(handle: revision.valueHandle)
            let text = String(decoding: bytes, as: UTF8.self)
            return text.trimmingCharacters(in: .whitespaces.union(.controlCharacters))
        } catch {
            return nil
        }
    }

    /// Waits `duration` on the updater's clock, or until a stop is requested.
    func waitUnlessStopped(_ duration: Duration) async throws(DFUError) {
        guard duration > .zero, !stop.isRequested else { return }
        let clock = self.clock
        let stop = self.stop
        let deadline = clock.now.advanced(by: duration)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleep(until: deadline, tolerance: nil) }
            group.addTask { await stop.requested() }
            await group.next()
            group.cancelAll()
        }
        if Task.isCancelled { throw DFUError(.cancelled, "cancelled while waiting to reconnect") }
    }
}
