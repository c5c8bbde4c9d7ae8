import BLECore
import DFUPackage
import DFUSimulator
import Foundation
import GATT
import LegacyDFU
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(5))) struct DetectionTests {
    static let gap = BluetoothUUID(0x1800), gatt = BluetoothUUID(0x1801), dis = BluetoothUUID(0x180A)
    static let hrs = BluetoothUUID(0x180D), battery = BluetoothUUID(0x180F)
    static let dfu = LegacyDFUUUID.service

    /// Rows from the iOS and Android libraries' rules (legacy-dfu.md §8.4) and the real firmwares' tables.
    @Test func modes() {
        let v01 = LegacyDFUVersion.application, v08 = LegacyDFUVersion.sdk11
        // SDK 11 ble_app_hrs: DFU Version 0.1 → application with the buttonless entry.
        #expect(LegacyDetection.mode(services: [Self.gap, Self.gatt, Self.hrs, Self.dis, Self.dfu], version: v01) == .application(version: v01))
        // SDK 11 bootloader: GAP, GATT, DFU, version 0.8.
        #expect(LegacyDetection.mode(services: [Self.gap, Self.gatt, Self.dfu], version: v08) == .bootloader(version: v08))
        // Adafruit bootloader: also Device Information.
        #expect(LegacyDetection.mode(services: [Self.gap, Self.gatt, Self.dis, Self.dfu], version: v08) == .bootloader(version: v08))
        // InfiniTime: 0.8 among the watch's own services.
        #expect(
            LegacyDetection.mode(services: [Self.gap, Self.gatt, Self.dis, Self.hrs, Self.battery, Self.dfu], version: v08)
                == .applicationService(version: v08))
        // SDK <= 6.1 bootloader: no DFU Version, nothing but the bootloader's services.
        #expect(LegacyDetection.mode(services: [Self.gap, Self.gatt, Self.dfu], version: nil) == .bootloader(version: nil))
        // No DFU Version but other services (Android: more than 3), or no Packet characteristic (iOS): application.
        #expect(LegacyDetection.mode(services: [Self.gap, Self.gatt, Self.hrs, Self.dfu], version: nil) == .application(version: nil))
        #expect(LegacyDetection.mode(services: [Self.gap, Self.gatt, Self.dfu], version: nil, hasPacket: false) == .application(version: nil))
        // No Legacy DFU service at all: not this family (a Secure DFU device has FE59).
        #expect(LegacyDetection.mode(services: [Self.gap, Self.gatt, BluetoothUUID(0xFE59)], version: nil) == nil)
    }

    /// The engine's settings per mode: InfiniTime's service gets no Report Received Image Size.
    @Test func configuration() {
        var settings = LegacyDFUConfiguration()
        LegacyDetection.configure(&settings, for: .applicationService(version: .sdk11))
        #expect(!settings.checkReceivedSize && settings.deviceVersion == .sdk11)
        var old = LegacyDFUConfiguration()
        LegacyDetection.configure(&old, for: .bootloader(version: nil))
        #expect(old.checkReceivedSize && old.deviceVersion == nil)
    }

    /// After the jump: the same address first (peer data), then address + 1; an application without a DFU Version
    /// (SDK <= 6): address + 1 first (iOS newAddressExpected). The LSB is incremented without carry.
    @Test func bootloaderLocation() throws {
        let address = try #require(BluetoothAddress("C0:00:00:00:00:FF"))
        let plusOne = try #require(BluetoothAddress("C0:00:00:00:00:00"))
        #expect(LegacyBootloaderLocation.afterJump(from: address, version: .application).addresses == [address, plusOne])
        #expect(LegacyBootloaderLocation.afterJump(from: address, version: nil).addresses == [plusOne, address])
        #expect(LegacyBootloaderLocation.afterReset(of: address).addresses == [plusOne, address])
        #expect(LegacyBootloaderLocation.afterJump(from: address, version: .application).names == ["DfuTarg", "AdaDFU"])
    }
}

