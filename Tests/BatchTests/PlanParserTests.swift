import BLECore
import Foundation
import Testing

@testable import Batch

@Suite(.timeLimit(.minutes(5))) struct PlanParserTests {
    static let full = """
        # A line with two adapters.
        adapters:
          - name: hci0
            connections: 4
          - name: hci1
            connections: 2
          - name: hci1
        classes:
          bracelet:
            package: ../samples/bracelet-app-v2.zip
          sensor:
            package: /opt/fw/sensor-app-v2.zip
        devices:
          - address: C6:05:04:03:02:01
            class: bracelet
          - address: D2:C3:B4:A5:96:87
            class: sensor
            address_type: public
        discover:
          duration: 12.5
          expect: 16
          rules:
            - class: bracelet
              name_prefix: Bracelet
              service: FE59
              min_rssi: -70
              buttonless: true
            - class: sensor
              name_prefix: Sensor
        policies:
          retries: 2
          skip_at_target_version: false
          stop_after_failures: 5
        flash:
          mode: prn:8
          keys: [keys/line.pub.pem]
          scan_timeout: 5
          reboot_delay: 0.2
          reconnect_attempts: 3
          timeout: 4
          unique_bootloader_names: false
          service_uuid: 12340000-5678-9ABC-DEF0-123456789ABC
        """

    @Test func fullPlanParsesEveryField() throws {
        let plan = try PlanParser.parse(Self.full)
        #expect(plan.adapters.map(\.name) == ["hci0", "hci1", "hci1"])
        #expect(plan.adapters.map(\.label) == ["hci0", "hci1", "hci1#2"])
        // The third names no connections: `auto` (5 until its controller's limit is known).
        #expect(plan.adapters.map(\.connections) == [4, 2, BatchPlan.autoConnections])
        #expect(plan.adapters.map(\.auto) == [false, false, true])
        #expect(plan.totalConnections == 6 + BatchPlan.autoConnections)
        #expect(plan.classes.map(\.name) == ["bracelet", "sensor"])
        #expect(plan.deviceClass(named: "bracelet")?.package == "../samples/bracelet-app-v2.zip")
        #expect(plan.deviceClass(named: "bracelet")?.line == 10)
        #expect(plan.devices.count == 2)
        #expect(plan.devices[0].address == BluetoothAddress("C6:05:04:03:02:01"))
        #expect(plan.devices[0].addressType == .random)
        #expect(plan.devices[1].addressType == .public)
        #expect(plan.devices[1].line == 16)
        #expect(plan.discovery.duration == 12.5)
        #expect(plan.discovery.expect == 16)
        #expect(plan.discovery.rules.count == 2)
        let rule = plan.discovery.rules[0]
        #expect(rule.namePrefix == "Bracelet")
        #expect(rule.serviceUUID == BluetoothUUID(0xFE59))
        #expect(rule.minimumRSSI == -70)
        #expect(rule.buttonlessInAppMode)
        #expect(plan.discovery.rules[1].buttonlessInAppMode == false)
        #expect(plan.policies == BatchPlan.Policies(retries: 2, skipAtTargetVersion: false, stopAfterFailures: 5))
        #expect(plan.flash.mode == "prn:8")
        #expect(plan.flash.keys == ["keys/line.pub.pem"])
        #expect(plan.flash.scanTimeout == 5)
        #expect(plan.flash.rebootDelay == 0.2)
        #expect(plan.flash.reconnectAttempts == 3)
        #expect(plan.flash.timeout == 4)
        #expect(plan.flash.uniqueBootloaderNames == false)
        #expect(plan.flash.serviceUUID == "12340000-5678-9ABC-DEF0-123456789ABC")
    }

    /// `db:` (the batch log: an SQLite path or a line's postgres:// URL) and `line:` (the line's name in a shared
    /// database) are read as given; without them both are nil (the CLI's defaults apply).
    @Test func dbAndLineKeysNameTheStoreAndTheLine() throws {
        let text = """
            adapters: [{name: "virtual:/tmp/radio"}]
            classes: {bracelet: {package: app.zip}}
            devices: [{address: "C6:05:04:03:02:01", class: bracelet}]
            """
        let plan = try PlanParser.parse(text + "\ndb: postgres://line@db-host/line\nline: hall-2\n")
        #expect(plan.database == "postgres://line@db-host/line")
        #expect(plan.lineName == "hall-2")
        let plain = try PlanParser.parse(text)
        #expect(plain.database == nil && plain.lineName == nil)
        #expect(throws: PlanError.self) { try PlanParser.parse(text + "\nline: [a, b]\n") }
    }

    @Test func minimalPlanTakesTheDefaults() throws {
        let plan = try PlanParser.parse("""
            adapters: [{name: "virtual:/tmp/radio"}]
            classes: {bracelet: {package: app.zip}}
            devices: [{address: "C6:05:04:03:02:01", class: bracelet}]
            """)
        // `connections` absent is `auto`: the adapter's controller's limit once resolved (5 until then).
        #expect(plan.adapters == [BatchPlan.Adapter(name: "virtual:/tmp/radio", connections: 5, auto: true, line: 1)])
        #expect(plan.policies == BatchPlan.Policies())
        #expect(plan.policies.retries == 1 && plan.policies.skipAtTargetVersion && plan.policies.stopAfterFailures == nil)
        #expect(plan.flash == BatchPlan.FlashOptions())
        #expect(plan.discovery.rules.isEmpty)
    }

    @Test func connectionsAutoIsTheControllersLimitAndANumberAboveItIsRefused() throws {
        let plan = try PlanParser.parse("""
            adapters:
              - name: hci0
                connections: auto
              - name: "virtual:/tmp/radio"
              - name: hci2
                connections: 3
            classes: {bracelet: {package: app.zip}}
            devices: [{address: "C6:05:04:03:02:01", class: bracelet}]
            """)
        #expect(plan.adapters.map(\.auto) == [true, true, false])
        // hci0: its controller unknown (5 to start with); the virtual adapter's controller carries 9; hci2 carries
        // 5: 3 stays.
        let resolved = try plan.resolvingAuto { $0.name.hasPrefix("virtual:") ? 9 : $0.name == "hci0" ? nil : 5 }
        #expect(resolved.adapters.map(\.connections) == [BatchPlan.autoConnections, 9, 3])
        // 8 on a controller that carries 5: refused, naming the adapter's line and the limit.
        let tooMany = try PlanParser.parse("""
            adapters:
              - name: hci0
              - name: hci1
                connections: 8
            classes: {bracelet: {package: app.zip}}
            devices: [{address: "C6:05:04:03:02:01", class: bracelet}]
            """)
        do {
            _ = try tooMany.resolvingAuto { _ in 5 }
            Issue.record("connections 8 on a 5-link controller was accepted")
        } catch {
            #expect(error.code == .tooManyConnections)
            #expect(error.line == 3)
            #expect(error.description == "line 3: adapter hci1: connections 8 is more than its controller carries (5 links): give at most 5, or connections: auto")
        }
    }

    /// Each bad plan: the text, the line the error must name, the code, and a word the reason must contain.
    static let bad: [(String, Int?, PlanError.Code, String)] = [
        ("adapters:\n  - name: hci0\n    connections: [4\nclasses: {}\n", 4, .syntax, "YAML"),
        ("adapters:\n  - name: hci0\nclasses:\n  b:\n    package: a.zip\n    pakage: b.zip\ndevices: []\n", 6, .unknownKey, "pakage"),
        ("adapters:\n  - name: hci0\n    connections: 0\nclasses: {b: {package: a.zip}}\n", 3, .badValue, "between 1 and 64"),
        ("adapters:\n  - name: usb0\nclasses: {b: {package: a.zip}}\n", 2, .badValue, "hciN"),
        ("classes: {b: {package: a.zip}}\n", 1, .missingKey, "adapters"),
        (
            "adapters: [{name: hci0}]\nclasses: {b: {package: a.zip}}\ndevices:\n  - address: C6:05:04:03:02\n    class: b\n", 4,
            .badValue, "six hex bytes"
        ),
        (
            "adapters: [{name: hci0}]\nclasses: {b: {package: a.zip}}\ndevices:\n  - address: C6:05:04:03:02:01\n    class: watch\n", 4,
            .unknownClass, "watch"
        ),
        (
            "adapters: [{name: hci0}]\nclasses: {b: {package: a.zip}}\ndiscover:\n  rules:\n    - class: b\n      min_rssi: -300\n", 6,
            .badValue, "min_rssi"
        ),
        (
            "adapters: [{name: hci0}]\nclasses: {b: {package: a.zip}}\ndiscover:\n  rules:\n    - class: b\n      service: FE5\n", 6,
            .badValue, "service UUID"
        ),
        ("adapters: [{name: hci0}]\nclasses: {b: {package: a.zip}}\n", 1, .missingKey, "names no devices"),
        (
            "adapters: [{name: hci0}]\nclasses: {b: {package: a.zip}}\ndevices:\n  - {address: C6:05:04:03:02:01, class: b}\n"
                + "  - {address: c6:05:04:03:02:01, class: b}\n", 5, .badValue, "line 4"
        ),
        ("adapters: [{name: hci0}]\nclasses: {b: {package: a.zip}}\ndevices: []\npolicies:\n  retries: lots\n", 5, .badValue, "whole number"),
        ("adapters: [{name: hci0}]\nclasses: {b: {package: a.zip}}\ndevices: []\npolicies:\n  skip_at_target_version: maybe\n", 5, .badValue, "true or false"),
        ("adapters: [{name: hci0}]\nclasses: {b: {package: a.zip}}\ndevices: []\nflash:\n  service_uuid: FE5G\n", 5, .badValue, "not a UUID"),
        ("", 1, .missingKey, "empty"),
        ("- just\n- a list\n", 1, .badValue, "mapping"),
    ]

    @Test(arguments: bad.indices) func badPlanNamesTheLineAndTheReason(_ index: Int) {
        let (text, line, code, word) = Self.bad[index]
        do {
            _ = try PlanParser.parse(text)
            Issue.record("plan \(index) was accepted")
        } catch {
            #expect(error.code == code, "plan \(index): \(error)")
            #expect(error.line == line, "plan \(index): \(error)")
            #expect(error.reason.contains(word), "plan \(index): \(error)")
            if let line { #expect(error.description.hasPrefix("line \(line): ")) }
        }
    }
}

@Suite(.timeLimit(.minutes(5))) struct ExamplePlanTests {
    /// Firmware/plans/line.yaml (the example in docs/batch.md) stays a valid plan.
    @Test func theExamplePlanParses() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Firmware/plans/line.yaml")
        let plan = try PlanParser.parse(try String(contentsOf: url, encoding: .utf8))
        #expect(plan.adapters.map(\.name) == ["hci0", "hci1"])
        #expect(plan.totalConnections == 8)
        #expect(plan.classes.map(\.name) == ["bracelet", "sensor"])
        #expect(plan.discovery.rules.count == 2)
        #expect(plan.discovery.expect == 16)
        #expect(plan.policies.stopAfterFailures == 5)
    }
}
