import ATT
import BLECore
import DFUSimulator
import Foundation
import Testing

@Suite("Link model and profiles", .timeLimit(.minutes(5)))
struct LinkModelTests {
    func model(_ phy: String, ll: Int, ci: Double, n: Int = 1000, encrypted: Bool = false) -> LinkModel {
        LinkModel(
            link: LinkParameters(
                phy: phy, llDataLength: ll, maxMTU: 247, connectionIntervalMs: ci, packetsPerEvent: n,
                encrypted: encrypted),
            flash: FlashParameters())
    }

    @Test("LL PDU and cycle times match linux-ble.md §4.1")
    func pduTimes() {
        let m1 = model("1M", ll: 27, ci: 30)
        #expect(m1.pduMicros(payload: 0) == 80)
        #expect(m1.pduMicros(payload: 27) == 296)
        #expect(m1.cycleMicros(payload: 27) == 676)
        #expect(m1.cycleMicros(payload: 251) == 2468)
        let m2 = model("2M", ll: 251, ci: 7.5)
        #expect(m2.pduMicros(payload: 0) == 44)
        #expect(m2.pduMicros(payload: 251) == 1048)
        #expect(m2.cycleMicros(payload: 251) == 1392)
        let enc = model("1M", ll: 27, ci: 30, encrypted: true)
        #expect(enc.cycleMicros(payload: 27) == 708)  // +32 µs
    }

    @Test("Write-without-response ceilings match the appendix C table (kB/s, one decimal)")
    func airCeilings() {
        func kB(_ m: LinkModel) -> Double { (m.ceiling().airWriteWithoutResponse / 100).rounded() / 10 }
        #expect(kB(model("1M", ll: 27, ci: 30)) == 36.6)  // 45 LL per event, 10 fragments per PDU
        #expect(kB(model("1M", ll: 251, ci: 7.5)) == 97.6)  // 3 per event
        #expect(kB(model("2M", ll: 251, ci: 7.5)) == 162.7)  // 5 per event
        #expect(kB(model("2M", ll: 251, ci: 30)) == 170.8)  // 21 per event
        // A controller cap of N packets per event: Θ = N × (MTU − 3) / CI.
        #expect(kB(model("1M", ll: 251, ci: 15, n: 2)) == 32.5)
    }

    @Test("Write-with-response ceiling is one MTU per round trip; flash bounds both")
    func responseAndFlash() {
        let m = model("2M", ll: 251, ci: 7.5)
        let ceiling = m.ceiling()
        #expect((ceiling.airWriteWithResponse / 100).rounded() / 10 == 16.3)  // 244 B / 15 ms
        // 4096 B per (1024 × 41 µs + 85 ms) ≈ 32.3 kB/s.
        #expect((ceiling.flash / 100).rounded() / 10 == 32.3)
        #expect(ceiling.writeWithoutResponse == ceiling.flash)
        #expect(ceiling.writeWithResponse == ceiling.airWriteWithResponse)
    }

    static let firmwareDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Firmware")

    static func load(_ name: String) throws -> DeviceProfile {
        let data = try Data(contentsOf: firmwareDirectory.appendingPathComponent(name))
        return try JSONDecoder().decode(DeviceProfile.self, from: data)
    }

    @Test("Firmware/bracelet.json: SDK 15.3, S132 6.1.1, no bonds, 27-byte LL, shallow flash queue")
    func bracelet() throws {
        let profile = try Self.load("bracelet.json")
        #expect(profile.commandObjectMaxSize == 512)
        #expect(profile.softDeviceFWID == 0xB7)
        #expect(profile.buttonless == .unbonded)
        #expect(!profile.saveProgress)
        #expect(profile.link.llDataLength == 27)
        #expect(profile.flash.queueDepth == 2)
        let ceiling = LinkModel(profile: profile).ceiling()
        // 6 LL PDUs per 30 ms event, 10 fragments per 247-byte PDU: 244 × 200 / 10 = 4.88 kB/s.
        #expect((ceiling.writeWithoutResponse / 10).rounded() == 488)
    }

    @Test("Firmware/sensor.json: SDK 17.1, S140 7.2.0, bonded, 2M + DLE, save_progress; JSON round trip")
    func sensor() throws {
        let profile = try Self.load("sensor.json")
        #expect(profile.softDeviceFWID == 0x0100)
        #expect(profile.buttonless == .bonded)
        #expect(profile.saveProgress)
        #expect(LinkModel(profile: profile).llPacketsPerEvent == 5)
        let again = try JSONDecoder().decode(DeviceProfile.self, from: JSONEncoder().encode(profile))
        #expect(again == profile)
    }
}
