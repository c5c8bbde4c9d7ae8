"""A stand-in for the part of pc-ble-driver-py (Nordic's connectivity-dongle driver) that pc-nrfutil 6.1.7's BLE
DFU calls, talking the virtual radio of docs/virtual-radio.md instead of a dongle. bledfu test tool; see
tools/nrfutil-host/README.md. Nothing here is pc-ble-driver-py's code: the names and call shapes are the ones
nrfutil's nordicsemi/dfu/dfu_transport_ble.py uses."""
