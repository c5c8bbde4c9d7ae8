"""Runs pc-nrfutil 6.1.7's own BLE DFU (nordicsemi.dfu.dfu.Dfu with DfuTransportBle, unmodified, from PyPI) against
a device on bledfu's virtual radio, through the pc_ble_driver_py stand-in next to this file. Does what
`nrfutil dfu ble` does (nordicsemi/__main__.py `ble`) without the dongle handling, and also takes the PRN, which
DfuTransportBle accepts and the `dfu ble` command does not offer.

    python run_dfu.py --radio DIR --package PKG.zip (--address AA:BB:CC:DD:EE:FF | --name NAME) [--prn N]

Prints nrfutil's "Device programmed." and exits 0 when nrfutil reports success; prints one line
`nrfutil: error: ...` and exits 1 when it raises."""

import argparse
import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the stand-in before any installed driver

from pc_ble_driver_py import config  # noqa: E402

config.set_conn_ic("NRF52")

from nordicsemi.dfu.dfu import Dfu  # noqa: E402
from nordicsemi.dfu.dfu_transport_ble import DfuTransportBle  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--radio", required=True)
    parser.add_argument("--package", required=True)
    parser.add_argument("--address")
    parser.add_argument("--name")
    parser.add_argument("--prn", type=int, default=0)
    parser.add_argument("--mtu", type=int, default=247)
    parser.add_argument("--connect-delay", type=int, default=0)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    # As `nrfutil dfu ble`: the address without colons, the default name DfuTarg when neither is given.
    address = args.address.replace(":", "") if args.address else None
    name = args.name if args.name or address else "DfuTarg"
    transport = DfuTransportBle(serial_port="virtual:" + args.radio, att_mtu=args.mtu,
                                target_device_name=str(name), target_device_addr=str(address), prn=args.prn)
    try:
        dfu = Dfu(zip_file_path=args.package, dfu_transport=transport, connect_delay=args.connect_delay)
        dfu.dfu_send_images()
    except Exception as error:  # nrfutil reports every failure as an exception
        print("nrfutil: error: {}".format(" ".join(str(error).split())), file=sys.stderr)
        return 1
    print("Device programmed.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
