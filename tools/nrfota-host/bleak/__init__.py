"""A stand-in for the parts of bleak (PyPI) that nrf-ota 0.4.0 calls, over bledfu's virtual radio
(docs/virtual-radio.md) instead of BlueZ's D-Bus API. nrf-ota itself runs unmodified on top of it; this package only
shadows `bleak` on sys.path (tools/nrfota-host/check puts it first). The radio directory is $BLEDFU_VIRTUAL_RADIO.

What nrf-ota calls (nrf_ota/__init__.py, scan.py, dfu.py) and what the stand-in does for it:
  BleakScanner.discover(timeout, return_adv)   lists <radio>/<ADDR>.adv for `timeout` seconds (a real scan lasts
                                               its timeout too) and parses the AD structures: name (0x08/0x09),
                                               service UUIDs (0x02/0x03 16-bit, 0x06/0x07 128-bit); reports
                                               them through bluetoothd's device cache (DEVICES below)
  BleakClient(device, disconnected_callback)   connect(): SEQPACKET connect to <ADDR>.sock, Exchange MTU (0x02,
    connect / disconnect / is_connected        BlueZ's 517), full service discovery as BlueZ does before bleak's
    services                                   connect() returns: Read By Group Type 0x10, Read By Type 0x08,
                                               Find Information 0x04
    start_notify(char, callback)               Write Request (0x12) of 0x0001 on the CCCD; notifications (0x1B) and
                                               indications (0x1D, confirmed with 0x1E) go to callback(char, data)
    write_gatt_char(char, data, response)      Write Request 0x12 (response=True) or Write Command 0x52
    read_gatt_char(char)                       Read Request 0x0A
An ATT Error Response or a lost link raises BleakError, as bleak's BlueZ backend does.
"""

import asyncio
import os
import socket
import struct
import sys
import uuid as uuidlib

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "vradio"))
from vradio import (  # noqa: E402  the radio code every Python host shares
    CONFIRMATION, INDICATION, NOTIFICATION, RESPONSES, ad_structures, advertisements, discover, run_async,
    server_reply, socket_path, uuid_from_le)

from .backends.device import BLEDevice  # noqa: E402
from .backends.scanner import AdvertisementData  # noqa: E402
from .exc import BleakError  # noqa: E402

__all__ = ["BleakClient", "BleakScanner", "BLEDevice", "AdvertisementData", "BleakError"]

RX_MTU = 517  # BlueZ offers its largest ATT_MTU
TIMEOUT = 30
# bluetoothd keeps one object per device address for the life of the adapter: its Name is the last name seen, its
# UUIDs the advertised service UUIDs merged with the primary services found by GATT discovery (src/device.c), and
# bleak's BlueZ backend reports those properties for every advertisement (BLEDevice.name, AdvertisementData
# .service_uuids). The stand-in keeps the same cache for the life of the process.
DEVICES = {}


def radio():
    path = os.environ.get("BLEDFU_VIRTUAL_RADIO")
    if not path:
        raise BleakError("BLEDFU_VIRTUAL_RADIO is not set (the bleak stand-in needs a virtual radio directory)")
    return path


def uuid_string(raw):
    """16 bytes, most significant first, as bleak writes UUIDs: lower-case 8-4-4-4-12."""
    return str(uuidlib.UUID(bytes=bytes(raw)))


def parse_advertisement(data):
    name, uuids = None, []
    for kind, payload in ad_structures(data):
        if kind in (0x08, 0x09):
            name = payload.decode("utf-8", "replace")
        elif kind in (0x02, 0x03):
            uuids += [uuid_string(uuid_from_le(payload[i:i + 2])) for i in range(0, len(payload) - 1, 2)]
        elif kind in (0x06, 0x07):
            uuids += [uuid_string(uuid_from_le(payload[i:i + 16])) for i in range(0, len(payload) - 15, 16)]
    return name, uuids


def read_advertisements(directory):
    found = {}
    for report in advertisements(directory):
        address, rssi = report["address"], report["rssi"]
        name, uuids = parse_advertisement(report["data"])
        cached = DEVICES.setdefault(address, {"name": None, "uuids": []})
        cached["name"] = name or cached["name"]
        cached["uuids"] += [uuid for uuid in uuids if uuid not in cached["uuids"]]
        found[address] = (BLEDevice(address, cached["name"], rssi=rssi),
                          AdvertisementData(local_name=name, service_uuids=list(cached["uuids"]), rssi=rssi))
    return found


class BleakScanner:
    @staticmethod
    async def discover(timeout=5.0, return_adv=False, **_):
        directory = radio()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        seen = {}
        while True:
            seen.update(read_advertisements(directory))  # every ~100 ms, as docs/virtual-radio.md §3 says
            if loop.time() >= deadline:
                break
            await asyncio.sleep(0.1)
        return seen if return_adv else [device for device, _ in seen.values()]


class BleakGATTDescriptor:
    def __init__(self, handle, uuid):
        self.handle, self.uuid = handle, uuid


class BleakGATTCharacteristic:
    def __init__(self, handle, properties, uuid):
        self.handle, self.properties_bits, self.uuid = handle, properties, uuid
        self.descriptors = []

    def __repr__(self):
        return "{} (Handle: {})".format(self.uuid, self.handle)


class BleakGATTService:
    def __init__(self, start, end, uuid):
        self.start, self.end, self.uuid = start, end, uuid
        self.characteristics = []


