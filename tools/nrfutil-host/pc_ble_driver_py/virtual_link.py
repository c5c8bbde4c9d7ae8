"""One central connection over bledfu's virtual radio (docs/virtual-radio.md): an ATT client on a SEQPACKET socket.

What a connectivity dongle's SoftDevice does for pc-ble-driver-py, done here in Python: requests wait for their
response (one at a time), notifications and indications go to a callback (indications are confirmed), the link's
security is raised with the link security message (§4.1), and the end of the link is reported once."""

import os
import queue
import socket
import struct
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "vradio"))
from vradio import (  # noqa: E402  the radio code every Python host shares
    INDICATION, NOTIFICATION, RESPONSES, SECURITY_MESSAGE, ad_structures, advertisements, discover, run_sync,
    server_reply, socket_path)


class AttError(Exception):
    def __init__(self, request, handle, code):
        super().__init__("ATT error 0x{:02X} on request 0x{:02X}, handle 0x{:04X}".format(code, request, handle))
        self.code = code


class LinkClosed(Exception):
    pass


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
        elif op == NOTIFICATION and len(pdu) >= 3:
            self.on_value(struct.unpack_from("<H", pdu, 1)[0], list(pdu[3:]), False)
        elif op == INDICATION and len(pdu) >= 3:  # the callback confirms
            self.on_value(struct.unpack_from("<H", pdu, 1)[0], list(pdu[3:]), True)
        else:
            reply = server_reply(pdu, 247)
            if reply is not None:
                self.send(reply)


def discover_characteristics(link):
    """Every characteristic of the device (vradio.discover: services, characteristics, descriptors; Core Vol 3 Part G
    §4.4-4.7) as dicts with uuid (16 bytes), properties, value, cccd and end."""
    def request(pdu):
        try:
            return link.request(pdu)
        except AttError:
            return None  # an Error Response ends that step of the discovery
    return [characteristic for service in run_sync(discover(), request) for characteristic in service["characteristics"]]
