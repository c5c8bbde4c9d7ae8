#!/usr/bin/env python3
"""An example virtual BLE device for the bledfu virtual radio (docs/virtual-radio.md). Python 3, stdlib only.

GATT database (handles):
  0x0001  Primary Service  8e7f0001-4b5d-4e2a-9c3b-1d0f6a2b3c4d
  0x0002  Characteristic declaration: read | write without response | write | notify, value handle 0x0003,
          UUID 8e7f0002-4b5d-4e2a-9c3b-1d0f6a2b3c4d
  0x0003  the characteristic value (initially the device name)
  0x0004  Client Characteristic Configuration (CCCD)

Writing the value (Write Request or Write Command) sends a notification with the new value when notifications
are enabled; with --notify-interval SECONDS, a counter is also notified periodically while subscribed.

Usage: example-virtual-device.py --radio DIR --address C0:FF:EE:00:00:01 --name Example
"""
import argparse
import os
import select
import signal
import socket
import struct
import sys

SERVICE_UUID = "8e7f0001-4b5d-4e2a-9c3b-1d0f6a2b3c4d"
CHAR_UUID = "8e7f0002-4b5d-4e2a-9c3b-1d0f6a2b3c4d"
SERVER_RX_MTU = 247
DEFAULT_MTU = 23

# ATT opcodes (Core Vol 3 Part F 3.4.8).
ERROR_RSP, MTU_REQ, MTU_RSP = 0x01, 0x02, 0x03
FIND_INFO_REQ, FIND_INFO_RSP = 0x04, 0x05
READ_BY_TYPE_REQ, READ_BY_TYPE_RSP = 0x08, 0x09
READ_REQ, READ_RSP = 0x0A, 0x0B
READ_BY_GROUP_REQ, READ_BY_GROUP_RSP = 0x10, 0x11
WRITE_REQ, WRITE_RSP, WRITE_CMD = 0x12, 0x13, 0x52
NOTIFY = 0x1B
# ATT error codes.
INVALID_HANDLE, READ_NOT_PERMITTED, WRITE_NOT_PERMITTED = 0x01, 0x02, 0x03
INVALID_PDU, REQUEST_NOT_SUPPORTED, ATTRIBUTE_NOT_FOUND = 0x04, 0x06, 0x0A
UNSUPPORTED_GROUP_TYPE, INVALID_LENGTH = 0x10, 0x0D

PRIMARY_SERVICE, CHARACTERISTIC, CCCD = 0x2800, 0x2803, 0x2902


def uuid128_le(text):
    return bytes.fromhex(text.replace("-", ""))[::-1]


class Device:
    def __init__(self, name):
        self.value = bytearray(name.encode())
        self.cccd = 0
        self.mtu = DEFAULT_MTU
        self.counter = 0

    def attributes(self):
        """(handle, type as 16-bit int, value bytes)."""
        props = 0x02 | 0x04 | 0x08 | 0x10
        return [
            (1, PRIMARY_SERVICE, uuid128_le(SERVICE_UUID)),
            (2, CHARACTERISTIC, bytes([props]) + struct.pack("<H", 3) + uuid128_le(CHAR_UUID)),
            (3, None, bytes(self.value)),
            (4, CCCD, struct.pack("<H", self.cccd)),
        ]

    def handle(self, pdu):
        """Returns the list of PDUs to send back."""
        op = pdu[0]
        try:
            if op == MTU_REQ:
                client_mtu = struct.unpack_from("<H", pdu, 1)[0]
                self.mtu = max(DEFAULT_MTU, min(client_mtu, SERVER_RX_MTU))
                return [struct.pack("<BH", MTU_RSP, SERVER_RX_MTU)]
            if op == READ_BY_GROUP_REQ:
                start, end, group = struct.unpack_from("<HHH", pdu, 1)
                if len(pdu) != 7 or group != PRIMARY_SERVICE:
                    return [error(op, start, UNSUPPORTED_GROUP_TYPE)]
                if start <= 1 <= end:
                    entry = struct.pack("<HH", 1, 4) + uuid128_le(SERVICE_UUID)
                    return [bytes([READ_BY_GROUP_RSP, len(entry)]) + entry]
                return [error(op, start, ATTRIBUTE_NOT_FOUND)]
            if op == READ_BY_TYPE_REQ:
                start, end = struct.unpack_from("<HH", pdu, 1)
                if len(pdu) != 7:
                    return [error(op, start, ATTRIBUTE_NOT_FOUND)]
                kind = struct.unpack_from("<H", pdu, 5)[0]
                found = [(h, v) for h, t, v in self.attributes() if t == kind and start <= h <= end]
                if not found:
                    return [error(op, start, ATTRIBUTE_NOT_FOUND)]
                handle, value = found[0]
                entry = struct.pack("<H", handle) + value[: self.mtu - 4]
                return [bytes([READ_BY_TYPE_RSP, len(entry)]) + entry]
            if op == FIND_INFO_REQ:
                start, end = struct.unpack_from("<HH", pdu, 1)
                found = [(h, t) for h, t, _ in self.attributes() if start <= h <= end]
                if not found:
                    return [error(op, start, ATTRIBUTE_NOT_FOUND)]
                if found[0][1] is None:  # the value: 128-bit type, format 2
                    return [bytes([FIND_INFO_RSP, 2]) + struct.pack("<H", found[0][0]) + uuid128_le(CHAR_UUID)]
                run = []
                for h, t in found:  # one format per response: stop at the 128-bit value attribute
                    if t is None:
                        break
                    run.append(struct.pack("<HH", h, t))
                body = b"".join(run)
                return [bytes([FIND_INFO_RSP, 1]) + body]
            if op == READ_REQ:
                handle = struct.unpack_from("<H", pdu, 1)[0]
                for h, _, v in self.attributes():
                    if h == handle:
                        return [bytes([READ_RSP]) + v[: self.mtu - 1]]
                return [error(op, handle, INVALID_HANDLE)]
            if op in (WRITE_REQ, WRITE_CMD):
                handle = struct.unpack_from("<H", pdu, 1)[0]
                data = bytes(pdu[3:])
                replies = []
                status = self.write(handle, data)
                if op == WRITE_REQ:
                    replies.append(bytes([WRITE_RSP]) if status == 0 else error(op, handle, status))
                if status == 0 and handle == 3 and self.cccd & 1:
                    replies.append(bytes([NOTIFY]) + struct.pack("<H", 3) + bytes(self.value)[: self.mtu - 3])
                return replies
            if op & 0x40:  # a command we do not know: ignored (Core Vol 3 Part F 3.3)
                return []
            if op in (MTU_RSP, READ_RSP, WRITE_RSP, ERROR_RSP, 0x1D):
                return []  # responses to nothing we asked: ignore
            return [error(op, 0, REQUEST_NOT_SUPPORTED)]
        except struct.error:
            return [] if op & 0x40 else [error(op, 0, INVALID_PDU)]

    def write(self, handle, data):
        if handle == 3:
            if len(data) > 512:
                return INVALID_LENGTH
            self.value = bytearray(data)
            return 0
        if handle == 4:
            if len(data) != 2:
                return INVALID_LENGTH
            self.cccd = struct.unpack("<H", data)[0]
            return 0
        if handle in (1, 2):
            return WRITE_NOT_PERMITTED
        return INVALID_HANDLE

    def periodic(self):
        if not self.cccd & 1:
            return []
        self.counter += 1
        return [bytes([NOTIFY]) + struct.pack("<HI", 3, self.counter)]


