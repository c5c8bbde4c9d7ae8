import BLECore
import Yams

/// Reads a plan from YAML (docs/batch.md, "Plan format"). Every error names the line and the reason; unknown keys
/// are errors (a typo must not silently drop a policy).
public enum PlanParser {
    public static func parse(_ text: String) throws(PlanError) -> BatchPlan {
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            throw syntaxError(error)
        } catch {
            throw PlanError(.syntax, line: nil, "\(error)")
        }
        guard let root else { throw PlanError(.missingKey, line: 1, "the plan is empty") }
        let top = try Fields(root, what: "the plan")
        try top.allow(["adapters", "classes", "devices", "discover", "policies", "flash", "db", "line"])

        let adapters = try parseAdapters(try top.require("adapters"))
        let classes = try parseClasses(try top.require("classes"))
        var plan = BatchPlan(adapters: adapters, classes: classes)
        if let node = top["devices"] { plan.devices = try parseDevices(node) }
        if let node = top["discover"] { plan.discovery = try parseDiscovery(node) }
        if let node = top["policies"] { plan.policies = try parsePolicies(node) }
        if let node = top["flash"] { plan.flash = try parseFlash(node) }
        plan.database = try top.string("db")
        plan.lineName = try top.string("line")

        let known = Set(classes.map(\.name))
        for device in plan.devices where !known.contains(device.className) {
            throw PlanError(.unknownClass, line: device.line, "device \(device.address) names class '\(device.className)', which the plan does not define")
        }
        for rule in plan.discovery.rules where !known.contains(rule.className) {
            throw PlanError(.unknownClass, line: rule.line, "discovery rule names class '\(rule.className)', which the plan does not define")
        }
        if plan.devices.isEmpty && plan.discovery.rules.isEmpty {
            throw PlanError(.missingKey, line: top.line, "the plan names no devices: give 'devices' or 'discover.rules'")
        }
        var seen: [BluetoothAddress: Int] = [:]
        for device in plan.devices {
            if let first = seen[device.address] {
                throw PlanError(.badValue, line: device.line, "device \(device.address) is already listed on line \(first)")
            }
            seen[device.address] = device.line
        }
        return plan
    }

    static func syntaxError(_ error: YamlError) -> PlanError {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            let detail = context.map { "\($0.text) " } ?? ""
            return PlanError(.syntax, line: mark.line, "not valid YAML: \(detail)\(problem)")
        default:
            return PlanError(.syntax, line: nil, "not valid YAML: \(error)")
        }
    }

    static func parseAdapters(_ node: Node) throws(PlanError) -> [BatchPlan.Adapter] {
        let items = try sequence(node, what: "adapters")
        guard !items.isEmpty else { throw PlanError(.badValue, line: line(node), "'adapters' lists no adapter") }
        var adapters: [BatchPlan.Adapter] = []
        var counts: [String: Int] = [:]
        for item in items {
            let fields = try Fields(item, what: "an adapter")
            try fields.allow(["name", "connections"])
            let name = try fields.string("name", required: true) ?? ""
            guard name == "any" || name.hasPrefix("virtual:") && name.count > 8
                || name.hasPrefix("hci") && Int(name.dropFirst(3)) != nil
            else {
                throw PlanError(.badValue, line: fields.line(of: "name"), "adapter '\(name)': expected hciN, any or virtual:DIR")
            }
            // `connections: auto` (also when absent): the adapter's controller's own limit (docs/batch.md).
            let auto = try fields.scalar("connections").map { $0.string == "auto" } ?? true
            let connections = auto ? BatchPlan.autoConnections : try fields.int("connections", in: 1...64) ?? 1
            counts[name, default: 0] += 1
            let label = counts[name, default: 1] > 1 ? "\(name)#\(counts[name, default: 1])" : name
            adapters.append(
                BatchPlan.Adapter(name: name, connections: connections, auto: auto, label: label, line: fields.line))
        }
        return adapters
    }

    static func parseClasses(_ node: Node) throws(PlanError) -> [BatchPlan.DeviceClass] {
        guard let mapping = node.mapping, !mapping.isEmpty else {
            throw PlanError(.badValue, line: line(node), "'classes' must map class names to { package: FILE }")
        }
        var classes: [BatchPlan.DeviceClass] = []
        for (key, value) in mapping {
            guard let name = key.string, !name.isEmpty else {
                throw PlanError(.badValue, line: line(key), "a class name must be a string")
            }
            let fields = try Fields(value, what: "class '\(name)'")
            try fields.allow(["package"])
            let package = try fields.string("package", required: true) ?? ""
            classes.append(BatchPlan.DeviceClass(name: name, package: package, line: fields.line(of: "package")))
        }
        return classes
    }

    static func parseDevices(_ node: Node) throws(PlanError) -> [BatchPlan.ExplicitDevice] {
        var devices: [BatchPlan.ExplicitDevice] = []
        for item in try sequence(node, what: "devices") {
            let fields = try Fields(item, what: "a device")
            try fields.allow(["address", "class", "address_type"])
            let text = try fields.string("address", required: true) ?? ""
            guard let address = BluetoothAddress(text) else {
                throw PlanError(.badValue, line: fields.line(of: "address"), "bad address '\(text)': expected six hex bytes like C0:FF:EE:00:00:01")
            }
            let className = try fields.string("class", required: true) ?? ""
            var type = AddressType.random
            if let typeText = try fields.string("address_type") {
                guard let parsed = AddressType(rawValue: typeText) else {
                    throw PlanError(.badValue, line: fields.line(of: "address_type"), "address_type must be public or random, not '\(typeText)'")
                }
                type = parsed
            }
            devices.append(BatchPlan.ExplicitDevice(address: address, addressType: type, className: className, line: fields.line))
        }
        return devices
    }

    static func parseDiscovery(_ node: Node) throws(PlanError) -> BatchPlan.Discovery {
        let fields = try Fields(node, what: "'discover'")
        try fields.allow(["duration", "expect", "rules"])
        var discovery = BatchPlan.Discovery()
        discovery.duration = try fields.double("duration", in: 0.1...3600) ?? discovery.duration
        discovery.expect = try fields.int("expect", in: 1...100_000)
        for item in try sequence(try fields.require("rules"), what: "discover.rules") {
            let rule = try Fields(item, what: "a discovery rule")
            try rule.allow(["class", "name_prefix", "service", "min_rssi", "buttonless"])
            var parsed = DiscoveryRule(className: try rule.string("class", required: true) ?? "", line: rule.line)
            parsed.namePrefix = try rule.string("name_prefix")
            if let text = try rule.string("service") {
                guard let uuid = BluetoothUUID(text) else {
                    throw PlanError(.badValue, line: rule.line(of: "service"), "bad service UUID '\(text)' (FE59 or 8EC90001-F315-…)")
                }
                parsed.serviceUUID = uuid
            }
            parsed.minimumRSSI = try rule.int("min_rssi", in: -127...20).map { Int8($0) }
            parsed.buttonlessInAppMode = try rule.bool("buttonless") ?? false
            discovery.rules.append(parsed)
        }
        return discovery
    }

    static func parsePolicies(_ node: Node) throws(PlanError) -> BatchPlan.Policies {
        let fields = try Fields(node, what: "'policies'")
        try fields.allow(["retries", "skip_at_target_version", "stop_after_failures"])
        var policies = BatchPlan.Policies()
        policies.retries = try fields.int("retries", in: 0...20) ?? policies.retries
        policies.skipAtTargetVersion = try fields.bool("skip_at_target_version") ?? policies.skipAtTargetVersion
        policies.stopAfterFailures = try fields.int("stop_after_failures", in: 1...100_000)
        return policies
    }

    static func parseFlash(_ node: Node) throws(PlanError) -> BatchPlan.FlashOptions {
        let fields = try Fields(node, what: "'flash'")
        try fields.allow([
            "mode", "keys", "scan_timeout", "reboot_delay", "reconnect_attempts", "timeout", "unique_bootloader_names",
            "stall_timeout", "service_uuid",
        ])
        var flash = BatchPlan.FlashOptions()
        flash.mode = try fields.string("mode") ?? flash.mode
        if let keys = fields["keys"] {
            flash.keys = try sequence(keys, what: "flash.keys").map { key throws(PlanError) in
                guard let text = key.string, key.scalar != nil else {
                    throw PlanError(.badValue, line: line(key), "flash.keys lists PEM file paths")
                }
                return text
            }
        }
        flash.scanTimeout = try fields.double("scan_timeout", in: 0.1...600) ?? flash.scanTimeout
        flash.rebootDelay = try fields.double("reboot_delay", in: 0...60) ?? flash.rebootDelay
        flash.reconnectAttempts = try fields.int("reconnect_attempts", in: 0...100) ?? flash.reconnectAttempts
        flash.timeout = try fields.double("timeout", in: 0.1...3600) ?? flash.timeout
        flash.uniqueBootloaderNames = try fields.bool("unique_bootloader_names") ?? flash.uniqueBootloaderNames
        flash.stallTimeout = try fields.double("stall_timeout", in: 1...3600) ?? flash.stallTimeout
        if let uuid = try fields.string("service_uuid") {
            guard BluetoothUUID(uuid) != nil else {
                throw PlanError(.badValue, line: fields.line(of: "service_uuid"), "flash.service_uuid: '\(uuid)' is not a UUID")
            }
            flash.serviceUUID = uuid
        }
        return flash
    }

    static func sequence(_ node: Node, what: String) throws(PlanError) -> [Node] {
        guard let sequence = node.sequence else { throw PlanError(.badValue, line: line(node), "'\(what)' must be a list") }
        return Array(sequence)
    }

    static func line(_ node: Node) -> Int? { node.mark?.line }
}

