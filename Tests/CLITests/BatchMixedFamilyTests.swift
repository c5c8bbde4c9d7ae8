import DFUSimulator
import Foundation
import MCUbootImage
import MCUmgr
import Testing

/// One batch plan, two families: Secure DFU sensors and MCUmgr SMP sensors on one radio, each class with its
/// package (a Nordic zip, an MCUboot image), every device ending at its new image.
@Suite(.timeLimit(.minutes(10))) struct BatchMixedFamilyTests {
    @Test func aPlanMixesSecureDFUAndSMPClasses() async throws {
        let line = try BatchLine()
        defer { line.cleanUp() }
        try line.simulate(["sensor:2", "smp-sensor:2"], speedup: 20)
        try await line.waitForDevices(4)
        let samples = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples").path
        let mcubootKey = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/keys/mcuboot-test-key-DO-NOT-USE.pub.pem").path
        let text = """
            adapters:
              - name: virtual:\(line.radio.path)
                connections: 4
            classes:
              sensor:
                package: \(samples)/sensor-app-v2.zip
              smp:
                package: \(samples)/smp-sensor-app-v2.bin
            discover:
              duration: 30
              expect: 4
              rules:
                - class: smp
                  name_prefix: SMP Sensor
                  service: 8D53DC1D-1DB7-4CD3-868B-8A527460AA84
                - class: sensor
                  name_prefix: Sensor
                  service: FE59
            policies:
              retries: 1
            flash:
              keys: [\(FlashFixture.publicKey.path), \(mcubootKey)]
              reboot_delay: 0.1
              scan_timeout: 30
              timeout: 30

            """
        let plan = line.directory.appendingPathComponent("mixed.yaml")
        try Data(text.utf8).write(to: plan)

        let result = try await CLIRunner.run(["batch", plan.path, "--json"] + line.batchArguments, timeout: 300)
        #expect(result.status == 0, "exit \(result.status): \(result.stderr)\n\(result.stdout.suffix(3000))")
        let report = try await line.report()
        #expect(report.count == 4)
        for (address, entry) in report {
            #expect(entry.record["status"] as? String == "done", "\(address): \(entry.record)")
        }
        // The Secure DFU sensors run the zip's application, the SMP sensors the MCUboot image, confirmed.
        let sensorSHA = try await BatchLine.imageSHA("sensor-app-v2.zip")
        let smpHash = try #require(
            try MCUbootImage(bytes: Array(Data(contentsOf: URL(fileURLWithPath: "\(samples)/smp-sensor-app-v2.bin")))).hashTLV)
        var smpDone = 0
        for (address, _) in report where address.hasPrefix("E4") {
            let path = line.status.appendingPathComponent(address.replacingOccurrences(of: ":", with: "-") + ".json").path
            var state: SMPDeviceState?
            for _ in 0..<3000 {
                state = FileManager.default.contents(atPath: path).flatMap { try? JSONDecoder().decode(SMPDeviceState.self, from: $0) }
                if state?.images.first(where: { $0.active })?.confirmed == true, state?.connected == false { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            let active = state?.images.first { $0.active }
            #expect(active?.hash == smpHash, "\(address) runs the MCUboot image")
            #expect(active?.confirmed == true)
            smpDone += 1
        }
        #expect(smpDone == 2)
        for (address, _) in report where !address.hasPrefix("E4") {
            let state = await line.waitForApplication(address, sha256: sensorSHA)
            #expect(state.map(BatchLine.applicationSHA) == sensorSHA, "\(address) runs the new image")
        }

        // A Secure DFU mode in a mixed plan is refused for the SMP class, before anything connects.
        let prn = text.replacingOccurrences(of: "  reboot_delay: 0.1", with: "  reboot_delay: 0.1\n  mode: prn:8")
        let prnPlan = line.directory.appendingPathComponent("prn.yaml")
        try Data(prn.utf8).write(to: prnPlan)
        let refused = try await CLIRunner.run(["batch", prnPlan.path] + line.batchArguments, timeout: 120)
        #expect(refused.status == 51, "\(refused.stderr)")
        #expect(refused.stderr.contains("class 'smp'") && refused.stderr.contains("not an SMP mode"), "\(refused.stderr)")
    }
}
