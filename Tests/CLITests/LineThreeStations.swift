import Batch
import DFUSimulator
import Foundation
import LineStore
import MCUbootImage
import MCUmgr
import Testing

/// The parts of LineCLITests' three-station run: the line, its run with one station killed, and the checks of what
/// it left (records, images per family, the simulator's link log, status and reports).
struct ThreeStationRun {
    var stations: [StationProcess]
    var killTime: Int

    /// The device's family by its address prefix (the profiles' base addresses).
    enum Family: String {
        case secure, legacy, smp

        init(_ address: String) {
            if address.hasPrefix("E1:5D:11") {
                self = .legacy
            } else if address.hasPrefix("E4:5A:3C") {
                self = .smp
            } else {
                self = .secure
            }
        }
    }

    static let counts = ["bracelet": 8, "sensor": 8, "sdk11-nrf51": 4, "smp-sensor": 4]
    static var deviceCount: Int { counts.values.reduce(1, +) }  // and the hostile bracelet

    /// The simulators (one process: its log names every link's process), the plan, three stations on one lease,
    /// station 2 killed once it finished a device and has others in flight; waits for the other two to end.
    static func start(_ line: BatchLine, database: TestLineDatabase) async throws -> ThreeStationRun {
        let hostile = try line.profile("bracelet", name: LineCLITests.hostileName, address: "C6:05:04:03:40:01", file: "hostile.json")
        try line.simulate(counts.keys.sorted().map { "\($0):\(counts[$0] ?? 0)" } + [hostile], ["--json"], speedup: 6)
        try await line.waitForDevices(deviceCount)
        let plan = try line.writeMixedPlan(expect: deviceCount, connections: 2)
        // Lease 8 s: a station stops itself when no heartbeat has reached the database for 0.6 of its lease, and on
        // a loaded machine (two CPU hogs beside the suite) 4 s leases saw a 2.4 s silence; the kill costs one lease.
        var stations: [StationProcess] = []
        for index in 1...3 {
            let state = line.state.appendingPathComponent("s\(index)")
            try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
            stations.append(try StationProcess(name: "s\(index)", plan: plan, database: database.url, state: state, lease: 8, in: line.directory))
        }
        let victim = stations[1]
        var killedAt: Int?
        for _ in 0..<12_000 where victim.process.isRunning {
            let finished = victim.count("finished")
            if finished >= 1, victim.count("started") > finished {
                kill(victim.pid, SIGKILL)
                killedAt = Int(Date().timeIntervalSince1970 * 1_000_000)
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let killTime = try #require(killedAt, "station 2 never had a device in flight after its first: \(victim.stderr)")
        _ = await victim.wait(timeout: 10)
        for station in [stations[0], stations[2]] {
            let status = await station.wait(timeout: 400)
            #expect(status == 0, "\(station.name) exit \(status.map(String.init) ?? "none"): \(station.stderr)\n\(station.events.suffix(5))")
        }
        return ThreeStationRun(stations: stations, killTime: killTime)
    }

    /// One final record per device, done or skipped, the Secure devices at the target version; the killed station's
    /// cut attempts were closed by the station that took each device over, with what the heartbeat stored.
    static func checkRecords(_ records: [DeviceRecord], _ attempts: [AttemptRecord], hostileName: String) {
        #expect(records.count == deviceCount)
        #expect(Set(records.map(\.address)).count == deviceCount)
        #expect(Set(records.map { Family($0.address) }) == [.secure, .legacy, .smp])
        #expect(records.contains { $0.name == hostileName }, "the markup name was recorded as the device gave it")
        // A device whose update the killed station's child completed just before the kill is found at the target
        // version by the station that takes it over, and recorded as skipped: it is never updated twice.
        for record in records {
            #expect(record.status == .done || record.status == .skipped, "\(record.address): \(record.status) \(record.error ?? "")")
            if Family(record.address) == .secure { #expect(record.versionAfter == 2, "\(record.address)") }
            let finals = attempts.filter { $0.address == record.address && ($0.result == .done || $0.result == .skipped) }
            #expect(finals.count == 1, "\(record.address): \(finals.map(\.result))")
            #expect(!attempts.contains { $0.address == record.address && $0.result == .running })
        }
        let cut = attempts.filter { $0.result == .interrupted }
        #expect(!cut.isEmpty && cut.allSatisfy { $0.station == "s2" }, "\(cut.map { "\($0.address) \($0.station ?? "-")" })")
        for attempt in cut {
            let later = attempts.filter { $0.address == attempt.address && $0.id > attempt.id }
            #expect(later.contains { ($0.result == .done || $0.result == .skipped) && $0.station != "s2" }, "\(attempt.address) was taken over")
            #expect(attempt.error?.contains("station s2 stopped renewing its claim") == true, "\(attempt.error ?? "-")")
            #expect(attempt.duration != nil, "\(attempt.address): a taken-over attempt has its duration")
        }
        #expect(Set(attempts.compactMap(\.station)) == ["s1", "s2", "s3"])
    }

    /// Every device runs its new image and completed exactly one update: the Secure and Legacy devices' application
    /// (its SHA-256 and the update counter), the SMP devices' active MCUboot image, confirmed, after one swap.
    static func checkImages(_ line: BatchLine, _ records: [DeviceRecord]) async throws {
        let braceletSHA = try await BatchLine.imageSHA("bracelet-app-v2.zip")
        let sensorSHA = try await BatchLine.imageSHA("sensor-app-v2.zip")
        let hrmSHA = try await BatchLine.imageSHA("sdk11-nrf51-app-v2.zip")
        let samples = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples")
        let smpHash = try #require(
            try MCUbootImage(bytes: Array(Data(contentsOf: samples.appendingPathComponent("smp-sensor-app-v2.bin")))).hashTLV)
        for record in records {
            switch Family(record.address) {
            case .smp:
                let state = await line.waitForSMPImage(record.address, hash: smpHash)
                let active = state?.images.first { $0.active }
                #expect(active?.hash == smpHash && active?.confirmed == true, "\(record.address) runs the MCUboot image, confirmed")
                #expect(state?.counters.swaps == 1, "\(record.address) swapped once: \(state.map { "\($0.counters)" } ?? "-")")
            case .legacy, .secure:
                let sha = Family(record.address) == .legacy ? hrmSHA : record.address.hasPrefix("C6") ? braceletSHA : sensorSHA
                let state = await line.waitForApplication(record.address, sha256: sha)
                #expect(state.map(BatchLine.applicationSHA) == sha, "\(record.address) runs the new image")
                #expect(BatchLine.updatesCompleted(state) == 1, "\(record.address) updated once")
            }
        }
    }

    /// The simulator's log: each connection's station (the station itself probes; its `bledfu flash` children
    /// have it as their parent). Per device the stations never alternate; a device changes station only from s2
    /// after its kill, or from a station whose adapter refused it a link (back-pressure, docs/batch.md: an attempt
    /// recorded with exit 21 or 22 and no try; the device keeps its place in the line and another station may take
    /// it).
    static func checkHandOvers(_ line: BatchLine, stations: [StationProcess], killTime: Int, attempts: [AttemptRecord]) {
        let pids = Dictionary(uniqueKeysWithValues: stations.map { (Int($0.pid), $0.name) })
        let links = LinkEvent.parse(line.simulators.map(\.stdout).joined(separator: "\n"))
        #expect(links.filter { $0.event == "connected" }.count >= 2 * (deviceCount - 1), "probe and flash links were logged")
        var byDevice: [String: [(station: String, micros: Int)]] = [:]
        for link in links where link.event == "connected" {
            let station = pids[link.pid] ?? link.parent.flatMap { pids[$0] } ?? "unknown pid \(link.pid) parent \(link.parent ?? -1)"
            byDevice[link.identity, default: []].append((station, link.micros))
        }
        #expect(byDevice.count == deviceCount)
        var handedOver = 0
        for (device, connections) in byDevice {
            let order = connections.sorted { $0.micros < $1.micros }
            #expect(order.allSatisfy { pids.values.contains($0.station) }, "\(device): \(order.map(\.station))")
            // The stations in connection order, repeats folded: each change of station justified, from s2 after its
            // kill or from a station whose adapter refused the device a link. A device may so come back to a station:
            // s3 refused it, s2 took it and was killed, s3 finished it (1 stress run of 43f15fa failed a rule that
            // forbade any return). No change without a reason, so no ping-pong.
            var runs: [(station: String, first: Int)] = []
            for connection in order where runs.last?.station != connection.station { runs.append((connection.station, connection.micros)) }
            for (from, to) in zip(runs, runs.dropFirst()) {
                let killed = from.station == "s2" && to.first > killTime
                let refused = attempts.contains {
                    $0.address == device && $0.station == from.station && [21, 22].contains($0.exitCode ?? 0)
                }
                if killed { handedOver += 1 }
                #expect(killed || refused, "\(device) left \(from.station) (\(from.first), the kill at \(killTime)) for \(to.station) with no refused link recorded")
            }
        }
        #expect(handedOver >= 1, "a device of the killed station was finished by another")
    }

    /// The line at a glance, and the reports for the line and for one station. Returns the number of devices done.
    static func checkStatusAndReports(_ database: TestLineDatabase, _ records: [DeviceRecord]) async throws -> Int {
        let total = deviceCount
        let status = try await CLIRunner.run(["line", "status", "--db", database.url])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("stations: 0 alive of 3"), "\(status.stdout)")
        let done = records.filter { $0.status == .done }.count
        #expect(status.stdout.contains("devices: \(total): done \(done), skipped \(total - done), failed 0, in flight 0, pending 0"), "\(status.stdout)")
        #expect(status.stdout.contains("yield 100.0 %"), "\(status.stdout)")
        #expect(!status.stdout.contains(database.base.password ?? "\u{0}"), "no password")
        let lineCSV = try await CLIRunner.run(["batch", "report", "--db", database.url])
        #expect(lineCSV.stdout.components(separatedBy: "\r\n").filter { !$0.isEmpty }.count == total + 1)
        let mine = try await CLIRunner.run(["batch", "report", "--db", database.url, "--station", "s1", "--format", "json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(mine.stdout.utf8)) as? [String: Any])
        let devices = try #require(object["devices"] as? [[String: Any]])
        #expect(devices.count == records.filter { $0.station == "s1" }.count && !devices.isEmpty)
        #expect(devices.allSatisfy { (($0["record"] as? [String: Any])?["station"] as? String) == "s1" })
        return done
    }
}

extension BatchLine {
    /// A plan with a class per family: the Secure DFU bracelets and sensors, the Legacy DFU SDK 11 heart-rate
    /// monitors, and the MCUmgr SMP sensors, found by discovery.
    func writeMixedPlan(expect: Int, connections: Int) throws -> String {
        let samples = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples").path
        let mcubootKey = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/keys/mcuboot-test-key-DO-NOT-USE.pub.pem").path
        let text = """
            adapters:
              - name: virtual:\(radio.path)
                connections: \(connections)
            classes:
              bracelet:
                package: \(samples)/bracelet-app-v2.zip
              sensor:
                package: \(samples)/sensor-app-v2.zip
              hrm:
                package: \(samples)/sdk11-nrf51-app-v2.zip
              smp:
                package: \(samples)/smp-sensor-app-v2.bin
            discover:
              duration: 30
              expect: \(expect)
              rules:
                - class: smp
                  name_prefix: SMP Sensor
                  service: 8D53DC1D-1DB7-4CD3-868B-8A527460AA84
                - class: bracelet
                  name_prefix: Bracelet
                  buttonless: true
                - class: sensor
                  name_prefix: Sensor
                  service: FE59
                - class: hrm
                  name_prefix: Nordic_HRM
            policies:
              retries: 1
              stop_after_failures: 10
            flash:
              keys: [\(FlashFixture.publicKey.path), \(mcubootKey)]
              reboot_delay: 0.1
              scan_timeout: 20
              timeout: 20

            """
        let url = directory.appendingPathComponent("line.yaml")
        try Data(text.utf8).write(to: url)
        return url.path
    }

    /// Waits (bounded, 30 s, without holding a thread) until the SMP device's active image is `hash`, confirmed, and
    /// the device is disconnected.
    func waitForSMPImage(_ address: String, hash: [UInt8]) async -> SMPDeviceState? {
        let path = status.appendingPathComponent(address.replacingOccurrences(of: ":", with: "-") + ".json").path
        var state: SMPDeviceState?
        await OffPool.poll(timeout: .seconds(30)) {
            state = FileManager.default.contents(atPath: path).flatMap { try? JSONDecoder().decode(SMPDeviceState.self, from: $0) }
            guard let active = state?.images.first(where: { $0.active }) else { return false }
            return active.hash == hash && active.confirmed && state?.connected == false
        }
        return state
    }
}
