import ArgumentParser

/// `bledfu simulate`: run virtual DFU devices on a virtual radio (docs/simulator.md, docs/virtual-radio.md).
struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Run virtual devices (Secure DFU, Legacy DFU, MCUmgr SMP) on a virtual radio (virtual:DIR), or show their status.",
        discussion: """
            Examples:
              bledfu simulate --adapter virtual:/tmp/radio --device bracelet --device sensor:4
              bledfu simulate --describe --device sensor --speedup 10
              bledfu simulate status --adapter virtual:/tmp/radio
            Profiles are looked up in $BLEDFU_FIRMWARE_DIR, ./Firmware, or the Firmware/ directory above the \
            executable. Status files (one DeviceState JSON per device, written on every change) go to \
            DIR/status unless --status-dir says otherwise.
            """,
        subcommands: [SimulateRun.self, SimulateStatus.self],
        defaultSubcommand: SimulateRun.self
    )
}
