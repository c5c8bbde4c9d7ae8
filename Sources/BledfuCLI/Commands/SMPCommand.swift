import ArgumentParser

/// `bledfu smp`: MCUmgr's OS group on an SMP device (Zephyr's os_mgmt, smp-mcuboot.md §2): echo and the parameters
/// that size an upload. `bledfu image` has the image group.
struct SMPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "smp",
        abstract: "Talk to an MCUmgr SMP device's OS group: echo, and the parameters uploads are sized by.",
        discussion: """
            Exit codes as for bledfu flash (40 the device refused, e.g. a command it was built without, 45 no SMP \
            service, 42 no answer).
            """,
        subcommands: [SMPEcho.self, SMPParams.self])
}
