"""bleak.backends.scanner.AdvertisementData: what a scan parsed from a device's AD structures."""


class AdvertisementData:
    def __init__(self, local_name=None, service_uuids=(), manufacturer_data=None, rssi=None, tx_power=None):
        self.local_name = local_name
        self.service_uuids = list(service_uuids)
        self.manufacturer_data = dict(manufacturer_data or {})
        self.service_data = {}
        self.rssi = rssi
        self.tx_power = tx_power
        self.platform_data = ()
