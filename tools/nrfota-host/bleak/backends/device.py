"""bleak.backends.device.BLEDevice: an address and a name, as bleak reports a scanned device."""


class BLEDevice:
    def __init__(self, address, name=None, details=None, rssi=None):
        self.address = address
        self.name = name
        self.details = details
        self.rssi = rssi

    def __repr__(self):
        return "BLEDevice({}, {})".format(self.address, self.name)
