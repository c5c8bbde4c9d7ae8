import DFUSimulator
import SimulatorHost

extension DescribeRenderer {
    /// `--describe` for an SMP device: its profile, link ceilings and the SMP bound of an upload of its first
    /// image's size.
    static func emitSMP(_ event: SMPDescribeEvent, bound: SMPBound, json: Bool) {
        if json {
            Console.jsonLine(event)
            return
        }
        let profile = event.profile
        let smp = profile.smp
        let mcuboot = profile.mcuboot
        let images = profile.images.enumerated().map { "image \($0.offset) v\($0.element.version)" }.joined(separator: ", ")
        print("\(profile.name) \(profile.address) \(profile.addressType) \(profile.chip) MCUmgr SMP \(images)")
        print(
            "  smp: buf_size \(smp.bufferSize) buf_count \(smp.bufferCount) reassembly \(smp.reassembly)"
                + " mcumgr_params \(smp.mcumgrParameters) v2 \(smp.smpV2); mcuboot: slot \(mcuboot.slotSize)"
                + " page \(mcuboot.pageSize) erase \(Int(mcuboot.pageEraseMicros)) us"
                + " downgrade prevention \(mcuboot.downgradePrevention), \(mcuboot.publicKeys.count) key(s)"
                + ", speedup \(profile.speedup)")
        let link = profile.link
        print(
            "  link: \(link.phy) LL \(link.llDataLength) MTU \(link.maxMTU) CI \(link.connectionIntervalMs) ms"
                + " \(link.packetsPerEvent)/event; air \(event.ceiling.writeWithoutResponse) B/s")
        print(
            "  SMP bound (\(event.ceiling.imageBytes) bytes, \(bound.chunkBytes)-byte chunks in \(bound.writesPerChunk) writes): pipelined"
                + " \(event.ceiling.smpBound) B/s, one at a time \(event.ceiling.oneAtATime) B/s")
    }
}
