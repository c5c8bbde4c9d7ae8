// Placeholder for the DFUSimulator module.
