// Placeholder for the SecureDFU module.
