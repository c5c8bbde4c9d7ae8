/*
 * CBlueZShim: the libbluetooth (BlueZ 5.66) declarations bledfu uses, plus `static inline` helpers for the
 * macros Swift cannot import (function-like macros, compound literals, ioctl numbers built with _IOR/_IOW).
 *
 * Declarations only: no logic lives here. Every helper is a one-line constant or a byte-order conversion.
 * Layouts are pinned by Tests/TransportTests/CShimLayoutTests.swift.
 */
#ifndef BLEDFU_CBLUEZSHIM_H
#define BLEDFU_CBLUEZSHIM_H

#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/l2cap.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>

#if defined(__has_attribute) && __has_attribute(swift_name)
#define BLEDFU_SWIFT(name) __attribute__((swift_name(name)))
#else
#define BLEDFU_SWIFT(name)
#endif

/* ---- Byte order (bluetooth.h: htobs/btohs are function-like macros). ---- */

/// Host to Bluetooth (little-endian) 16-bit.
static inline uint16_t bledfu_htobs(uint16_t value) { return htobs(value); }
/// Bluetooth (little-endian) to host 16-bit.
static inline uint16_t bledfu_btohs(uint16_t value) { return btohs(value); }

/* ---- Address constants (BDADDR_ANY is a compound literal). ---- */

/// The all-zero address: "any adapter" in bind().
static inline bdaddr_t bledfu_bdaddr_any(void) { bdaddr_t any = {{0, 0, 0, 0, 0, 0}}; return any; }

/* ---- Socket-level constants (plain #defines import, but these are pinned here for one place to look). ---- */

static const int BLEDFU_AF_BLUETOOTH = AF_BLUETOOTH;      /* 31 */
static const int BLEDFU_BTPROTO_L2CAP = BTPROTO_L2CAP;    /* 0 */
static const int BLEDFU_BTPROTO_HCI = BTPROTO_HCI;        /* 1 */
static const int BLEDFU_SOL_BLUETOOTH = SOL_BLUETOOTH;    /* 274 */
static const int BLEDFU_SOL_L2CAP = SOL_L2CAP;            /* 6 */
static const int BLEDFU_SOL_HCI = SOL_HCI;                /* 0 */
static const int BLEDFU_BT_SECURITY = BT_SECURITY;        /* 4, struct bt_security */
static const int BLEDFU_L2CAP_CONNINFO = L2CAP_CONNINFO;  /* 2, struct l2cap_conninfo */
static const int BLEDFU_HCI_FILTER = HCI_FILTER;          /* 2, struct hci_filter */
static const uint8_t BLEDFU_BDADDR_LE_PUBLIC = BDADDR_LE_PUBLIC;  /* 1 */
static const uint8_t BLEDFU_BDADDR_LE_RANDOM = BDADDR_LE_RANDOM;  /* 2 */
static const uint16_t BLEDFU_ATT_CID = 4;
static const uint16_t BLEDFU_HCI_CHANNEL_RAW = HCI_CHANNEL_RAW;   /* 0 */
static const int BLEDFU_HCI_MAX_DEV = HCI_MAX_DEV;                /* 16 */
/// Bit number of "up" in hci_dev_info.flags (enum in hci.h).
static const int BLEDFU_HCI_UP_BIT = HCI_UP;
/// Read-only bitmask of the link's PHYs (kernel >= 5.10), at SOL_BLUETOOTH; a uint32_t.
static const int BLEDFU_BT_PHY = BT_PHY;                          /* 14 */
static const uint32_t BLEDFU_BT_PHY_LE_1M_TX = BT_PHY_LE_1M_TX;         /* 0x0200 */
static const uint32_t BLEDFU_BT_PHY_LE_1M_RX = BT_PHY_LE_1M_RX;         /* 0x0400 */
static const uint32_t BLEDFU_BT_PHY_LE_2M_TX = BT_PHY_LE_2M_TX;         /* 0x0800 */
static const uint32_t BLEDFU_BT_PHY_LE_2M_RX = BT_PHY_LE_2M_RX;         /* 0x1000 */
static const uint32_t BLEDFU_BT_PHY_LE_CODED_TX = BT_PHY_LE_CODED_TX;   /* 0x2000 */
static const uint32_t BLEDFU_BT_PHY_LE_CODED_RX = BT_PHY_LE_CODED_RX;   /* 0x4000 */

/* ---- ioctl numbers (built with _IOR, not importable). ---- */

static inline unsigned long bledfu_hcigetdevlist(void) BLEDFU_SWIFT("getter:BLEDFU_HCIGETDEVLIST()");
static inline unsigned long bledfu_hcigetdevlist(void) { return HCIGETDEVLIST; }
static inline unsigned long bledfu_hcigetdevinfo(void) BLEDFU_SWIFT("getter:BLEDFU_HCIGETDEVINFO()");
static inline unsigned long bledfu_hcigetdevinfo(void) { return HCIGETDEVINFO; }

/* ---- HCIGETDEVLIST buffer: hci_dev_list_req has a flexible array member Swift cannot index. ---- */

/// `struct hci_dev_list_req` with room for HCI_MAX_DEV entries (same layout: dev_num@0, dev_req@4, 8 bytes each).
struct bledfu_hci_dev_list {
    uint16_t dev_num;
    struct hci_dev_req dev_req[HCI_MAX_DEV];
};

/* ---- Peer credentials of a Unix socket (SO_PEERCRED; struct ucred needs _GNU_SOURCE, so its layout is here). ---- */

/// `struct ucred` (socket(7)): pid@0, uid@4, gid@8.
struct bledfu_ucred {
    int32_t pid;
    uint32_t uid;
    uint32_t gid;
};
static const int BLEDFU_SO_PEERCRED = SO_PEERCRED;                /* 17 */

/* ---- HCIGETCONNLIST: the adapter's links (no capability needed). ---- */

static inline unsigned long bledfu_hcigetconnlist(void) BLEDFU_SWIFT("getter:BLEDFU_HCIGETCONNLIST()");
static inline unsigned long bledfu_hcigetconnlist(void) { return HCIGETCONNLIST; }
/* hci_conn_info.type of an LE link: the kernel's LE_LINK (include/net/bluetooth/hci.h), not in libbluetooth. */
static const uint8_t BLEDFU_LE_LINK = 0x80;
enum { BLEDFU_CONN_LIST_MAX = 32 };

/// `struct hci_conn_list_req` with room for BLEDFU_CONN_LIST_MAX entries (same layout: dev_id@0, conn_num@2,
/// conn_info@4, 16 bytes each: handle u16, bdaddr, type u8, out u8, state u16, link_mode u32).
struct bledfu_hci_conn_list {
    uint16_t dev_id;
    uint16_t conn_num;
    struct hci_conn_info conn_info[BLEDFU_CONN_LIST_MAX];
};

#endif /* BLEDFU_CBLUEZSHIM_H */
