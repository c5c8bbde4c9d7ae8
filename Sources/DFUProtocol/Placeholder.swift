// Placeholder for the DFUProtocol module.
