"""The central side of bledfu's virtual radio (docs/virtual-radio.md) for the Python hosts that run third-party DFU
tools against `bledfu simulate`: tools/nrfutil-host (pc-nrfutil through a pc_ble_driver_py stand-in, threads),
tools/smpclient-host (smpclient through an SMPTransport, asyncio) and tools/nrfota-host (nrf-ota through a bleak
stand-in, asyncio). One copy of what they share: the socket and advertisement files, UUIDs, how an incoming PDU is
sorted, and the GATT discovery procedure. The discovery is written once as a generator of ATT requests
(`discover()`), driven by `run_sync` (a blocking request function) or `run_async` (a coroutine), so that the three
hosts keep their own I/O model and none of them repeats the procedure.

Layouts (Core 5.4 Vol 3 Part F §3.4):
  Read By Group Type Request   10 start:u16 end:u16 type:u16(0x2800)   response 11 size:u8 (start end uuid)*
  Read By Type Request         08 start:u16 end:u16 type:u16(0x2803)   response 09 size:u8 (decl props:u8 value uuid)*
  Find Information Request     04 start:u16 end:u16                    response 05 format:u8 (1: handle uuid16 | 2: handle uuid128)*
  Error Response               01 request:u8 handle:u16 code:u8
"""

import os
import struct

# Every ATT response opcode a client waits for (Error, MTU, Find Information, Find By Type Value, Read By Type, Read,
# Read Blob, Read Multiple, Read By Group Type, Write, Prepare Write, Execute Write).
RESPONSES = frozenset({0x01, 0x03, 0x05, 0x07, 0x09, 0x0B, 0x0D, 0x0F, 0x11, 0x13, 0x17, 0x19})
NOTIFICATION, INDICATION, CONFIRMATION = 0x1B, 0x1D, 0x1E
# docs/virtual-radio.md §4.1: FF 53 <level> asks for (and answers with) the link's security level.
SECURITY_MESSAGE = (0xFF, 0x53)
BLUETOOTH_BASE = bytes.fromhex("0000000000001000800000805F9B34FB")
CCCD = 0x2902


def uuid_from_le(data):
    """A 2- or 16-byte little-endian UUID as 16 bytes, most significant first."""
    if len(data) == 2:
        return bytes([0, 0, data[1], data[0]]) + BLUETOOTH_BASE[4:]
    return bytes(reversed(data))


def socket_path(radio, address):
    """<radio>/<ADDR>.sock, ADDR upper-case hex pairs joined by '-' ('C6:05:04:03:02:01' or 'C60504030201')."""
    digits = address.replace(":", "").replace("-", "").upper()
    return os.path.join(radio, "-".join(digits[i:i + 2] for i in range(0, 12, 2)) + ".sock")


def read_advertisement(path):
    """The fields of an <ADDR>.adv file (key=value lines, '#' comments; docs/virtual-radio.md §3) as a dict with
    'address' ('AA:BB:..', upper case), 'address_type', 'rssi' (int or None) and 'data' (bytes); None when the file
    is gone or malformed (a device may rewrite or remove it at any moment)."""
    fields = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    key, value = line.split("=", 1)
                    fields[key.strip()] = value.strip()
        digits = fields["address"].replace(":", "").replace("-", "").upper()
        if len(digits) != 12:
            return None
        int(digits, 16)
        return {"address": ":".join(digits[i:i + 2] for i in range(0, 12, 2)),
                "address_type": fields.get("address_type", "random"),
                "rssi": int(fields["rssi"]) if "rssi" in fields else None,
                "data": bytes.fromhex(fields.get("data", ""))}
    except (OSError, KeyError, ValueError, UnicodeDecodeError):
        return None


def advertisements(radio):
    """Every advertising device on the radio: .adv files whose device also listens (<ADDR>.sock exists)."""
    try:
        names = sorted(os.listdir(radio))
    except OSError:
        return []
    found = []
    for name in names:
        if name.startswith(".") or not name.endswith(".adv"):
            continue
        if not os.path.exists(os.path.join(radio, name[:-4] + ".sock")):
            continue
        report = read_advertisement(os.path.join(radio, name))
        if report is not None:
            found.append(report)
    return found


def ad_structures(data):
    """(type, payload) for each AD structure (Core Supplement Part A §1); stops at a zero length or a truncation."""
    position = 0
    while position + 1 < len(data):
        length = data[position]
        if length == 0 or position + 1 + length > len(data):
            return
        yield data[position + 1], bytes(data[position + 2:position + 1 + length])
        position += 1 + length


