"""bleak.exc as nrf-ota imports it: BleakError (the stand-in raises it for ATT errors and a lost link)."""


class BleakError(Exception):
    pass
