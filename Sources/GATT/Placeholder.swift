// Placeholder for the GATT module.