def server_reply(pdu, mtu):
    """What a client answers to a PDU the device sent that is neither a response nor a value: the device's own
    Exchange MTU Request (0x02) gets our MTU; any other request (bit 6 clear, not the security message) gets an Error
    Response 'Request Not Supported' (0x06). None when nothing is to be answered."""
    op = pdu[0]
    if op == 0x02:
        return struct.pack("<BH", 0x03, mtu)
    if not op & 0x40 and op != SECURITY_MESSAGE[0] and op not in RESPONSES and op not in (NOTIFICATION, INDICATION):
        return struct.pack("<BBHB", 0x01, op, 0, 0x06)
    return None


def is_error(response):
    return response is None or len(response) < 1 or response[0] == 0x01


def discover():
    """Full discovery as BlueZ does it before a client sees the database: every primary service (0x10), its
    characteristics (0x08), their descriptors (0x04). A generator: yields request PDUs, receives each raw response
    (an Error Response, or None for none, ends that step), returns a list of services:
    {'start', 'end', 'uuid' (16 bytes), 'characteristics': [{'declaration', 'properties', 'value', 'uuid', 'end',
    'descriptors': [(handle, uuid16bytes)], 'cccd': handle or None}]}."""
    services, start = [], 1
    while start <= 0xFFFF:
        rsp = yield struct.pack("<BHHH", 0x10, start, 0xFFFF, 0x2800)
        if is_error(rsp) or rsp[0] != 0x11 or len(rsp) < 2 or rsp[1] < 6:
            break
        size, last = rsp[1], start
        for i in range(2, len(rsp) - size + 1, size):
            first, end = struct.unpack_from("<HH", rsp, i)
            services.append({"start": first, "end": end, "uuid": uuid_from_le(rsp[i + 4:i + size]),
                             "characteristics": []})
            last = end
        if last >= 0xFFFF or last < start:
            break
        start = last + 1
    for service in services:
        yield from _characteristics(service)
    return services


def _characteristics(service):
    found, start = service["characteristics"], service["start"]
    while start <= service["end"]:
        rsp = yield struct.pack("<BHHH", 0x08, start, service["end"], 0x2803)
        if is_error(rsp) or rsp[0] != 0x09 or len(rsp) < 2 or rsp[1] < 7:
            break
        size, moved = rsp[1], False
        for i in range(2, len(rsp) - size + 1, size):
            declaration, properties, value = struct.unpack_from("<HBH", rsp, i)
            found.append({"declaration": declaration, "properties": properties, "value": value,
                          "uuid": uuid_from_le(rsp[i + 5:i + size]), "descriptors": [], "cccd": None})
            if declaration >= start:
                start, moved = declaration + 1, True
        if not moved:
            break
    for index, characteristic in enumerate(found):
        following = found[index + 1:]
        characteristic["end"] = following[0]["declaration"] - 1 if following else service["end"]
        handle = characteristic["value"] + 1
        while handle <= characteristic["end"]:
            info = yield struct.pack("<BHH", 0x04, handle, characteristic["end"])
            if is_error(info) or info[0] != 0x05 or len(info) < 2 or info[1] not in (1, 2):
                break
            step, moved = (4 if info[1] == 1 else 18), False
            for j in range(2, len(info) - step + 1, step):
                descriptor = struct.unpack_from("<H", info, j)[0]
                kind = uuid_from_le(info[j + 2:j + step])
                characteristic["descriptors"].append((descriptor, kind))
                if kind == uuid_from_le(struct.pack("<H", CCCD)):
                    characteristic["cccd"] = descriptor
                if descriptor >= handle:
                    handle, moved = descriptor + 1, True
            if not moved:
                break


def run_sync(procedure, request):
    """Drives a request generator with `request(pdu) -> response PDU` (blocking); returns the generator's value."""
    try:
        pdu = next(procedure)
        while True:
            pdu = procedure.send(request(pdu))
    except StopIteration as done:
        return done.value


async def run_async(procedure, request):
    """Drives a request generator with `await request(pdu) -> response PDU`; returns the generator's value."""
    try:
        pdu = next(procedure)
        while True:
            pdu = procedure.send(await request(pdu))
    except StopIteration as done:
        return done.value
