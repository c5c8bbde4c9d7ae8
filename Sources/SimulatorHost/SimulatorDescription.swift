import BLECore
import DFUSimulator

/// `bledfu simulate --describe`: each device's profile and link ceilings, and what the central adapters'
/// controllers give the links of each profile when they share their air (docs/simulator.md). The CLI renders these
/// as text or prints the events as NDJSON.
public enum SimulatorDescription {
    /// One device's description, by family.
    public enum Device: Sendable {
        /// A Secure DFU device: the event carries its ceilings.
        case secure(DescribeEvent)
        /// A Legacy DFU device and its ceilings with 20-byte packets (ATT MTU 23).
        case legacy(LegacyDescribeEvent, ceiling: LinkCeiling)
        /// An SMP device, its air ceiling and the SMP bound of an upload of its first image's size (128 KiB when it
        /// has none).
        case smp(SMPDescribeEvent, bound: SMPBound)
    }

    /// The description of a device to run.
    public static func device(_ spec: SimulatedDeviceSpec) -> Device {
        switch spec.device {
        case .secure(let profile): return .secure(DescribeEvent(profile: profile))
        case .legacy(let profile):
            let ceiling = LinkModel(link: profile.link, flash: profile.flash).ceiling(mtu: 23)
            return .legacy(
                LegacyDescribeEvent(name: profile.name, address: profile.address.description, profile: profile),
                ceiling: ceiling)
        case .smp(let profile):
            let ceiling = LinkModel(link: profile.link, flash: FlashParameters()).ceiling()
            let size = profile.images.first?.size ?? 128 * 1024
            let bound = profile.smpBound(imageBytes: size)
            let event = SMPDescribeEvent(
                name: profile.name, address: profile.address.description, family: "smp",
                ceiling: .init(
                    writeWithoutResponse: Int(ceiling.airWriteWithoutResponse.rounded()),
                    smpBound: Int(bound.bytesPerSecond.rounded()),
                    oneAtATime: Int(bound.oneAtATimeBytesPerSecond.rounded()), imageBytes: size),
                profile: profile)
            return .smp(event, bound: bound)
        }
    }

    /// One central adapter's controller and what the links of each device profile get on it.
    public struct Controller: Sendable {
        /// The adapter as named by `--controller`, or "*" for every adapter not named (the default controller).
        public var adapter: String
        public var profile: ControllerProfile
        /// Per device profile (instances "bracelet-1", "bracelet-2" count as "bracelet"), in the order first named.
        public var estimates: [(device: String, estimate: AdapterEstimate)]

        /// The NDJSON line of `--describe --json`.
        public var event: ControllerDescribeEvent {
            ControllerDescribeEvent(
                adapter: adapter, controller: profile, shared: estimates.map { .init(device: $0.device, estimate: $0.estimate) })
        }
    }

    /// The controllers named by `--controller`, then the default one ("*"; docs/virtual-radio.md §4.2: every
    /// virtual adapter has a controller), each with the estimates of the devices' links sharing its air.
    public static func controllers(
        _ named: [(adapter: String, profile: ControllerProfile)], specs: [SimulatedDeviceSpec]
    ) -> [Controller] {
        var controllers = named
        controllers.append((adapter: "*", profile: .generic))
        var models: [(name: String, model: LinkModel)] = []
        for spec in specs {
            let model: LinkModel
            switch spec.device {
            case .secure(let profile): model = LinkModel(profile: profile)
            case .legacy(let profile): model = LinkModel(link: profile.link, flash: profile.flash)
            case .smp(let profile): model = LinkModel(link: profile.link, flash: FlashParameters())
            }
            // Instances of one profile ("bracelet-1", "bracelet-2") share its link model.
            var base = spec.name
            if let dash = base.lastIndex(of: "-"), base[base.index(after: dash)...].allSatisfy(\.isNumber) {
                base = String(base[..<dash])
            }
            if !models.contains(where: { $0.name == base }) { models.append((base, model)) }
        }
        return controllers.map { adapter, profile in
            let estimates = models.map { entry in
                (device: entry.name, estimate: SharedAir.estimate(
                    model: entry.model, links: profile.maximumLinks, eventLengthMicros: profile.eventLengthMicros))
            }
            return Controller(adapter: adapter, profile: profile, estimates: estimates)
        }
    }
}

/// The NDJSON line `--describe --json` prints per Secure DFU device.
public struct DescribeEvent: Encodable, Sendable {
    /// Bytes per second.
    public struct Ceiling: Encodable, Sendable {
        public var writeWithoutResponse: Int
        public var writeWithResponse: Int
        public var airWriteWithoutResponse: Int
        public var airWriteWithResponse: Int
        public var flash: Int

        enum CodingKeys: String, CodingKey {
            case flash
            case writeWithoutResponse = "write_without_response"
            case writeWithResponse = "write_with_response"
            case airWriteWithoutResponse = "air_write_without_response"
            case airWriteWithResponse = "air_write_with_response"
        }
    }

    public var event = "device"
    public var name: String
    public var address: String
    /// Bytes per second.
    public var ceiling: Ceiling
    public var profile: DeviceProfile

    /// The profile and its link model's ceilings, rounded to whole bytes per second.
    public init(profile: DeviceProfile) {
        let ceiling = LinkModel(profile: profile).ceiling()
        self.name = profile.name
        self.address = profile.address.description
        self.ceiling = Ceiling(
            writeWithoutResponse: Int(ceiling.writeWithoutResponse.rounded()),
            writeWithResponse: Int(ceiling.writeWithResponse.rounded()),
            airWriteWithoutResponse: Int(ceiling.airWriteWithoutResponse.rounded()),
            airWriteWithResponse: Int(ceiling.airWriteWithResponse.rounded()),
            flash: Int(ceiling.flash.rounded()))
        self.profile = profile
    }
}

/// The NDJSON line `--describe --json` prints per Legacy device.
public struct LegacyDescribeEvent: Encodable, Sendable {
    public var event = "device"
    public var name: String
    public var address: String
    public var profile: LegacyDeviceProfile
}

/// The NDJSON line `--describe --json` prints per SMP device.
public struct SMPDescribeEvent: Encodable, Sendable {
    /// Bytes per second, and the image size the bound is for.
    public struct Ceiling: Encodable, Sendable {
        public var writeWithoutResponse: Int
        public var smpBound: Int
        public var oneAtATime: Int
        public var imageBytes: Int

        enum CodingKeys: String, CodingKey {
            case writeWithoutResponse = "air_write_without_response"
            case smpBound = "smp_bound"
            case oneAtATime = "smp_one_at_a_time"
            case imageBytes = "image_bytes"
        }
    }

    public var event = "device"
    public var name: String
    public var address: String
    public var family: String
    public var ceiling: Ceiling
    public var profile: SMPDeviceProfile
}

/// The NDJSON line `--describe --json` prints per central adapter.
public struct ControllerDescribeEvent: Encodable, Sendable {
    public struct Shared: Encodable, Sendable {
        public var device: String
        public var estimate: AdapterEstimate
    }

    public var event = "controller"
    public var adapter: String
    public var controller: ControllerProfile
    public var shared: [Shared]
}
