"""An smpclient `SMPTransport` over bledfu's virtual radio (docs/virtual-radio.md): what smpclient's BLE transport
(bleak) does on a real adapter, done on a SEQPACKET socket with an ATT client of its own.

connect(): connects to <radio>/<ADDR>.sock, exchanges the ATT MTU (Exchange MTU Request 0x02), discovers the SMP
service 8D53DC1D-1DB7-4CD3-868B-8A527460AA84 and its characteristic DA2E7828-FBCE-4E01-AE9E-261174997C48 (Read By
Group Type 0x10, Read By Type 0x08, Find Information 0x04), and enables its notifications (Write Request 0x12 on
the CCCD). send(): the request as Write Commands (0x52) of ATT_MTU - 3 bytes, as smpclient's `SMPBLETransport.send`
writes with `response=False`. receive(): notifications (0x1B) joined until the 8-byte SMP header's length is there.
"""

import asyncio
import os
import socket
import struct
import sys

from smp import header as smphdr
from smpclient.transport import SMP_CHARACTERISTIC_UUID, SMP_SERVICE_UUID, SMPTransport, SMPTransportDisconnected

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vradio"))
from vradio import NOTIFICATION, RESPONSES, discover, run_async, server_reply, socket_path  # noqa: E402

RX_MTU = 498


class VirtualRadioSMPTransport(SMPTransport):
    """`address` is the device's address on the radio directory given here."""

    def __init__(self, radio):
        self._radio = radio
        self._sock = None
        self._reader = None
        self._responses = None
        self._notifications = None
        self._buffer = bytearray()
        self._mtu = 23
        self._handle = None
        self._smp_server_transport_buffer_size = None

    # -- SMPTransport

    async def connect(self, address, timeout_s):
        await asyncio.wait_for(self._connect(address), timeout_s)

    async def _connect(self, address):
        loop = asyncio.get_running_loop()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock.setblocking(False)
        await loop.sock_connect(self._sock, socket_path(self._radio, address))
        self._responses = asyncio.Queue()
        self._notifications = asyncio.Queue()
        self._buffer = bytearray()
        self._reader = asyncio.create_task(self._read())
        response = await self._request(struct.pack("<BH", 0x02, RX_MTU))
        self._mtu = min(RX_MTU, struct.unpack_from("<H", response, 1)[0])
        value, cccd = await self._find_smp_characteristic()
        self._handle = value
        await self._request(struct.pack("<BHH", 0x12, cccd, 0x0001))

    async def disconnect(self):
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None

    async def send(self, data):
        loop = asyncio.get_running_loop()
        size = self.mtu
        for offset in range(0, len(data), size):
            pdu = struct.pack("<BH", 0x52, self._handle) + bytes(data[offset:offset + size])
            try:
                await loop.sock_sendall(self._sock, pdu)
            except OSError as error:
                raise SMPTransportDisconnected(str(error))

    async def receive(self):
        while True:
            if len(self._buffer) >= smphdr.Header.SIZE:
                header = smphdr.Header.loads(bytes(self._buffer[:smphdr.Header.SIZE]))
                length = header.length + smphdr.Header.SIZE
                if len(self._buffer) >= length:
                    message = bytes(self._buffer[:length])
                    del self._buffer[:length]
                    return message
            value = await self._notifications.get()
            if value is None:
                raise SMPTransportDisconnected("the link ended")
            self._buffer += value

    async def send_and_receive(self, data):
        await self.send(data)
        return await self.receive()

    @property
    def mtu(self):
        """Bytes per Write Command: ATT_MTU - 3."""
        return self._mtu - 3

    # -- ATT

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
                elif op == NOTIFICATION and len(pdu) >= 3:
                    if struct.unpack_from("<H", pdu, 1)[0] == self._handle:
                        await self._notifications.put(pdu[3:])
                else:
                    reply = server_reply(pdu, RX_MTU)
                    if reply is not None:
                        await loop.sock_sendall(self._sock, reply)
        except (OSError, asyncio.CancelledError):
            pass
        await self._responses.put(None)
        await self._notifications.put(None)
        try:
            self._sock.close()
        except OSError:
            pass

    async def _request(self, pdu, timeout=30):
        await asyncio.get_running_loop().sock_sendall(self._sock, pdu)
        response = await asyncio.wait_for(self._responses.get(), timeout)
        if response is None:
            raise SMPTransportDisconnected("the link ended")
        return response

    async def _find_smp_characteristic(self):
        services = await run_async(discover(), self._request)
        for service in services:
            if service["uuid"] != SMP_SERVICE_UUID.bytes:
                continue
            for characteristic in service["characteristics"]:
                if characteristic["uuid"] == SMP_CHARACTERISTIC_UUID.bytes and characteristic["cccd"] is not None:
                    return characteristic["value"], characteristic["cccd"]
        raise SMPTransportDisconnected("the device has no SMP characteristic with a CCCD")