class BleakClient:
    def __init__(self, address_or_device, disconnected_callback=None, **_):
        self.address = getattr(address_or_device, "address", address_or_device)
        self._disconnected_callback = disconnected_callback
        self._sock = None
        self._reader = None
        self._responses = None
        self._connected = False
        self._notify = {}
        self.services = []
        self.mtu_size = 23

    async def __aenter__(self):
        await self.connect()
        return self

    async def __aexit__(self, *_):
        await self.disconnect()

    @property
    def is_connected(self):
        return self._connected

    async def connect(self, timeout=10.0, **_):
        try:
            await asyncio.wait_for(self._connect(), timeout)
        except (OSError, asyncio.TimeoutError) as error:
            await self.disconnect()
            raise BleakError("connect to {} failed: {}".format(self.address, error)) from error
        return True

    async def _connect(self):
        loop = asyncio.get_running_loop()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock.setblocking(False)
        await loop.sock_connect(self._sock, socket_path(radio(), self.address))
        self._responses = asyncio.Queue()
        self._connected = True
        self._reader = asyncio.create_task(self._read())
        response = await self._request(struct.pack("<BH", 0x02, RX_MTU))
        self.mtu_size = max(23, min(RX_MTU, struct.unpack_from("<H", response, 1)[0]))
        self.services = await self._discover()
        cached = DEVICES.setdefault(self.address.upper(), {"name": None, "uuids": []})
        cached["uuids"] += [service.uuid for service in self.services if service.uuid not in cached["uuids"]]

    async def disconnect(self):
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None
        return True

    def _characteristic(self, specifier):
        if isinstance(specifier, BleakGATTCharacteristic):
            return specifier
        wanted = str(specifier).lower()
        for service in self.services:
            for characteristic in service.characteristics:
                if characteristic.uuid == wanted:
                    return characteristic
        raise BleakError("Characteristic {} was not found!".format(specifier))

    async def start_notify(self, specifier, callback, **_):
        characteristic = self._characteristic(specifier)
        cccd = next((d for d in characteristic.descriptors if d.uuid.startswith("00002902-")), None)
        if cccd is None:
            raise BleakError("{} has no CCCD".format(characteristic.uuid))
        self._notify[characteristic.handle] = (characteristic, callback)
        value = 0x0001 if characteristic.properties_bits & 0x10 else 0x0002
        await self._write_request(struct.pack("<BHH", 0x12, cccd.handle, value))

    async def write_gatt_char(self, specifier, data, response=None):
        characteristic = self._characteristic(specifier)
        if response is None:  # bleak: with a response unless the characteristic only has write-without-response
            response = not (characteristic.properties_bits & 0x04) or bool(characteristic.properties_bits & 0x08)
        if response:
            await self._write_request(struct.pack("<BH", 0x12, characteristic.handle) + bytes(data))
        else:
            await self._send(struct.pack("<BH", 0x52, characteristic.handle) + bytes(data))

    async def read_gatt_char(self, specifier, **_):
        characteristic = self._characteristic(specifier)
        rsp = await self._request(struct.pack("<BH", 0x0A, characteristic.handle))
        if rsp[0] == 0x01:
            raise BleakError("ATT error 0x{:02x} reading {}".format(rsp[4], characteristic.uuid))
        return bytearray(rsp[1:])

    # -- ATT

    async def _write_request(self, pdu):
        rsp = await self._request(pdu)
        if rsp[0] == 0x01:
            handle = struct.unpack_from("<H", pdu, 1)[0]
            raise BleakError("ATT error 0x{:02x} writing handle 0x{:04x}".format(rsp[4], handle))

    async def _send(self, pdu):
        if not self._connected:
            raise BleakError("Not connected")
        try:
            await asyncio.get_running_loop().sock_sendall(self._sock, pdu)
        except OSError as error:
            raise BleakError("Not connected: {}".format(error)) from error

    async def _request(self, pdu):
        await self._send(pdu)
        try:
            response = await asyncio.wait_for(self._responses.get(), TIMEOUT)
        except asyncio.TimeoutError:
            raise BleakError("ATT request 0x{:02x} timed out".format(pdu[0])) from None
        if response is None:
            raise BleakError("Not connected: the link ended")
        return response

    async def _read(self):
        loop = asyncio.get_running_loop()
        try:
            while True:
                pdu = await loop.sock_recv(self._sock, 65536)
                if not pdu:
                    break
                op = pdu[0]
                if op in RESPONSES:
                    await self._responses.put(pdu)
                elif op in (NOTIFICATION, INDICATION) and len(pdu) >= 3:
                    if op == INDICATION:
                        await loop.sock_sendall(self._sock, bytes([CONFIRMATION]))
                    entry = self._notify.get(struct.unpack_from("<H", pdu, 1)[0])
                    if entry is not None:
                        entry[1](entry[0], bytearray(pdu[3:]))
                else:
                    reply = server_reply(pdu, RX_MTU)
                    if reply is not None:
                        await loop.sock_sendall(self._sock, reply)
        except (OSError, asyncio.CancelledError):
            pass
        self._connected = False
        await self._responses.put(None)
        try:
            self._sock.close()
        except OSError:
            pass
        if self._disconnected_callback is not None:
            self._disconnected_callback(self)

    async def _discover(self):
        services = []
        for found in await run_async(discover(), self._request):
            service = BleakGATTService(found["start"], found["end"], uuid_string(found["uuid"]))
            for entry in found["characteristics"]:
                characteristic = BleakGATTCharacteristic(entry["value"], entry["properties"], uuid_string(entry["uuid"]))
                characteristic.descriptors = [BleakGATTDescriptor(handle, uuid_string(kind))
                                              for handle, kind in entry["descriptors"]]
                service.characteristics.append(characteristic)
            services.append(service)
        return services
