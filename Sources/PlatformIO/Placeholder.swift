// Placeholder for the PlatformIO module.
