// The vocabulary of an update (events, errors, options, addresses) comes with `import BledfuKit`.
@_exported import BLECore
@_exported import DFUCore