/// A YAML mapping with line-aware typed getters.
struct Fields {
    let mapping: Node.Mapping
    let line: Int
    let what: String

    init(_ node: Node, what: String) throws(PlanError) {
        guard let mapping = node.mapping else {
            throw PlanError(.badValue, line: node.mark?.line, "\(what) must be a mapping of keys to values")
        }
        self.mapping = mapping
        self.line = node.mark?.line ?? 0
        self.what = what
    }

    subscript(key: String) -> Node? { mapping.first { $0.key.string == key }?.value }

    func line(of key: String) -> Int { mapping.first { $0.key.string == key }?.value.mark?.line ?? line }

    func allow(_ keys: Set<String>) throws(PlanError) {
        for (key, _) in mapping {
            let name = key.string ?? "?"
            guard keys.contains(name) else {
                throw PlanError(.unknownKey, line: key.mark?.line ?? line, "unknown key '\(name)' in \(what) (expected: \(keys.sorted().joined(separator: ", ")))")
            }
        }
    }

    func require(_ key: String) throws(PlanError) -> Node {
        guard let node = self[key] else { throw PlanError(.missingKey, line: line, "\(what) needs '\(key)'") }
        return node
    }

    func scalar(_ key: String) throws(PlanError) -> Node.Scalar? {
        guard let node = self[key] else { return nil }
        guard let scalar = node.scalar else { throw PlanError(.badValue, line: line(of: key), "'\(key)' must be a single value") }
        return scalar
    }

