"""pc_ble_driver_py.ble_adapter: connections, discovery, writes and the event synchroniser nrfutil uses."""

import os
import threading
import time

from .ble_driver import BLEUUID, ATT_MTU_DEFAULT
from .exceptions import NordicSemiException
from .virtual_link import AttError, LinkClosed, VirtualLink, discover_characteristics

# The gap between a link event and its report: a connection takes a few connection events to be established,
# a disconnect at least one. The events then reach nrfutil's EvtSync after it started waiting, as they do from a
# real controller (an event that comes before the wait is lost, in pc-ble-driver-py as here).
EVENT_DELAY = 0.05
REMOTE_USER_TERMINATED = 0x13
GATT_STATUS_SUCCESS = 0x0000
# How the dongle's SoftDevice schedules Write Commands: at most PER_EVENT in each connection event of INTERVAL s,
# the longest interval nrfutil asks for (BLEGapConnParams max_conn_interval_ms = 30). Also the workaround for
# nrfutil's missing retry (pc-nrfutil #353: a failed object check is swallowed and the next object follows, so one
# full flash queue ends the run): at this pace a bootloader's flash queue does not fill during the page erase of
# Create Data. Environment: NRFUTIL_HOST_INTERVAL_MS, NRFUTIL_HOST_PER_EVENT.
INTERVAL = float(os.environ.get("NRFUTIL_HOST_INTERVAL_MS", "30")) / 1000
PER_EVENT = int(os.environ.get("NRFUTIL_HOST_PER_EVENT", "4"))
# Insufficient Authentication / Encryption / Encryption Key Size, as GATT statuses (0x0100 + ATT error).
SECURITY_STATUSES = {0x0105, 0x010F, 0x010C}


class EvtSync:
    """As pc-ble-driver-py's: a condition per event; `wait` returns the data of a notification that came while it
    waited, else None after the timeout (an event notified before the wait is lost)."""

    def __init__(self, events):
        self.conds = {evt: threading.Condition(threading.Lock()) for evt in events}
        self.data = None

    def wait(self, evt, timeout=5):
        self.data = None
        with self.conds[evt]:
            self.conds[evt].wait(timeout=timeout)
            return self.data

    def notify(self, evt, data=None):
        with self.conds[evt]:
            self.data = data
            self.conds[evt].notify_all()


class BLEAdapterObserver:
    def on_notification(self, ble_adapter, conn_handle, uuid, data):
        pass

    def on_indication(self, ble_adapter, conn_handle, uuid, data):
        pass


class DbConnection:
    def __init__(self, characteristics):
        self.characteristics = characteristics
        self.att_mtu = ATT_MTU_DEFAULT

    def _find(self, uuid):
        for char in self.characteristics:
            if char["uuid"] == uuid.full:
                return char
        return None

    def get_char_handle(self, uuid):
        char = self._find(uuid)
        return char["value"] if char else None

    def get_cccd_handle(self, uuid):
        char = self._find(uuid)
        return char["cccd"] if char else None

    def get_char_uuid(self, handle):
        for char in self.characteristics:
            if char["value"] == handle:
                return BLEUUID.from_full(char["uuid"])
        return None


