// Placeholder for the BlueZTransport module.
