"""One central connection over bledfu's virtual radio (docs/virtual-radio.md): an ATT client on a SEQPACKET socket.

What a connectivity dongle's SoftDevice does for pc-ble-driver-py, done here in Python: requests wait for their
response (one at a time), notifications and indications go to a callback (indications are confirmed), the link's
security is raised with the link security message (§4.1), and the end of the link is reported once."""

import os
import queue
import socket
import struct
import threading

SECURITY_MESSAGE = (0xFF, 0x53)
RESPONSES = {0x01, 0x03, 0x05, 0x07, 0x09, 0x0B, 0x0D, 0x0F, 0x11, 0x13, 0x17, 0x19}


class AttError(Exception):
    def __init__(self, request, handle, code):
        super().__init__("ATT error 0x{:02X} on request 0x{:02X}, handle 0x{:04X}".format(code, request, handle))
        self.code = code


class LinkClosed(Exception):
    pass


def socket_path(radio, address):
    """<radio>/<ADDR>.sock, ADDR upper-case hex with '-' (address: 'C6:05:04:03:02:01' or 'C60504030201')."""
    hexdigits = address.replace(":", "").replace("-", "").upper()
    name = "-".join(hexdigits[i:i + 2] for i in range(0, 12, 2))
    return os.path.join(radio, name + ".sock")


class VirtualLink:
    def __init__(self, radio, address, on_value, on_closed):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(socket_path(radio, address))
        self.on_value = on_value
        self.on_closed = on_closed
        self.responses = queue.Queue()
        self.security_answers = queue.Queue()
        self.request_lock = threading.Lock()
        self.send_lock = threading.Lock()
        self.closed = threading.Event()
        self.security_level = 1
        self.event_start, self.event_count = 0.0, 0  # Write Command pacing (ble_adapter.write_cmd)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    # -- sending

    def send(self, pdu):
        if self.closed.is_set():
            raise LinkClosed("link closed")
        try:
            with self.send_lock:
                self.sock.send(bytes(pdu))
        except OSError as error:
            raise LinkClosed(str(error))

    def request(self, pdu, timeout=30):
        """Sends an ATT request and returns its response (raises AttError for an Error Response)."""
        with self.request_lock:
            self.send(pdu)
            try:
                response = self.responses.get(timeout=timeout)
            except queue.Empty:
                raise LinkClosed("no ATT response within {} s".format(timeout))
            if response is None:
                raise LinkClosed("link closed")
            if response[0] == 0x01 and len(response) >= 5:
                raise AttError(response[1], struct.unpack_from("<H", response, 2)[0], response[4])
            return response

    def raise_security(self, level=2, timeout=10):
        """Raises the link's security (docs/virtual-radio.md §4.1); returns the level in force."""
        if self.security_level >= level:
            return self.security_level
        self.send(bytes(SECURITY_MESSAGE) + bytes([level]))
        try:
            answer = self.security_answers.get(timeout=timeout)
        except queue.Empty:
            raise LinkClosed("the device did not answer the link security request")
        if answer is None:
            raise LinkClosed("link closed")
        self.security_level = answer
        return answer

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- receiving

    def _read(self):
        try:
            while True:
                pdu = self.sock.recv(65536)
                if not pdu:
                    break
                self._dispatch(pdu)
        except OSError:
            pass
        self.closed.set()
        self.responses.put(None)
        self.security_answers.put(None)
        try:
            self.sock.close()
        except OSError:
            pass
        self.on_closed()

    def _dispatch(self, pdu):
        op = pdu[0]
        if len(pdu) == 3 and (pdu[0], pdu[1]) == SECURITY_MESSAGE:
            self.security_answers.put(pdu[2])
        elif op in RESPONSES:
            self.responses.put(pdu)
        elif op == 0x1B and len(pdu) >= 3:  # Handle Value Notification
            self.on_value(struct.unpack_from("<H", pdu, 1)[0], list(pdu[3:]), False)
        elif op == 0x1D and len(pdu) >= 3:  # Handle Value Indication: the callback confirms
            self.on_value(struct.unpack_from("<H", pdu, 1)[0], list(pdu[3:]), True)
        elif op == 0x02:  # the server's own MTU exchange
            self.send(struct.pack("<BH", 0x03, 247))
        elif not op & 0x40:  # any other request: not supported
            self.send(struct.pack("<BBHB", 0x01, op, 0, 0x06))


BLUETOOTH_BASE = bytes.fromhex("0000000000001000800000805F9B34FB")


def uuid_from_le(data):
    """A 2- or 16-byte little-endian UUID → 16 bytes, most significant first."""
    if len(data) == 2:
        return bytes([0, 0, data[1], data[0]]) + BLUETOOTH_BASE[4:]
    return bytes(reversed(data))


class Discovery:
    """Primary services, their characteristics and descriptors (Core Vol 3 Part G §4.4-4.7)."""

    def __init__(self, link):
        self.link = link
        self.characteristics = []  # dicts: uuid (16 bytes), properties, value, cccd, end

    def run(self):
        services = []
        start = 1
        while start <= 0xFFFF:
            try:
                rsp = self.link.request(struct.pack("<BHHH", 0x10, start, 0xFFFF, 0x2800))
            except AttError:
                break
            size = rsp[1]
            last = start
            for i in range(2, len(rsp) - size + 1, size):
                handle, end = struct.unpack_from("<HH", rsp, i)
                services.append((handle, end))
                last = end
            if last >= 0xFFFF:
                break
            start = last + 1
        for (first, end) in services:
            self._characteristics(first, end)
        return self

    def _characteristics(self, first, end):
        found = []
        start = first
        while start <= end:
            try:
                rsp = self.link.request(struct.pack("<BHHH", 0x08, start, end, 0x2803))
            except AttError:
                break
            size = rsp[1]
            for i in range(2, len(rsp) - size + 1, size):
                decl, props, value = struct.unpack_from("<HBH", rsp, i)
                found.append({"uuid": uuid_from_le(rsp[i + 5:i + size]), "properties": props, "value": value})
                start = decl + 1
            if size == 0:
                break
        for index, char in enumerate(found):
            char["end"] = found[index + 1]["value"] - 2 if index + 1 < len(found) else end
            char["cccd"] = None
            if char["end"] > char["value"]:
                try:
                    rsp = self.link.request(struct.pack("<BHH", 0x04, char["value"] + 1, char["end"]))
                except AttError:
                    rsp = b""
                if rsp and rsp[1] == 1:
                    for i in range(2, len(rsp) - 3, 4):
                        handle, kind = struct.unpack_from("<HH", rsp, i)
                        if kind == 0x2902:
                            char["cccd"] = handle
        self.characteristics += found
