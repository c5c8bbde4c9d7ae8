// Placeholder for the DFUPackage module.
