// Placeholder for the VirtualRadio module.