@Suite(.timeLimit(.minutes(5))) struct JournalAndKillTests {
    @Test func journalCodingAndSummary() throws {
        var journal = LegacyJournal()
        journal.recordRestart(part: 0, error: LegacyDFUError(.disconnected, "link lost after 4000 of 6000 bytes"), bytesSent: 4000)
        journal.recordRestart(part: 0, error: LegacyDFUError(.bytesLost, "the device refused a packet"), bytesSent: 1200)
        journal.partInstalled(0)
        let data = try JSONEncoder().encode(journal)
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains("\"part_index\":1") && text.contains("\"bytes_resent\":4000"))
        #expect(try JSONDecoder().decode(LegacyJournal.self, from: data) == journal)
        #expect(journal.summary == "restarted 2 times, 5200 bytes sent again (link lost ×1, packets lost ×1)")
        #expect(LegacyJournal().summary == nil)
        // Per part (the result's line for each part), and the reset address kept across runs.
        var two = journal
        two.recordRestart(part: 1, error: LegacyDFUError(.deviceReset, "Start DFU refused: invalid state"), bytesSent: 300)
        two.resetAt = "D4:CA:6E:11:22:01"
        #expect(two.summary(of: 1) == "restarted once, 300 bytes sent again (device busy with an earlier transfer ×1)")
        #expect(two.summary(of: 0) == journal.summary)
        #expect(two.summary(of: 2) == nil)
        let stored = try JSONEncoder().encode(two)
        #expect(String(decoding: stored, as: UTF8.self).contains("\"reset_at\":\"D4:CA:6E:11:22:01\""))
        #expect(try JSONDecoder().decode(LegacyJournal.self, from: stored) == two)
    }

    /// The restart policy: five restarts of a part at most, two failed validations, no restart for a refusal.
    @Test func restartPolicy() {
        let policy = LegacyRestartPolicy()
        var journal = LegacyJournal()
        let lost = LegacyDFUError(.disconnected, "link lost")
        for _ in 0..<5 {
            journal.recordRestart(part: 0, error: lost, bytesSent: 10)
            #expect(policy.verdict(journal, part: 0, after: lost) == nil)
        }
        journal.recordRestart(part: 0, error: lost, bytesSent: 10)
        #expect(policy.verdict(journal, part: 0, after: lost)?.code == .gaveUp)
        // Another part has its own count.
        #expect(policy.verdict(journal, part: 1, after: lost) == nil)
        let refused = LegacyDFUError(.remote, "Start DFU (0x01) refused: data size exceeds limit (0x04)")
        #expect(policy.verdict(LegacyJournal(), part: 0, after: refused) == refused)
    }

    /// Kills and the resets of a device still busy after one do not count: after three killed runs, each followed by
    /// the reset of the busy bootloader, five lost links are still within the bound and a sixth ends the update (the fault campaign's Legacy runs gave up after 6 "restarts" that were 2 kills, 3 busy resets and a
    /// lost link).
    @Test func killsAndBusyResetsDoNotCount() {
        let policy = LegacyRestartPolicy()
        var journal = LegacyJournal()
        let busy = LegacyDFUError(.deviceReset, LegacyDFUStateMachine.busyReason, status: .invalidState)
        let lost = LegacyDFUError(.disconnected, "link lost")
        for _ in 0..<3 {
            journal.beginAttempt(part: 0)
            journal.beginAttempt(part: 0)  // the next run finds the killed run's attempt open
            journal.recordRestart(part: 0, error: busy, bytesSent: 12)
            #expect(policy.verdict(journal, part: 0, after: busy) == nil)
        }
        #expect(journal.restarts.map(\.code).filter { $0 == "killed" }.count == 3)
        for _ in 0..<5 {
            journal.recordRestart(part: 0, error: lost, bytesSent: 100)
            #expect(policy.verdict(journal, part: 0, after: lost) == nil)
        }
        journal.recordRestart(part: 0, error: lost, bytesSent: 100)
        #expect(policy.verdict(journal, part: 0, after: lost)?.code == .gaveUp)
    }
    // A killed tool and its rerun: `LegacyUpdaterTests.killThenRerun` (the updater, its journal files).
}

/// Firmware/*.json with `"family": "legacy"` are the reference profiles, field for field.
@Suite(.timeLimit(.minutes(5))) struct LegacyProfileFileTests {
    static let firmware = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Firmware")

    @Test(arguments: ["sdk11-nrf51", "sdk11-nrf52", "adafruit-feather52832", "adafruit-feather52840", "pinetime", "sdk6-nrf51"])
    func profileFile(name: String) throws {
        let data = try Data(contentsOf: Self.firmware.appendingPathComponent("\(name).json"))
        let profile = try JSONDecoder().decode(LegacyDeviceProfile.self, from: data)
        #expect(profile.family == "legacy")
        let reference: LegacyDeviceProfile =
            switch name {
            case "sdk11-nrf51": .sdk11NRF51(address: profile.address)
            case "sdk11-nrf52": .sdk11NRF52(address: profile.address)
            case "adafruit-feather52832": .adafruitNRF52832(address: profile.address)
            case "adafruit-feather52840": .adafruitNRF52840(address: profile.address)
            case "pinetime": .pineTime(address: profile.address)
            default: .sdk6NRF51(address: profile.address)
            }
        #expect(profile == reference)
    }
}
