import ArgumentParser

extension BledfuCommand {
    /// Every subcommand, one file each under Commands/.
    static let subcommandTypes: [any ParsableCommand.Type] = [
        ScanCommand.self,
        AdaptersCommand.self,
        GattCommand.self,
        DeviceCommand.self,
        PackageCommand.self,
        SimulateCommand.self,
        FlashCommand.self,
        ResumeCommand.self,
        BatchCommand.self,
        LineCommand.self,
        BenchCommand.self,
        ExitCodesCommand.self,
        ImageCommand.self,
        SMPCommand.self,
    ]
}