    func string(_ key: String, required: Bool = false) throws(PlanError) -> String? {
        guard let scalar = try scalar(key) else {
            if required { throw PlanError(.missingKey, line: line, "\(what) needs '\(key)'") }
            return nil
        }
        guard !scalar.string.isEmpty else { throw PlanError(.badValue, line: line(of: key), "'\(key)' is empty") }
        return scalar.string
    }

    func int(_ key: String, in range: ClosedRange<Int>) throws(PlanError) -> Int? {
        guard let node = self[key] else { return nil }
        guard let value = node.int else { throw PlanError(.badValue, line: line(of: key), "'\(key)' must be a whole number") }
        guard range.contains(value) else {
            throw PlanError(.badValue, line: line(of: key), "'\(key)' must be between \(range.lowerBound) and \(range.upperBound) (got \(value))")
        }
        return value
    }

    func double(_ key: String, in range: ClosedRange<Double>) throws(PlanError) -> Double? {
        guard let node = self[key] else { return nil }
        guard let value = node.float ?? node.int.map(Double.init) else {
            throw PlanError(.badValue, line: line(of: key), "'\(key)' must be a number")
        }
        guard range.contains(value) else {
            throw PlanError(.badValue, line: line(of: key), "'\(key)' must be between \(range.lowerBound) and \(range.upperBound) (got \(value))")
        }
        return value
    }

    func bool(_ key: String) throws(PlanError) -> Bool? {
        guard let node = self[key] else { return nil }
        guard let value = node.bool else { throw PlanError(.badValue, line: line(of: key), "'\(key)' must be true or false") }
        return value
    }
}
