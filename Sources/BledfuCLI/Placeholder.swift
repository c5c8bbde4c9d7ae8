import ArgumentParser

public struct BledfuCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(commandName: "bledfu", abstract: "Nordic Secure DFU over raw ATT.")
    public init() {}
}