def error(request, handle, code):
    return struct.pack("<BBHB", ERROR_RSP, request, handle, code)


def advertisement(address, name):
    flags = bytes([2, 0x01, 0x06])
    services = bytes([17, 0x07]) + uuid128_le(SERVICE_UUID)
    encoded = name.encode()[:29]
    return flags + services + bytes([1 + len(encoded), 0x09]) + encoded


def write_adv(radio, base, address, name, rssi=-50):
    text = "address=%s\naddress_type=random\nrssi=%d\nconnectable=1\ndata=%s\n" % (
        address, rssi, advertisement(address, name).hex())
    tmp = os.path.join(radio, "." + base + ".adv.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(radio, base + ".adv"))


def remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def serve(conn, device, interval):
    device.mtu, device.cccd = DEFAULT_MTU, 0
    while True:
        ready, _, _ = select.select([conn], [], [], interval if interval > 0 else None)
        if not ready:
            for pdu in device.periodic():
                conn.send(pdu)
            continue
        try:
            pdu = conn.recv(65536)
        except ConnectionResetError:
            return
        if not pdu:
            return  # the central disconnected (or a scanner probed)
        for reply in device.handle(pdu):
            conn.send(reply)


def main():
    parser = argparse.ArgumentParser(description="Example virtual BLE device (docs/virtual-radio.md)")
    parser.add_argument("--radio", required=True, help="the radio directory")
    parser.add_argument("--address", required=True, help="device address, e.g. C0:FF:EE:00:00:01")
    parser.add_argument("--name", required=True, help="advertised name")
    parser.add_argument("--notify-interval", type=float, default=0, help="seconds between notifications")
    parser.add_argument("--rssi", type=int, default=-50, help="the RSSI (dBm) scanners hear it at")
    args = parser.parse_args()

    address = args.address.upper()
    base = address.replace(":", "-")
    radio = os.path.abspath(args.radio)
    os.makedirs(radio, exist_ok=True)
    sock_path = os.path.join(radio, base + ".sock")
    adv_path = os.path.join(radio, base + ".adv")
    remove(sock_path)  # a stale socket file from an earlier run
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(sock_path)
    listener.listen(4)

    def stop(*_):
        remove(adv_path)
        remove(sock_path)
        sys.exit(0)

    # A parent may have started us with signals blocked (threads of a test runner do): unblock, or SIGTERM would
    # never reach the handler.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    device = Device(args.name)
    try:
        while True:
            write_adv(radio, base, address, args.name, args.rssi)
            conn, _ = listener.accept()
            remove(adv_path)  # one connection at a time: not advertising while connected
            with conn:
                try:
                    serve(conn, device, args.notify_interval)
                except (BrokenPipeError, ConnectionResetError):
                    pass
    finally:
        remove(adv_path)
        remove(sock_path)


if __name__ == "__main__":
    main()
