/* The C surface of cnats (libnats 3.4) that the NATS bridge uses. Only the library's own
 * header is included here: the bridge speaks NATS through cnats alone, never by hand. */
#ifndef NOTIFBUS_CNATS_SHIM_H
#define NOTIFBUS_CNATS_SHIM_H

#include <nats/nats.h>

#endif
