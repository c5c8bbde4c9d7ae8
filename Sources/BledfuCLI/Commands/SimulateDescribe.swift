import DFUSimulator
import SimulatorHost

/// `--describe`: renders SimulatorHost's ``SimulatorDescription`` of each device as text or NDJSON.
enum DescribeRenderer {
    static func emit(_ spec: SimulatedDeviceSpec, json: Bool) {
        switch SimulatorDescription.device(spec) {
        case .secure(let event): emit(event, json: json)
        case .legacy(let event, let ceiling): emitLegacy(event, ceiling: ceiling, json: json)
        case .smp(let event, let bound): emitSMP(event, bound: bound, json: json)
        }
    }

    /// A Legacy profile: kind, chip, banks, buffers, the link and flash ceilings.
    static func emitLegacy(_ event: LegacyDescribeEvent, ceiling: LinkCeiling, json: Bool) {
        if json {
            Console.jsonLine(event)
            return
        }
        let profile = event.profile
        let app = profile.installed.application.map { "app v\($0.version)" } ?? "no app"
        print(
            "\(profile.name) \(profile.address) \(profile.addressType) \(profile.chip) Legacy DFU \(profile.kind.rawValue)"
                + " \(profile.sdkVersion) sd_fwid 0x\(String(profile.softDeviceFWID, radix: 16, uppercase: true))"
                + " \(profile.dualBank ? "dual" : "single") bank, \(app), bootloader \(profile.bootloaderName)")
        print(
            "  link: \(profile.link.phy) LL \(profile.link.llDataLength) MTU \(profile.link.maxMTU) CI \(profile.link.connectionIntervalMs) ms;"
                + " \(profile.receiveBuffers) RX buffers, flash queue \(profile.flash.queueDepth), timer \(profile.inactivityTimeoutSeconds) s")
        print(
            "  ceiling (20-byte packets): air \(Int(ceiling.airWriteWithoutResponse.rounded())) B/s, flash \(Int(ceiling.flash.rounded())) B/s")
    }

    /// A Secure DFU profile: chip, SDK, versions, signatures, the link and its ceilings.
    static func emit(_ event: DescribeEvent, json: Bool) {
        if json {
            Console.jsonLine(event)
            return
        }
        let profile = event.profile
        let ceiling = event.ceiling
        let link = profile.link
        let app = profile.installed.application.map { "app v\($0.version)" } ?? "no app"
        let fwid = String(profile.softDeviceFWID, radix: 16, uppercase: true)
        print(
            "\(profile.name) \(profile.address) \(profile.addressType) \(profile.chip) SDK \(profile.sdkVersion)"
                + " hw_version \(profile.hwVersion) sd_fwid 0x\(fwid) buttonless \(profile.buttonless.rawValue)"
                + " \(app) bootloader v\(profile.installed.bootloader.version)")
        print(
            "  signatures: \(profile.publicKeys.isEmpty ? "none checked" : "\(profile.publicKeys.count) key(s)")"
                + "\(profile.requireSignedApp ? ", required for apps" : ", optional for apps")"
                + ", save_progress \(profile.saveProgress), speedup \(profile.speedup)")
        print(
            "  link: \(link.phy) LL \(link.llDataLength) MTU \(link.maxMTU) CI \(link.connectionIntervalMs) ms"
                + " \(link.packetsPerEvent)/event, \(link.receiveBuffers) receive buffers"
                + "\(link.encrypted ? ", encrypted" : ""); flash page \(profile.flash.pageSize)"
                + " erase \(profile.flash.pageEraseMicros) us, bank \(profile.flash.bankSize)")
        print(
            "  ceiling: write without response \(ceiling.writeWithoutResponse) B/s"
                + " (air \(ceiling.airWriteWithoutResponse), flash \(ceiling.flash))"
                + ", write with response \(ceiling.writeWithResponse) B/s")
    }
}
