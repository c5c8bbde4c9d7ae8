import BledfuCLI

await BledfuCommand.main()
