"""pc_ble_driver_py.ble_driver: the driver (one connectivity "dongle") and the value types nrfutil uses.

The serial port names the virtual radio: `virtual:/tmp/radio` (bledfu's adapter syntax)."""

import enum
import functools
import os
import threading
import time

from .exceptions import NordicSemiException
from .virtual_link import advertisements, ad_structures

ATT_MTU_DEFAULT = 23
NRF_SUCCESS = 0


def NordicSemiErrorCheck(wrapped=None, expected=NRF_SUCCESS):
    """Raises NordicSemiException when the wrapped call returns another code than `expected`."""
    if wrapped is None:
        return functools.partial(NordicSemiErrorCheck, expected=expected)

    @functools.wraps(wrapped)
    def check(*args, **kwargs):
        code = wrapped(*args, **kwargs)
        if code != expected:
            raise NordicSemiException("Failed to {}. Error code: {}".format(wrapped.__name__, code), error_code=code)
        return code

    return check


class BLEUUIDBase:
    def __init__(self, vs_uuid_base=None, uuid_type=None):
        self.base = list(vs_uuid_base) if vs_uuid_base else list(bytes.fromhex("0000000000001000800000805F9B34FB"))
        self.type = uuid_type


class BLEUUID:
    """A 16-bit value in a 128-bit base (MSB first), as the SoftDevice keeps vendor UUIDs."""

    class Standard(enum.Enum):
        unknown = 0x0000
        service_primary = 0x2800
        characteristic = 0x2803
        cccd = 0x2902

    def __init__(self, value, base=None):
        self.value = value.value if isinstance(value, enum.Enum) else value
        self.base = base or BLEUUIDBase()

    @property
    def full(self):
        raw = list(self.base.base)
        raw[2], raw[3] = (self.value >> 8) & 0xFF, self.value & 0xFF
        return bytes(raw)

    def __eq__(self, other):
        return isinstance(other, BLEUUID) and self.full == other.full

    def __hash__(self):
        return hash(self.full)

    def __repr__(self):
        return "BLEUUID(0x{:04X})".format(self.value)

    @classmethod
    def from_full(cls, full):
        base = list(full)
        value = (base[2] << 8) | base[3]
        base[2] = base[3] = 0
        return cls(value, BLEUUIDBase(base))


class BLEGapAddr:
    class Types(enum.Enum):
        public = 0
        random_static = 1

    def __init__(self, addr_type, addr):
        self.addr_type = addr_type
        self.addr = list(addr)  # most significant byte first

    def __str__(self):
        return ":".join("{:02X}".format(b) for b in self.addr)


class BLEAdvData:
    class Types(enum.Enum):
        flags = 0x01
        service_16bit_uuid_more_available = 0x02
        service_16bit_uuid_complete = 0x03
        short_local_name = 0x08
        complete_local_name = 0x09

    def __init__(self, **kwargs):
        self.records = {}

    @classmethod
    def from_bytes(cls, data):
        adv = cls()
        for kind, payload in ad_structures(data):
            try:
                key = BLEAdvData.Types(kind)
            except ValueError:
                key = kind
            adv.records[key] = list(payload)
        return adv


class BLEGapIOCaps(enum.Enum):
    display_only = 0
    display_yesno = 1
    keyboard_only = 2
    none = 3
    keyboard_display = 4


class BLEGapSecStatus(enum.Enum):
    success = 0x00
    timeout = 0x01
    pdu_invalid = 0x02
    unspecified = 0x88


class BLEGapSecKDist:
    def __init__(self, enc, id, sign, link):
        self.enc, self.id, self.sign, self.link = enc, id, sign, link


class BLEGapSecParams:
    def __init__(self, bond, mitm, lesc, keypress, io_caps, oob, min_key_size, max_key_size, kdist_own, kdist_peer):
        self.bond, self.mitm, self.lesc, self.io_caps = bond, mitm, lesc, io_caps

    def to_c(self):
        return self


class BLEGapConnParams:
    def __init__(self, min_conn_interval_ms, max_conn_interval_ms, conn_sup_timeout_ms, slave_latency):
        self.min_conn_interval_ms = min_conn_interval_ms
        self.max_conn_interval_ms = max_conn_interval_ms
        self.conn_sup_timeout_ms = conn_sup_timeout_ms
        self.slave_latency = slave_latency


class BLEEnableParams:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class BLEConfig(enum.Enum):
    conn_gap = 0x20
    conn_gatt = 0x21


class BLEConfigConnGatt:
    def __init__(self, att_mtu=ATT_MTU_DEFAULT):
        self.att_mtu = att_mtu


class BLEConfigConnGap:
    def __init__(self, conn_count=1, event_length=3):
        self.conn_count, self.event_length = conn_count, event_length


class BLEDriverObserver:
    def on_gap_evt_connected(self, ble_driver, conn_handle, peer_addr, role, conn_params):
        pass

    def on_gap_evt_disconnected(self, ble_driver, conn_handle, reason):
        pass

    def on_gap_evt_adv_report(self, ble_driver, conn_handle, peer_addr, rssi, adv_type, adv_data):
        pass


class _Record:
    """A key or key-set record (the SoftDevice's C structs, only carried around)."""

    def __init__(self):
        self.master_id = None
        self.enc_info = None