class BLEAdapter:
    def __init__(self, ble_driver):
        self.driver = ble_driver
        self.driver.adapter = self
        self.observers = []
        self.db_conns = {}
        self.links = {}
        self.next_handle = 0

    def observer_register(self, observer):
        self.observers.append(observer)

    def observer_unregister(self, observer):
        if observer in self.observers:
            self.observers.remove(observer)

    # -- connections

    def connect(self, address, scan_params=None, conn_params=None, tag=0):
        """Connects to `address` (a BLEGapAddr, as the advertisement report gave it). Scanning stops, as the
        SoftDevice stops it when it initiates a connection; the connected event follows."""
        self.driver.ble_gap_scan_stop()
        conn_handle = self.next_handle
        self.next_handle += 1

        def value(handle, data, indication):
            self._value(conn_handle, handle, data, indication)

        def closed():
            self.links.pop(conn_handle, None)
            time.sleep(EVENT_DELAY)
            self.driver.notify("on_gap_evt_disconnected", conn_handle=conn_handle, reason=REMOTE_USER_TERMINATED)

        try:
            link = VirtualLink(self.driver.radio, str(address), value, closed)
        except OSError as error:
            raise NordicSemiException("connect to {}: {}".format(address, error))
        self.links[conn_handle] = link
        self.db_conns[conn_handle] = DbConnection([])

        def report():
            time.sleep(EVENT_DELAY)
            self.driver.notify("on_gap_evt_connected", conn_handle=conn_handle, peer_addr=address, role=None,
                               conn_params=conn_params)

        threading.Thread(target=report, daemon=True).start()

    def disconnect(self, conn_handle):
        link = self.links.get(conn_handle)
        if link:
            link.close()

    def _link(self, conn_handle):
        link = self.links.get(conn_handle)
        if link is None:
            raise NordicSemiException("no connection {}".format(conn_handle))
        return link

    # -- GATT

    def service_discovery(self, conn_handle, uuid=None):
        try:
            found = discover_characteristics(self._link(conn_handle))
        except LinkClosed as error:
            raise NordicSemiException("service discovery: {}".format(error))
        self.db_conns[conn_handle] = DbConnection(found)

    def att_mtu_exchange(self, conn_handle, mtu):
        link = self._link(conn_handle)
        try:
            response = link.request(bytes([0x02, mtu & 0xFF, mtu >> 8]))
        except (AttError, LinkClosed):
            return self.db_conns[conn_handle].att_mtu
        server = response[1] | response[2] << 8
        new_mtu = max(ATT_MTU_DEFAULT, min(mtu, server))
        self.db_conns[conn_handle].att_mtu = new_mtu
        self.driver.notify("on_gattc_evt_exchange_mtu_rsp", conn_handle=conn_handle, status=GATT_STATUS_SUCCESS,
                           att_mtu=new_mtu)
        return new_mtu

    def data_length_update(self, conn_handle, data_length):
        return data_length  # the virtual radio carries whole PDUs

    def enable_notification(self, conn_handle, uuid, attr_handle=None):
        return self._write_cccd(conn_handle, uuid, [0x01, 0x00])

    def enable_indication(self, conn_handle, uuid, attr_handle=None):
        return self._write_cccd(conn_handle, uuid, [0x02, 0x00])

    def _write_cccd(self, conn_handle, uuid, value):
        handle = self.db_conns[conn_handle].get_cccd_handle(uuid)
        if handle is None:
            raise NordicSemiException("CCCD for {} not found".format(uuid))
        return self._write_request(conn_handle, handle, value)

    def write_req(self, conn_handle, uuid, data, attr_handle=None):
        handle = attr_handle or self.db_conns[conn_handle].get_char_handle(uuid)
        if handle is None:
            raise NordicSemiException("characteristic {} not found".format(uuid))
        return self._write_request(conn_handle, handle, data)

    def _write_request(self, conn_handle, handle, data):
        """Raises NordicSemiException for a GATT status other than success, as pc-ble-driver-py 0.17's write_req
        does (`@NordicSemiErrorCheck(expected=BLEGattStatusCode.success)`)."""
        link = self._link(conn_handle)
        pdu = bytes([0x12, handle & 0xFF, handle >> 8]) + bytes(data)
        try:
            link.request(pdu)
            return GATT_STATUS_SUCCESS
        except AttError as error:
            status = 0x0100 + error.code
        except LinkClosed as error:
            raise NordicSemiException("write: {}".format(error))
        if status in SECURITY_STATUSES:
            # Workaround for nrfutil, not what pc-ble-driver-py does: a bonded bootloader reached directly
            # (bootloader mode, no buttonless jump in this run) needs the link encrypted with the bond, and nrfutil
            # re-encrypts only after its own jump (DFUAdapter.connect: `if self.bonded: self.encrypt()`). With the
            # real driver the write raises and nrfutil stops.
            if link.raise_security(2) >= 2:
                try:
                    link.request(pdu)
                    return GATT_STATUS_SUCCESS
                except AttError as error:
                    status = 0x0100 + error.code
                except LinkClosed as error:
                    raise NordicSemiException("write: {}".format(error))
        raise NordicSemiException("Failed to write_req. Error code: {}".format(status), error_code=status)

    def write_cmd(self, conn_handle, uuid, data, attr_handle=None):
        """A Write Command; returns once the link took it (the socket blocks while the device is busy, as the
        dongle's driver waits for its TX-complete event)."""
        handle = attr_handle or self.db_conns[conn_handle].get_char_handle(uuid)
        if handle is None:
            raise NordicSemiException("characteristic {} not found".format(uuid))
        link = self._link(conn_handle)
        now = time.monotonic()
        if now - link.event_start >= INTERVAL:
            link.event_start, link.event_count = now, 0
        if link.event_count >= PER_EVENT:
            time.sleep(max(0.0, link.event_start + INTERVAL - now))
            link.event_start, link.event_count = time.monotonic(), 0
        link.event_count += 1
        try:
            link.send(bytes([0x52, handle & 0xFF, handle >> 8]) + bytes(data))
        except LinkClosed as error:
            raise NordicSemiException("write command: {}".format(error))

    def _value(self, conn_handle, handle, data, indication):
        uuid = self.db_conns.get(conn_handle, DbConnection([])).get_char_uuid(handle)
        event = "on_indication" if indication else "on_notification"
        for observer in list(self.observers):
            getattr(observer, event)(self, conn_handle, uuid, data)
        if indication:
            # The SoftDevice confirms an indication after the application saw it, a connection event later.
            time.sleep(EVENT_DELAY)
            link = self.links.get(conn_handle)
            if link:
                try:
                    link.send(b"\x1e")
                except LinkClosed:
                    pass
