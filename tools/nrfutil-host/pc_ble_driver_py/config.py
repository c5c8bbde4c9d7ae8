"""pc_ble_driver_py.config: the SoftDevice API version nrfutil asks for at import time."""

__conn_ic_id__ = "NRF52"


def set_conn_ic(conn_ic_id):
    global __conn_ic_id__
    __conn_ic_id__ = conn_ic_id


def sd_api_ver_get():
    # SoftDevice API v5 (S132 5.x connectivity): nrfutil then configures the ATT MTU and data length itself.
    return 5
