/* Placeholder: the BlueZ helper replaces this with the libbluetooth declarations. */
#include <bluetooth/bluetooth.h>
