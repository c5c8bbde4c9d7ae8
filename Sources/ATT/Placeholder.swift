// Placeholder for the ATT module.
