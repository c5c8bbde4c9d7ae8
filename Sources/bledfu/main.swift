import BledfuCLI

#if canImport(Glibc)
    import Glibc
#endif

let code = await BledfuCommand.runMain()
exit(code)