class _DriverModule:
    """What nrfutil reaches as `pc_ble_driver_py.ble_driver.driver` (the SWIG module of the C library)."""

    class ble_gap_sec_keyset_t:
        def __init__(self):
            self.keys_own = _Record()
            self.keys_peer = _Record()

    ble_gap_id_key_t = _Record
    ble_gap_enc_key_t = _Record
    ble_gap_sign_info_t = _Record
    ble_gap_lesc_p256_pk_t = _Record

    @staticmethod
    def sd_ble_gap_sec_params_reply(rpc_adapter, conn_handle, sec_status, sec_params, own_keys):
        """The peripheral asked for pairing parameters and got ours: the virtual link is encrypted (the device
        grants Just Works encryption), then the driver reports the result as the SoftDevice would."""
        return rpc_adapter.pair(conn_handle)


driver = _DriverModule()


class BLEDriver:
    api_lock = threading.RLock()
    SCAN_PERIOD = 0.1  # s: how often the radio directory is listed (docs/virtual-radio.md §3)

    def __init__(self, serial_port, baud_rate=1000000, auto_flash=False, retransmission_interval=300,
                 response_timeout=1500, log_severity_level="info"):
        if not str(serial_port).startswith("virtual:"):
            raise NordicSemiException("this stand-in drives the virtual radio only: use -p virtual:DIR")
        self.radio = str(serial_port)[len("virtual:"):]
        self.observers = []
        self.rpc_adapter = self  # `driver.sd_ble_gap_sec_params_reply(self.rpc_adapter, ...)` lands here
        self.adapter = None  # set by BLEAdapter
        self.scanning = threading.Event()
        self.scanner = None

    def observer_register(self, observer):
        self.observers.append(observer)

    def observer_unregister(self, observer):
        if observer in self.observers:
            self.observers.remove(observer)

    def notify(self, event, **kwargs):
        for observer in list(self.observers):
            handler = getattr(observer, event, None)
            if handler:
                handler(self, **kwargs)

    def open(self):
        if not os.path.isdir(self.radio):
            raise NordicSemiException("no virtual radio at {}".format(self.radio))

    def close(self):
        self.scanning.clear()

    def ble_cfg_set(self, config_id, cfg, cfg_tag=1):
        return NRF_SUCCESS

    def ble_enable(self, ble_enable_params=None):
        return NRF_SUCCESS

    def ble_vs_uuid_add(self, uuid_base):
        return NRF_SUCCESS

    def ble_gap_scan_start(self, scan_params=None, timeout=10):
        self.scanning.set()
        self.scanner = threading.Thread(target=self._scan, daemon=True)
        self.scanner.start()
        return NRF_SUCCESS

    def ble_gap_scan_stop(self):
        self.scanning.clear()
        return NRF_SUCCESS

    def _scan(self):
        while self.scanning.is_set():
            time.sleep(self.SCAN_PERIOD)
            for report in advertisements(self.radio):
                if not self.scanning.is_set():
                    return
                kind = BLEGapAddr.Types.public if report["address_type"] == "public" else BLEGapAddr.Types.random_static
                address = BLEGapAddr(kind, bytes.fromhex(report["address"].replace(":", "")))
                rssi = report["rssi"] if report["rssi"] is not None else -50
                self.notify("on_gap_evt_adv_report", conn_handle=None, peer_addr=address, rssi=rssi, adv_type=None,
                            adv_data=BLEAdvData.from_bytes(report["data"]))

    # -- security: what the adapter's links do

    def ble_gap_authenticate(self, conn_handle, sec_params):
        """Pairing with bonding: the peripheral answers with its parameters (an event nrfutil waits for)."""
        def answer():
            time.sleep(0.05)  # the Pairing Response comes a connection event or two later
            self.notify("on_gap_evt_sec_params_request", conn_handle=conn_handle, peer_params=None)

        threading.Thread(target=answer, daemon=True).start()
        return NRF_SUCCESS

    def pair(self, conn_handle):
        link = self.adapter.links.get(conn_handle)
        level = link.raise_security(2) if link else 1
        status = BLEGapSecStatus.success if level >= 2 else BLEGapSecStatus.unspecified

        def report():
            # The SoftDevice's order: the link is encrypted (CONN_SEC_UPDATE), the keys are distributed, then
            # AUTH_STATUS, each a few connection events apart.
            time.sleep(0.05)
            if level >= 2:
                self.notify("on_gap_evt_conn_sec_update", conn_handle=conn_handle)
            time.sleep(0.05)
            # pc-nrfutil's on_gap_evt_auth_status(ble_driver, conn_handle, auth_status) takes these three only:
            # pc-ble-driver-py 0.17 also passes error_src, bonded, sm1_levels, sm2_levels, kdist_own and kdist_peer,
            # which that handler does not accept (nrfutil's bonded path against 0.17). The stand-in passes the
            # arguments nrfutil's handler takes.
            self.notify("on_gap_evt_auth_status", conn_handle=conn_handle, auth_status=status)

        threading.Thread(target=report, daemon=True).start()
        return NRF_SUCCESS

    def ble_gap_encrypt(self, conn_handle, master_id, enc_info, lesc=False):
        """Re-encryption with the bond's key (nrfutil's `encrypt` after the bonded jump)."""
        link = self.adapter.links.get(conn_handle)
        level = link.raise_security(2) if link else 1

        def report():
            time.sleep(0.05)
            if level >= 2:
                self.notify("on_gap_evt_conn_sec_update", conn_handle=conn_handle)

        threading.Thread(target=report, daemon=True).start()
        return NRF_SUCCESS
